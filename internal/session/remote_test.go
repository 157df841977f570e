package session

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/agent/reconcile"
	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/agent/rpc/server"
)

// A controller waits for an agent's own reconcile to give the lease back,
// saying so; another controller's lease still fails it at once.
func TestLeaseWaitsForReconcile(t *testing.T) {
	ctx := context.Background()
	srv := server.NewServer(agenttest.New("nfv1"), nil, server.Build{}, nil, server.Hooks{})
	g := server.NewGRPCServer(srv, nil, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	dial := func() *client.Client {
		c, err := client.Dial("nfv1", lis.Addr().String(), nil)
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
	got, err := leaseAll(ctx, &ew, map[string]*client.Client{"nfv1": c})
	if err != nil || len(got) != 1 {
		t.Fatalf("leaseAll while the agent reconciled: %v", err)
	}
	if !strings.Contains(ew.String(), "waiting for node nfv1: its agent is reconciling it ("+reconcile.WhoPrefix) {
		t.Errorf("not told: %q", ew.String())
	}

	start := time.Now()
	_, err = leaseAll(ctx, &bytes.Buffer{}, map[string]*client.Client{"nfv1": dial()})
	if err == nil || !strings.Contains(err.Error(), "domain is being applied by pid") {
		t.Fatalf("a second controller: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a second controller waited %v", d)
	}
}
