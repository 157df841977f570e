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

func TestRoutes(t *testing.T) {
	ctx := context.Background()
	t.Run("served", func(t *testing.T) {
		want := []nodestate.FIBRoute{{
			Dst: netip.MustParsePrefix("fc00:4::/64"), Protocol: nodestate.ProtoBGP, Type: "unicast", Metric: 20,
			NextHops: []nodestate.FIBNextHop{
				{Via: netip.MustParseAddr("fc00:15::5"), Dev: "eth-r1"},
				{Via: netip.MustParseAddr("fc00:16::6"), Dev: "eth-r2", LinkDown: true},
			},
		}, {Dst: netip.MustParsePrefix("fc00:15::/64"), Protocol: 2, Type: "unicast", Metric: 256, NextHops: []nodestate.FIBNextHop{{Dev: "eth-r1"}}}}
		e := serveAs(t, func(f *agenttest.Agent) agent.Agent {
			f.With.Routes = agenttest.RoutesFunc(func(context.Context) ([]nodestate.FIBRoute, error) { return want, nil })
			return f
		})
		c := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
		got, err := c.MainRoutes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
	})
	t.Run("agent too old", func(t *testing.T) {
		// The fake has no RouteReader: the server answers Unimplemented,
		// as an agent built before the RPC does.
		e := serve(t)
		c := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
		_, err := c.MainRoutes(ctx)
		if !errors.Is(err, agent.ErrTooOld) {
			t.Fatalf("MainRoutes = %v, want agent.ErrTooOld", err)
		}
	})
}
