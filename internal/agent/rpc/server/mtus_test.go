package server

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/pki"
)

func TestMTUs(t *testing.T) {
	ctx := context.Background()
	dsts := []netip.Addr{netip.MustParseAddr("fc00:2::e"), netip.MustParseAddr("fc00:9::1")}
	t.Run("served", func(t *testing.T) {
		var asked []netip.Addr
		want := &nodestate.MTUs{Links: map[string]int{"lo": 65536, "eth-r1": 1500},
			Paths: []nodestate.PathMTU{{Dst: dsts[0], Dev: "eth-r1", MTU: 1500}, {Dst: dsts[1], Error: "network is unreachable"}}}
		e := serveAs(t, func(f *agenttest.Agent) agent.Agent {
			f.With.MTU = agenttest.MTUFunc(func(_ context.Context, d []netip.Addr) (*nodestate.MTUs, error) {
				asked = d
				return want, nil
			})
			return f
		})
		c := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
		got, err := c.MTUs(ctx, dsts)
		if err != nil {
			t.Fatal(err)
		}
		addrs := cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
		if diff := cmp.Diff(dsts, asked, addrs); diff != "" {
			t.Errorf("destinations the agent was asked (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, got, addrs); diff != "" {
			t.Errorf("mtus (-want +got):\n%s", diff)
		}
	})
	t.Run("agent too old", func(t *testing.T) {
		// No MTUReader: the server answers Unimplemented, as an agent
		// built before the RPC does.
		e := serve(t)
		c := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
		if _, err := c.MTUs(ctx, dsts); !errors.Is(err, agent.ErrTooOld) {
			t.Fatalf("MTUs = %v, want agent.ErrTooOld", err)
		}
	})
}
