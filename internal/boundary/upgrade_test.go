package boundary

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// A boundary_in of a segchain before O-flag sampling (simulated: the
// pinned link made to run a program that does not read the sampling
// map) cannot mark, and says so; the next Apply puts the current
// program in its place (a new link first, then the old one goes) and
// sampling can mark.
func TestApplyReplacesOlderBoundaryIn(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "s15of")
	testutil.Exec(t, ns, "ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1")
	testutil.Exec(t, ns, "ip", "link", "set", "d0", "up")
	testutil.Exec(t, ns, "ip", "link", "set", "d1", "up")
	t.Cleanup(func() { _ = Remove(ns) })
	b := nodestate.Boundary{Trusted: []string{"d1"}, Locators: []netip.Prefix{netip.MustParsePrefix("fc00:1::/64")}}
	if err := Apply(ns, b); err != nil {
		t.Fatal(err)
	}
	s, ifs, err := OpenSampling(ns)
	if err != nil || len(ifs) != 1 {
		t.Fatalf("OpenSampling after Apply: %v %v", ifs, err)
	}
	s.Close()

	// The older program: boundary_out (it never reads bnd_sample) in
	// the pinned boundary_in link.
	n, err := open(ns, false)
	if err != nil || n == nil {
		t.Fatalf("open: %v", err)
	}
	defer n.close()
	var ix int
	if err := nsutil.Do(ns, func() error {
		i, err := net.InterfaceByName("d0")
		if err == nil {
			ix = i.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	old, err := n.program("boundary_out")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := link.LoadPinnedLink(pin(n.dir, ix, "in"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Update(old); err != nil {
		t.Fatal(err)
	}
	lk.Close()
	if _, _, err := OpenSampling(ns); !errors.Is(err, ErrNoSampling) {
		t.Fatalf("OpenSampling with an older boundary_in: %v, want ErrNoSampling", err)
	}
	// Observe says so (apply then calls Apply).
	if got, err := Observe(ns); err != nil || got == nil || len(got.Unfiltered) != 1 || got.Unfiltered[0] != "d0" {
		t.Fatalf("Observe with an older boundary_in: %+v %v, want d0 unfiltered", got, err)
	}

	if err := Apply(ns, b); err != nil {
		t.Fatal(err)
	}
	s, ifs, err = OpenSampling(ns)
	if err != nil || len(ifs) != 1 || ifs[0] != ix {
		t.Fatalf("OpenSampling after Apply again: %v %v, want [%d]", ifs, err, ix)
	}
	s.Close()
	if got, err := Observe(ns); err != nil || got == nil || len(got.Unfiltered) != 0 {
		t.Errorf("Observe after the replacement: %+v %v, want nothing unfiltered", got, err)
	}
}
