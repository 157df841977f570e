package boundary

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// A Reader keeps the maps open between observations, reads their entries
// afresh each time, and notices a map pinned in place of a kept one (one
// map replaced by hand; every map, by destroy then apply): it then opens
// the maps again instead of reading the replaced ones.
func TestPrivilegedReaderNoticesReplacedMaps(t *testing.T) {
	ns := vethNS(t)
	a, b := netip.MustParsePrefix("fc00:a::/48"), netip.MustParsePrefix("fc00:b::/48")
	apply := func(locs ...netip.Prefix) {
		t.Helper()
		if err := Apply(ns, nodestate.Boundary{Trusted: []string{"d1"}, Locators: locs}); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(ns)
	t.Cleanup(r.Close)
	check := func(what string, want []netip.Prefix, opens uint64) {
		t.Helper()
		got, err := r.Observe(nil)
		if err != nil || got == nil {
			t.Fatalf("%s: Observe: %+v %v", what, got, err)
		}
		if diff := cmp.Diff(want, got.Locators, cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
			t.Errorf("%s: locators (-want +got):\n%s", what, diff)
		}
		// The reader agrees with an observation that opens everything.
		fresh, err := ObserveWith(ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fresh, got, cmp.Comparer(func(x, y netip.Prefix) bool { return x == y }),
			cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
			t.Errorf("%s: Reader against ObserveWith (-ObserveWith +Reader):\n%s", what, diff)
		}
		if r.Opens() != opens {
			t.Errorf("%s: maps opened %d times, want %d", what, r.Opens(), opens)
		}
	}

	apply(a)
	check("first", []netip.Prefix{a}, 1)
	check("again", []netip.Prefix{a}, 1) // kept
	apply(a, b)                          // entries changed in place
	check("entries changed", []netip.Prefix{a, b}, 1)

	// bnd_lpm replaced by an empty map of the same layout, pinned in its
	// place: a kept map would still say a and b.
	n, err := openRead(ns)
	if err != nil || n == nil {
		t.Fatalf("openRead: %v", err)
	}
	dir := n.dir
	n.close()
	spec, err := loader.Spec()
	if err != nil {
		t.Fatal(err)
	}
	ms := spec.Maps["bnd_lpm"].Copy()
	ms.Pinning = ebpf.PinNone
	m, err := ebpf.NewMap(ms)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := filepath.Join(dir, "bnd_lpm")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := m.Pin(p); err != nil {
		t.Fatal(err)
	}
	check("bnd_lpm replaced", []netip.Prefix{}, 2)

	// Destroy, then apply anew: every map is another.
	if err := Remove(ns); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Observe(nil); err != nil || got != nil {
		t.Fatalf("after Remove: %+v %v, want nothing", got, err)
	}
	apply(b)
	check("removed and applied again", []netip.Prefix{b}, 3)
	check("kept again", []netip.Prefix{b}, 3)
}

// BenchmarkObserve compares an observation that opens the maps (as before
// session 17) with the Reader's, on one namespace with the filter on two
// interfaces: go test -run X -bench Observe ./internal/boundary/ (root).
func BenchmarkObserve(b *testing.B) {
	ns := vethNS(b)
	if err := Apply(ns, nodestate.Boundary{Locators: []netip.Prefix{netip.MustParsePrefix("fc00:a::/48")}}); err != nil {
		b.Fatal(err)
	}
	ifs, err := ListInterfaces(ns)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ObserveWith", func(b *testing.B) {
		for b.Loop() {
			if _, err := ObserveWith(ns, ifs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Reader", func(b *testing.B) {
		r := NewReader(ns)
		defer r.Close()
		for b.Loop() {
			if _, err := r.Observe(ifs); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// vethNS is a namespace of its own with a veth pair d0–d1 up, the
// boundary filter removed from it at the end (root).
func vethNS(tb testing.TB) string {
	tb.Helper()
	testutil.RequireRoot(tb)
	ns := testutil.NewNetns(tb, "s17n")
	testutil.Exec(tb, ns, "ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1")
	testutil.Exec(tb, ns, "ip", "link", "set", "d0", "up")
	testutil.Exec(tb, ns, "ip", "link", "set", "d1", "up")
	tb.Cleanup(func() { _ = Remove(ns) })
	return ns
}
