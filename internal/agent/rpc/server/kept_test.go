package server

import (
	"context"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/pki"
)

// ObserveDigest with kept (a no-op apply that made no plan) observes the
// node against the intent the agent keeps, and only if that intent's
// digest is the one expected: its state digest is then the one a
// controller sending that intent as want_json gets. Without an intent,
// or with another, nothing is observed and kept is false.
func TestObserveKeptDigest(t *testing.T) {
	st := &keptIntents{}
	e, _, _ := serveIntents(t, st)
	c := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
	ctx := context.Background()
	want := &nodestate.Node{Name: "nfv1", TunSrc: "fc00:2::1", Sysctls: []nodestate.Sysctl{{Key: "net.x", Value: "1"}}}
	dg := nodestate.Digest(want, want)
	if d, err := c.ObserveKeptDigest(ctx, dg); err != nil || d.Kept || d.Intent != "" || d.State != "" || e.fake.Observed() != 0 {
		t.Fatalf("no intent kept: %+v, %v, %d observation(s); want not kept, none", d, err, e.fake.Observed())
	}
	if err := c.AcquireLease(ctx, "ctl", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.SetIntent(ctx, want); err != nil {
		t.Fatal(err)
	}
	ref, err := c.ObserveDigest(ctx, want, dg, false)
	if err != nil {
		t.Fatal(err)
	}
	n := e.fake.Observed()
	d, err := c.ObserveKeptDigest(ctx, dg)
	if err != nil || !d.Kept || d.State != ref.State || d.Intent != dg || e.fake.Observed() != n+1 {
		t.Fatalf("the intent expected kept: %+v, %v; want kept, state %q (as against want_json), intent %q, one observation", d, err, ref.State, dg)
	}
	if d, err := c.ObserveKeptDigest(ctx, "another"); err != nil || d.Kept || d.State != "" || d.Intent != dg || e.fake.Observed() != n+1 {
		t.Fatalf("another intent expected: %+v, %v; want not kept, no state, intent %q, no observation", d, err, dg)
	}
}
