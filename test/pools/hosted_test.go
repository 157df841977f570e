package pools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/pool/datapath"
	"github.com/segchain/segchain/internal/testutil"
)

// hostShape is how pool_in runs on the headend's host-facing interface
// eth-s: hosted (boundary_in there, the filter's slot holding a
// program) and whether pool_in has a live link of its own there.
type hostShape struct {
	filtered, slot, ownLink bool
}

func (e *env) hostShape() hostShape {
	e.t.Helper()
	ns := e.NS("ingress")
	var idx int
	if err := nsutil.Do(ns, func() error {
		i, err := net.InterfaceByName("eth-s")
		if err == nil {
			idx = i.Index
		}
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	hosting, err := boundary.Hosting(ns)
	if err != nil {
		e.t.Fatal(err)
	}
	id, err := boundary.Next(ns)
	if err != nil {
		e.t.Fatal(err)
	}
	name, _, err := bpfpin.Namespace(ns)
	if err != nil {
		e.t.Fatal(err)
	}
	dir, err := bpfpin.Dir(name, "pool")
	if err != nil {
		e.t.Fatal(err)
	}
	_, statErr := os.Stat(filepath.Join(dir, "in", fmt.Sprintf("tcx-%d", idx)))
	return hostShape{filtered: hosting[idx], slot: id != 0, ownLink: statErr == nil}
}

// spread sends flows from s and checks every instance got the model's
// share (all instances live).
func (e *env) spread(what string, from int) {
	e.t.Helper()
	s0 := e.stats()
	sent := e.send(ports(from, 60))
	want := e.expect(sent, e.pool.AllLive(), nil)
	if got := delta(s0, e.stats()); fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Fatalf("%s: instances got %v packets, model %v", what, got, want)
	}
}

// statusCheck is `segchain status --lab L --check`'s exit status.
func (e *env) statusCheck() (int, string) {
	e.t.Helper()
	out, err := testutil.Segchain(bin, "status", "-f", "testdata/pooled.yaml", "--lab", e.Name, "--check")
	if err == nil {
		return 0, out
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		e.t.Fatalf("status --check: %v\n%s", err, out)
	}
	return ee.ExitCode(), out
}

// TestPoolHostedLifecycle: on the headend's host-facing interface the
// boundary filter hosts pool_in (boundary_in tail-calls it: no link of
// its own there), and the pool chooses as the model says; a slot emptied
// by hand is drift (the pool kind's faults, status --check) that apply
// repairs; with the filter turned off while the pool stays, pool_in gets
// its own link again and keeps choosing, and back again when the filter
// returns; the pool removed, the slot is empty and the filter stays.
func TestPoolHostedLifecycle(t *testing.T) {
	e := setupAs(t, "testdata/pooled.yaml", pool.Failover, "s18pt")
	ns := e.NS("ingress")
	apply := func(what string) {
		t.Helper()
		if _, err := e.Session(e.Domain).Apply(context.Background()); err != nil {
			t.Fatalf("%s: apply: %v", what, err)
		}
	}
	// status reads the lab's domain file: only where the domain is
	// the file's (the filter on).
	healthy := func(what string, status bool) {
		t.Helper()
		if f, err := (datapath.NodeKind{}).Faults(ns); err != nil || len(f) > 0 {
			t.Errorf("%s: pool faults %q (%v), want none", what, f, err)
		}
		if !status {
			return
		}
		if rc, out := e.statusCheck(); rc != 0 {
			t.Errorf("%s: status --check exit %d, want 0\n%s", what, rc, out)
		}
	}

	if s := e.hostShape(); s != (hostShape{filtered: true, slot: true}) {
		t.Fatalf("after apply: %+v, want pool_in hosted by the filter on eth-s, no link of its own", s)
	}
	healthy("hosted", true)
	e.spread("hosted", 41000)

	// Drift: the slot emptied by hand.
	if err := boundary.ClearNext(ns); err != nil {
		t.Fatal(err)
	}
	f, err := (datapath.NodeKind{}).Faults(ns)
	if err != nil || len(f) != 1 || !strings.Contains(f[0], "slot") || !strings.Contains(f[0], "eth-s") {
		t.Errorf("slot emptied: pool faults %q (%v), want the slot on eth-s named", f, err)
	}
	if rc, out := e.statusCheck(); rc != 2 {
		t.Errorf("slot emptied: status --check exit %d, want 2\n%s", rc, out)
	}
	apply("repair")
	if s := e.hostShape(); s != (hostShape{filtered: true, slot: true}) {
		t.Fatalf("after the repair: %+v, want hosted", s)
	}
	healthy("repaired", true)
	e.spread("repaired", 41100)

	// The filter off, the pool stays: pool_in's own link.
	e.Domain.Security.Boundary.Off = true
	apply("filter off")
	if s := e.hostShape(); s != (hostShape{ownLink: true}) {
		t.Fatalf("filter off: %+v, want pool_in's own link on eth-s", s)
	}
	healthy("filter off", false)
	e.spread("filter off", 41200)

	// And on again: hosted, the own link gone.
	e.Domain.Security.Boundary.Off = false
	apply("filter on")
	if s := e.hostShape(); s != (hostShape{filtered: true, slot: true}) {
		t.Fatalf("filter on again: %+v, want hosted", s)
	}
	healthy("filter on", true)
	e.spread("filter on", 41300)

	// The pool removed (the kind's apply with none): the slot is
	// cleared, the filter stays on eth-s.
	if err := (datapath.NodeKind{}).Apply(ns, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if s := e.hostShape(); s != (hostShape{filtered: true}) {
		t.Fatalf("pool removed: %+v, want the filter without a hosted program", s)
	}
}
