package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
)

// fakeClock is a server clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A renewal that arrives after the lease expired, nobody having taken it
// since (a loaded machine), keeps the lease's id: the controller may never
// have seen the reply of a renewal that issued a new one (its call timed
// out after the agent answered), and then every Execute it sends was
// refused as "domain is being applied by" itself — a 500-node apply failed
// so. Taken by another controller meanwhile, the late renewal is refused.
func TestLeaseRenewedLateKeepsItsID(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	dir, tc := newPKI(t)
	e := startWith(t, dir, tc, nil, func(s *Server) { s.now = clk.now })
	ctx := context.Background()
	c, _ := e.raw(t)
	const holder = "pid 15003 (segchain apply) on host vm"
	l, err := c.AcquireLease(ctx, &pb.AcquireLeaseRequest{Holder: holder, TtlSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	clk.add(45 * time.Second) // the renewals were late: expired
	r, err := c.AcquireLease(ctx, &pb.AcquireLeaseRequest{Holder: holder, TtlSeconds: 30, LeaseId: l.LeaseId})
	if err != nil {
		t.Fatalf("late renewal: %v", err)
	}
	if r.LeaseId != l.LeaseId {
		t.Fatalf("late renewal issued lease %s, want the same %s (a lost reply would strand the controller)", r.LeaseId, l.LeaseId)
	}
	ops, err := agent.MarshalOps([]agent.Op{addOp})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute(ctx, &pb.ExecuteRequest{LeaseId: l.LeaseId, OpsJson: ops}); err != nil {
		t.Fatalf("execute with the revived lease: %v", err)
	}

	// Expired again, and another controller takes it before the renewal.
	clk.add(45 * time.Second)
	o, _ := e.raw(t)
	if _, err := o.AcquireLease(ctx, &pb.AcquireLeaseRequest{Holder: "pid 2 (segchain apply) on host b", TtlSeconds: 30}); err != nil {
		t.Fatalf("another controller after expiry: %v", err)
	}
	_, err = c.AcquireLease(ctx, &pb.AcquireLeaseRequest{Holder: holder, TtlSeconds: 30, LeaseId: l.LeaseId})
	if err == nil || !strings.Contains(err.Error(), "being applied by pid 2") {
		t.Fatalf("late renewal after another controller took the lease: %v, want refused", err)
	}
}

// A change under an expired lease's own id, nobody having taken it since,
// revives it (a 500-node BGP apply's renewals came later than the TTL and
// its next Execute was refused "no lease held"); the revived lease is held
// again for its TTL, so another controller is refused meanwhile. Once
// another controller took it, or it was released, the old id changes
// nothing.
func TestLeaseRevivedByItsHoldersChange(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	dir, tc := newPKI(t)
	e := startWith(t, dir, tc, nil, func(s *Server) { s.now = clk.now })
	ctx := context.Background()
	c, _ := e.raw(t)
	const holder = "pid 15003 (segchain apply) on host vm"
	l, err := c.AcquireLease(ctx, &pb.AcquireLeaseRequest{Holder: holder, TtlSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := agent.MarshalOps([]agent.Op{addOp})
	if err != nil {
		t.Fatal(err)
	}
	clk.add(45 * time.Second) // no renewal came in time
	if _, err := c.Execute(ctx, &pb.ExecuteRequest{LeaseId: l.LeaseId, OpsJson: ops}); err != nil {
		t.Fatalf("execute under the expired, untaken lease: %v", err)
	}
	h, err := c.Health(ctx, &pb.HealthRequest{})
	if err != nil || h.LeaseHolder != holder {
		t.Fatalf("after the revival the lease holder is %q (%v), want %q", h.GetLeaseHolder(), err, holder)
	}
	clk.add(10 * time.Second) // within the revived TTL: still held
	o, _ := e.raw(t)
	other := &pb.AcquireLeaseRequest{Holder: "pid 2 (segchain apply) on host b", TtlSeconds: 30}
	if _, err := o.AcquireLease(ctx, other); err == nil || !strings.Contains(err.Error(), "being applied by "+holder) {
		t.Fatalf("another controller during the revived lease: %v, want refused", err)
	}

	clk.add(45 * time.Second) // expired again; this time another takes it
	ol, err := o.AcquireLease(ctx, other)
	if err != nil {
		t.Fatalf("another controller after expiry: %v", err)
	}
	if _, err := c.Execute(ctx, &pb.ExecuteRequest{LeaseId: l.LeaseId, OpsJson: ops}); err == nil || !strings.Contains(err.Error(), "being applied by pid 2") {
		t.Fatalf("execute under a lease another controller took: %v, want refused", err)
	}
	if _, err := o.ReleaseLease(ctx, &pb.ReleaseLeaseRequest{LeaseId: ol.LeaseId}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Execute(ctx, &pb.ExecuteRequest{LeaseId: ol.LeaseId, OpsJson: ops}); err == nil || !strings.Contains(err.Error(), "no lease held") {
		t.Fatalf("execute under a released lease: %v, want refused", err)
	}
}
