package controller

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// routedAgent is an agenttest.Agent that also reports its main table.
type routedAgent struct {
	*agenttest.Agent
	routes []nodestate.FIBRoute
}

func (r routedAgent) Caps() agent.Caps { return agent.Caps{Routes: r} }

func (r routedAgent) MainRoutes(context.Context) ([]nodestate.FIBRoute, error) { return r.routes, nil }

// TestStatusPath: status traces each chain through the routes the agents
// report, and a node whose agent cannot report them says so in the path
// without failing status.
func TestStatusPath(t *testing.T) {
	p := twoNodePlan("fc00:2::100")
	p.Nodes["mid"] = &nodestate.Node{Name: "mid"}
	p.Chains = []plan.Chain{{Name: "web", Ingress: "ing", Hops: []plan.Hop{{SID: mustAddr("fc00:2::100"), Node: "nfv", Behavior: "End"}}}}
	p.Links = []plan.Link{
		{Node: "ing", Iface: "eth-mid", Addrs: []netip.Prefix{mustPrefix("fc00:12::1/64")}, Peer: "mid", PeerIface: "eth-ing"},
		{Node: "mid", Iface: "eth-ing", Addrs: []netip.Prefix{mustPrefix("fc00:12::3/64")}, Peer: "ing", PeerIface: "eth-mid"},
		{Node: "mid", Iface: "eth-nfv", Addrs: []netip.Prefix{mustPrefix("fc00:23::3/64")}, Peer: "nfv", PeerIface: "eth-mid"},
		{Node: "nfv", Iface: "eth-mid", Addrs: []netip.Prefix{mustPrefix("fc00:23::2/64")}, Peer: "mid", PeerIface: "eth-nfv"},
	}
	c, fakes := newCtl(p)
	via := func(gw, dev string) []nodestate.FIBRoute {
		return []nodestate.FIBRoute{{Dst: mustPrefix("fc00:2::/64"), Protocol: nodestate.Proto, Type: "unicast",
			NextHops: []nodestate.FIBNextHop{{Via: mustAddr(gw), Dev: dev}}}}
	}
	c.Agents["ing"] = routedAgent{fakes["ing"], via("fc00:12::3", "eth-mid")}
	c.Agents["mid"] = routedAgent{fakes["mid"], via("fc00:23::2", "eth-nfv")}
	c.Concurrency = 3

	st := c.Status(context.Background())
	if len(st.Chains) != 1 {
		t.Fatalf("%d chains, want 1", len(st.Chains))
	}
	if diff := cmp.Diff([][]string{{"ing", "mid", "nfv"}}, st.Chains[0].Path[0].Hops); diff != "" {
		t.Errorf("path (-want +got):\n%s", diff)
	}
	for _, n := range st.Nodes {
		if n.Error != "" {
			t.Errorf("node %s: %s", n.Node, n.Error)
		}
	}

	// mid's agent cannot read its routes (an older agent).
	c.Agents["mid"] = fakes["mid"]
	st = c.Status(context.Background())
	seg := st.Chains[0].Path[0]
	if diff := cmp.Diff([]string{"path unknown at mid: agent too old"}, seg.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if got := st.Nodes[1]; got.Node != "mid" || got.Error != "" {
		t.Errorf("node %+v: an agent without routes is no node error", got)
	}
}
