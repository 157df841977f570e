package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// Switching a node between static and BGP routing is make-before-break:
// the speaker starts with the adds (its routes, of a lower metric, are
// preferred as soon as they are learned) and the static routes go with
// the deletes; back to static, the static routes come first and the
// speaker stops last.
func TestBGPSwitchIsMakeBeforeBreak(t *testing.T) {
	static := nodestate.Route{Dst: mustPrefix("fc00:2::/64"), Via: mustAddr("fc00:15::5"), Dev: "eth-r1", Owner: "routing"}
	intent := &nodestate.BGP{ASN: 4200000001, RouterID: "10.0.0.1", Keepalive: 1, Hold: 3,
		Neighbors: []nodestate.BGPNeighbor{{Node: "r1", Addr: mustAddr("fc00:15::5"), Local: mustAddr("fc00:15::1"), Dev: "eth-r1", ASN: 4200000005}}}
	onStatic := &nodestate.Node{Name: "n", Routes: []nodestate.Route{static}}
	onBGP := &nodestate.Node{Name: "n", BGP: intent}

	d := Compute(onStatic, onBGP)
	if len(d.Adds) != 1 || d.Adds[0].Kind != agent.KindBGP || d.Adds[0].BGP == nil {
		t.Fatalf("static → bgp adds: %v", d.Adds)
	}
	if len(d.Deletes) != 1 || d.Deletes[0].Kind != agent.KindRoute {
		t.Fatalf("static → bgp deletes: %v", d.Deletes)
	}
	d = Compute(onBGP, onStatic)
	if len(d.Adds) != 1 || d.Adds[0].Kind != agent.KindRoute {
		t.Fatalf("bgp → static adds: %v", d.Adds)
	}
	if n := len(d.Deletes); n != 1 || d.Deletes[n-1].Kind != agent.KindBGP || d.Deletes[n-1].BGP != nil {
		t.Fatalf("bgp → static deletes: %v", d.Deletes)
	}
	// Observed sessions are never drift; an equal intent is no change.
	obs := &nodestate.Node{Name: "n", BGP: intent, BGPSessions: []nodestate.BGPSession{{Peer: mustAddr("fc00:15::5"), State: "active"}}}
	if d := Compute(obs, onBGP); !d.Empty() {
		t.Errorf("same intent: %v", d.Ops())
	}
	// A changed neighbor is one in-place change.
	changed := *intent
	changed.Neighbors = []nodestate.BGPNeighbor{intent.Neighbors[0]}
	changed.Neighbors[0].ASN = 65005
	d = Compute(obs, &nodestate.Node{Name: "n", BGP: &changed})
	if len(d.Adds) != 1 || !strings.HasPrefix(d.Adds[0].String(), "~ bgp") || !strings.Contains(d.Adds[0].String(), "+ neighbor fc00:15::5 AS65005") {
		t.Errorf("changed neighbor: %v", d.Adds)
	}
	// Teardown stops the speaker.
	d = Teardown(obs, onBGP, nil)
	if len(d.Deletes) != 1 || d.Deletes[0].Kind != agent.KindBGP || d.Deletes[0].BGP != nil {
		t.Errorf("teardown: %v", d.Deletes)
	}
}

// bgpFake is an agenttest.Agent whose speaker's sessions come up after a few
// observations.
type bgpFake struct {
	*agenttest.Agent
	bgp      *nodestate.BGP
	observed int
	upAfter  int
}

func (f *bgpFake) Observe(ctx context.Context, want *nodestate.Node) (*nodestate.Node, error) {
	got, err := f.Agent.Observe(ctx, want)
	if err != nil {
		return nil, err
	}
	f.observed++
	got.BGP = f.bgp
	state := "active"
	if f.observed > f.upAfter {
		state = "established"
	}
	if f.bgp != nil {
		got.BGPSessions = []nodestate.BGPSession{{Peer: mustAddr("fc00:15::5"), State: state}}
	}
	return got, nil
}

func (f *bgpFake) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	for _, op := range ops {
		if op.Kind == agent.KindBGP {
			f.bgp = op.BGP
		}
	}
	return f.Agent.Execute(ctx, ops)
}

// A switch from static to BGP routing removes the static routes only once
// the new sessions are established.
func TestApplyWaitsForBGPBeforeRemovingRoutes(t *testing.T) {
	intent := &nodestate.BGP{ASN: 4200000001, RouterID: "10.0.0.1", Keepalive: 1, Hold: 3,
		Neighbors: []nodestate.BGPNeighbor{{Node: "r1", Addr: mustAddr("fc00:15::5"), Local: mustAddr("fc00:15::1"), Dev: "eth-r1", ASN: 4200000005}}}
	static := nodestate.Route{Dst: mustPrefix("fc00:2::/64"), Via: mustAddr("fc00:15::5"), Dev: "eth-r1"}
	var all []string
	fa := &agenttest.Agent{Name: "n", All: &all, State: nodestate.Node{Name: "n", Routes: []nodestate.Route{static}}}
	f := &bgpFake{Agent: fa, upAfter: 4}
	p := &plan.Plan{Domain: "t", Nodes: map[string]*nodestate.Node{"n": {Name: "n", BGP: intent}}}
	c := &Controller{Plan: p, Agents: map[string]agent.Agent{"n": f}, BGPSettle: 10 * time.Second}
	if _, err := c.Apply(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || !strings.HasPrefix(all[0], "n: + bgp") || !strings.HasPrefix(all[1], "n: - route fc00:2::/64") {
		t.Fatalf("order: %q", all)
	}
	if f.observed <= f.upAfter {
		t.Errorf("routes removed after %d observations, sessions up after %d", f.observed, f.upAfter)
	}
}
