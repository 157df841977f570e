package session

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/reconcile"
	"github.com/segchain/segchain/internal/agent/rpc"
	"github.com/segchain/segchain/internal/nodestate"
)

// idleNode is an agent.Agent with nothing on it.
type idleNode struct{}

func (idleNode) Node() string { return "nfv1" }
func (idleNode) Observe(context.Context, *nodestate.Node) (*nodestate.Node, error) {
	return &nodestate.Node{Name: "nfv1"}, nil
}
func (idleNode) Execute(_ context.Context, ops []agent.Op) (int, error) { return len(ops), nil }
func (idleNode) Counters(context.Context) ([]agent.SIDCounters, error)  { return nil, nil }
func (idleNode) Forget(context.Context) error                           { return nil }
func (idleNode) Originals(context.Context) (map[string]string, error)   { return nil, nil }

// A controller waits for an agent's own reconcile to give the lease back,
// saying so; another controller's lease still fails it at once.
func TestLeaseWaitsForReconcile(t *testing.T) {
	ctx := context.Background()
	srv := rpc.NewServer(idleNode{}, nil, rpc.Build{}, nil, rpc.Hooks{})
	g := rpc.NewGRPCServer(srv, nil, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	dial := func() *rpc.Client {
		c, err := rpc.Dial("nfv1", lis.Addr().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		c.SetTimeout(5 * time.Second)
		t.Cleanup(func() { c.Close() })
		return c
	}
	self, err := srv.AcquireSelf(ctx, reconcile.Who("nfv1"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		self.Release()
	}()
	c := dial()
	var ew bytes.Buffer
	got, err := leaseAll(ctx, &ew, map[string]*rpc.Client{"nfv1": c})
	if err != nil || len(got) != 1 {
		t.Fatalf("leaseAll while the agent reconciled: %v", err)
	}
	if !strings.Contains(ew.String(), "waiting for node nfv1: its agent is reconciling it ("+reconcile.WhoPrefix) {
		t.Errorf("not told: %q", ew.String())
	}

	start := time.Now()
	_, err = leaseAll(ctx, &bytes.Buffer{}, map[string]*rpc.Client{"nfv1": dial()})
	if err == nil || !strings.Contains(err.Error(), "domain is being applied by pid") {
		t.Fatalf("a second controller: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a second controller waited %v", d)
	}
}
