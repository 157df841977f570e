package pools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/pool/datapath"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPoolInDetachedIsDrift: pool_in detached from the headend's
// host-facing interface by hand (bpftool link detach: its pin stays) is
// drift: the pool kind's faults name the interface and status --check
// exits 2; apply attaches it again and the flows spread as the model says.
func TestPoolInDetachedIsDrift(t *testing.T) {
	testutil.RequireTool(t, "bpftool")
	e := setupAs(t, "testdata/pooled.yaml", pool.Failover, "s18pt")
	ns := e.NS("ingress")
	status := func() (int, string) {
		out, err := testutil.Segchain(bin, "status", "-f", "testdata/pooled.yaml", "--lab", e.Name, "--check")
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), out
		}
		if err != nil {
			t.Fatalf("status --check: %v\n%s", err, out)
		}
		return 0, out
	}
	spread := func(what string, from int) {
		t.Helper()
		s0 := e.stats()
		sent := e.send(ports(from, 60))
		want := e.expect(sent, e.pool.AllLive(), nil)
		if got := delta(s0, e.stats()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: instances got %v packets, model %v", what, got, want)
		}
	}
	if f, err := (datapath.NodeKind{}).Faults(ns); err != nil || len(f) > 0 {
		t.Fatalf("after apply: pool faults %q (%v), want none", f, err)
	}
	if rc, out := status(); rc != 0 {
		t.Fatalf("after apply: status --check exit %d\n%s", rc, out)
	}
	spread("applied", 42000)

	var idx int
	if err := nsutil.Do(ns, func() error {
		i, err := net.InterfaceByName("eth-s")
		if err == nil {
			idx = i.Index
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	name, _, err := bpfpin.Namespace(ns)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := bpfpin.Dir(name, "pool")
	if err != nil {
		t.Fatal(err)
	}
	lk, err := link.LoadPinnedLink(filepath.Join(dir, "in", fmt.Sprintf("tcx-%d", idx)), nil)
	if err != nil {
		t.Fatalf("pool_in's link on eth-s: %v", err)
	}
	info, err := lk.Info()
	lk.Close()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bpftool", "link", "detach", "id", fmt.Sprint(info.ID)).CombinedOutput(); err != nil {
		t.Fatalf("bpftool link detach id %d: %v\n%s", info.ID, err, out)
	}
	f, err := (datapath.NodeKind{}).Faults(ns)
	if err != nil || len(f) != 1 || !strings.Contains(f[0], "pool_in not attached to eth-s") {
		t.Errorf("pool_in detached: pool faults %q (%v), want eth-s named", f, err)
	}
	if rc, out := status(); rc != 2 {
		t.Errorf("pool_in detached: status --check exit %d, want 2\n%s", rc, out)
	}

	if _, err := e.Session(e.Domain).Apply(context.Background()); err != nil {
		t.Fatalf("repair: apply: %v", err)
	}
	if f, err := (datapath.NodeKind{}).Faults(ns); err != nil || len(f) > 0 {
		t.Errorf("repaired: pool faults %q (%v), want none", f, err)
	}
	if rc, out := status(); rc != 0 {
		t.Errorf("repaired: status --check exit %d, want 0\n%s", rc, out)
	}
	spread("repaired", 42100)
}
