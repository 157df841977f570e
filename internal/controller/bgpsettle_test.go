package controller

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// routesFake is bgpFake whose main table gets the BGP route to dst only
// at the routesAfter-th read (a route that arrives late, hops away).
type routesFake struct {
	*bgpFake
	dst                netip.Prefix
	reads, routesAfter int
	// installedAtDelete: whether the BGP route was in the table when the
	// static route to dst was deleted.
	installedAtDelete, deleted bool
}

func (f *routesFake) installed() bool { return f.reads >= f.routesAfter }

func (f *routesFake) Caps() agent.Caps { return agent.Caps{Routes: f} }

func (f *routesFake) MainRoutes(context.Context) ([]nodestate.FIBRoute, error) {
	f.reads++
	if !f.installed() {
		return nil, nil
	}
	return []nodestate.FIBRoute{{Dst: f.dst, Protocol: nodestate.ProtoBGP,
		NextHops: []nodestate.FIBNextHop{{Via: mustAddr("fc00:15::5"), Dev: "eth-r1"}}}}, nil
}

func (f *routesFake) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	for _, op := range ops {
		if op.Kind == agent.KindRoute && op.Action == agent.ActDelete && op.Route.Dst == f.dst {
			f.deleted, f.installedAtDelete = true, f.installed()
		}
	}
	return f.bgpFake.Execute(ctx, ops)
}

// Make-before-break waits for the BGP route itself, not a fixed time
// after the sessions came up: the static route to a prefix a router
// originates goes only once the node's table has the BGP route to it.
func TestApplyWaitsForBGPRouteBeforeRemovingStatic(t *testing.T) {
	intent := &nodestate.BGP{ASN: 4200000001, RouterID: "10.0.0.1", Keepalive: 1, Hold: 3,
		Neighbors: []nodestate.BGPNeighbor{{Node: "r1", Addr: mustAddr("fc00:15::5"), Local: mustAddr("fc00:15::1"), Dev: "eth-r1", ASN: 4200000005}}}
	dst := mustPrefix("fc00:2::/64")
	static := nodestate.Route{Dst: dst, Via: mustAddr("fc00:15::5"), Dev: "eth-r1"}
	var all []string
	fa := &agenttest.Agent{Name: "n", All: &all, State: nodestate.Node{Name: "n", Routes: []nodestate.Route{static}}}
	f := &routesFake{bgpFake: &bgpFake{Agent: fa, upAfter: 1}, dst: dst, routesAfter: 5}
	p := &plan.Plan{Domain: "t", Nodes: map[string]*nodestate.Node{"n": {Name: "n", BGP: intent}},
		FRR: map[string]*nodestate.BGP{"r1": {ASN: 4200000005, Prefixes: []netip.Prefix{dst}}}}
	c := &Controller{Plan: p, Agents: map[string]agent.Agent{"n": f}, BGPSettle: 10 * time.Second}
	if _, err := c.Apply(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || !strings.HasPrefix(all[1], "n: - route fc00:2::/64") {
		t.Fatalf("order: %q", all)
	}
	if !f.deleted || !f.installedAtDelete {
		t.Errorf("static route deleted=%v with its BGP replacement installed=%v (after %d route reads, installed at %d): a gap", f.deleted, f.installedAtDelete, f.reads, f.routesAfter)
	}
}
