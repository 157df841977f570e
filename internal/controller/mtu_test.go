package controller

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/chainpath"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// headroomPlan: chain web headed at h (host s on eth-s, r1 on eth-r1, a
// spare eth-x to host t), H.Encaps of 3 SIDs (96 bytes) in table 1001.
func headroomPlan(iif string) *plan.Plan {
	segs := []netip.Addr{mustAddr("fc00:2::e"), mustAddr("fc00:3::e"), mustAddr("fc00:4::d6")}
	h := &nodestate.Node{Name: "h",
		Routes: []nodestate.Route{{Dst: mustPrefix("::/0"), Table: 1001, Dev: "eth-r1",
			Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: segs}}},
		Rules: []nodestate.Rule{{Family: 6, Priority: 1001, Iif: iif, Table: 1001}},
	}
	return &plan.Plan{Domain: "t", Nodes: map[string]*nodestate.Node{"h": h},
		Chains: []plan.Chain{{Name: "web", Ingress: "h", Mode: "encap", Table: 1001, Nodes: []string{"h", "r1"}}},
		Links: []plan.Link{{Node: "h", Iface: "eth-s", Peer: "s"}, {Node: "h", Iface: "eth-r1", Peer: "r1"},
			{Node: "h", Iface: "eth-x", Peer: "t"}},
	}
}

// wantWarning: no warning when want is "", else exactly one starting
// with want.
func wantWarning(t *testing.T, warns []MTUWarning, want string) {
	t.Helper()
	switch {
	case want == "" && len(warns) != 0:
		t.Errorf("warnings %v, want none", warns)
	case want != "" && (len(warns) != 1 || !strings.HasPrefix(warns[0].String(), want)):
		t.Errorf("warnings %v, want one: %s", warns, want)
	}
}

func mtus(links map[string]int, dev string) agenttest.MTUFunc {
	return func(_ context.Context, dsts []netip.Addr) (*nodestate.MTUs, error) {
		m := &nodestate.MTUs{Links: links}
		for _, d := range dsts {
			m.Paths = append(m.Paths, nodestate.PathMTU{Dst: d, Dev: dev, MTU: links[dev]})
		}
		return m, nil
	}
}

func TestHeadroom(t *testing.T) {
	for _, tc := range []struct {
		name  string
		iif   string
		links map[string]int
		want  string // the warning, "" none
	}{
		{"fabric 9000", "", map[string]int{"eth-s": 1500, "eth-r1": 9000, "eth-x": 1500}, ""},
		{"all 1500", "", map[string]int{"eth-s": 1500, "eth-r1": 1500, "eth-x": 1500},
			"mtu: chain web at h: 1500 (eth-s) + 96 bytes of SRv6 headers > 1500 (eth-r1): Linux drops packets over 1404 bytes"},
		{"largest host side", "", map[string]int{"eth-s": 1500, "eth-r1": 1560, "eth-x": 1480},
			"mtu: chain web at h: 1500 (eth-s) + 96 bytes of SRv6 headers > 1560 (eth-r1): Linux drops packets over 1464 bytes"},
		{"just fits", "", map[string]int{"eth-s": 1500, "eth-r1": 1596, "eth-x": 1500}, ""},
		{"one byte short", "", map[string]int{"eth-s": 1500, "eth-r1": 1595, "eth-x": 1500},
			"mtu: chain web at h: 1500 (eth-s) + 96 bytes of SRv6 headers > 1595 (eth-r1): Linux drops packets over 1499 bytes"},
		{"iif only", "eth-x", map[string]int{"eth-s": 9000, "eth-r1": 1500, "eth-x": 1480},
			"mtu: chain web at h: 1480 (eth-x) + 96 bytes of SRv6 headers > 1500 (eth-r1): Linux drops packets over 1404 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, agents := newCtl(headroomPlan(tc.iif))
			agents["h"].With = agent.Caps{MTU: mtus(tc.links, "eth-r1")}
			warns, notes := c.Headroom(context.Background(), nil)
			if len(notes) != 0 {
				t.Errorf("notes %v", notes)
			}
			wantWarning(t, warns, tc.want)
		})
	}
}

// TestHeadroomMultihomed: a headend with a second uplink to another node
// of the domain (a second spine, MTU 9000 like the way out) takes no
// chain input from it: its boundary filter trusts it, so no warning; the
// host side still counts. (Before, every interface to a node the chain
// does not cross was an input: each chain of a generated Clos lab, whose
// leaves have several spines, was warned of.)
func TestHeadroomMultihomed(t *testing.T) {
	for _, tc := range []struct {
		name string
		host int
		want string
	}{
		{"fabric 9000", 1500, ""},
		{"host side too large", 8960, "mtu: chain web at h: 8960 (eth-s) + 96 bytes of SRv6 headers > 9000 (eth-r1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := headroomPlan("")
			p.Links = append(p.Links, plan.Link{Node: "h", Iface: "eth-r2", Peer: "r2"})
			p.Nodes["h"].Boundary = &nodestate.Boundary{Trusted: []string{"eth-r1", "eth-r2", "s6svc*"}}
			c, agents := newCtl(p)
			agents["h"].With = agent.Caps{MTU: mtus(map[string]int{"eth-s": tc.host, "eth-r1": 9000, "eth-r2": 9000, "eth-x": 1500}, "eth-r1")}
			warns, _ := c.Headroom(context.Background(), nil)
			wantWarning(t, warns, tc.want)
		})
	}
}

// TestHeadroomOldAgent: an agent without the MTUs RPC (ErrTooOld, or no
// capability) is a note, not a warning nor an error; Status carries it.
func TestHeadroomOldAgent(t *testing.T) {
	for _, caps := range []agent.Caps{{}, {MTU: agenttest.MTUFunc(func(context.Context, []netip.Addr) (*nodestate.MTUs, error) {
		return nil, agent.ErrTooOld
	})}} {
		c, agents := newCtl(headroomPlan(""))
		agents["h"].With = caps
		warns, notes := c.Headroom(context.Background(), nil)
		if len(warns) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "node h: its agent cannot report MTUs") {
			t.Errorf("warnings %v, notes %v: want one note for h", warns, notes)
		}
		st := c.Status(context.Background())
		if len(st.MTUNotes) != 1 {
			t.Errorf("status mtu notes %v", st.MTUNotes)
		}
	}
}

// TestHeadroomNoPlan: a controller without a plan (a no-op apply that
// made none) checks nothing and does not panic.
func TestHeadroomNoPlan(t *testing.T) {
	c := &Controller{}
	if w, n := c.Headroom(context.Background(), nil); w != nil || n != nil {
		t.Errorf("no plan: %v %v", w, n)
	}
}

// segmentPlan: headroomPlan's chain web with its hops: End at nfv1,
// End at nfv2, End.DX6 at egress (the chain's SIDs), every node with an
// agent; router r between nfv1 and nfv2.
func segmentPlan(second string) *plan.Plan {
	p := headroomPlan("")
	for _, n := range []string{"nfv1", "r", "nfv2", "egress"} {
		p.Nodes[n] = &nodestate.Node{Name: n}
	}
	p.Chains[0].Hops = []plan.Hop{{SID: mustAddr("fc00:2::e"), Node: "nfv1", Behavior: "End"},
		{SID: mustAddr("fc00:3::e"), Node: "nfv2", Behavior: second},
		{SID: mustAddr("fc00:4::d6"), Node: "egress", Behavior: "End.DX6"}}
	return p
}

// TestHeadroomSegments: what the hosts send in must fit after the
// headend too: at the node of each SID towards the next one and, on a
// traced path, at the transit nodes between. The last SID's node
// (decapsulating) and the nodes after a binding SID are not asked.
func TestHeadroomSegments(t *testing.T) {
	fabric := map[string]int{"eth-s": 1500, "eth-r1": 9000, "eth-x": 1500}
	traced := map[string][]chainpath.Segment{"web": {
		{SID: mustAddr("fc00:2::e"), Hops: [][]string{{"h", "r1", "nfv1"}}},
		{SID: mustAddr("fc00:3::e"), Hops: [][]string{{"nfv1", "r", "nfv2"}}},
		{SID: mustAddr("fc00:4::d6"), Hops: [][]string{{"nfv2", "egress"}}}}}
	for _, tc := range []struct {
		name   string
		second string // nfv2's behaviour
		small  string // the node whose way out is 1500
		paths  map[string][]chainpath.Segment
		want   string   // the warning, "" none
		asked  []string // nodes asked besides h
	}{
		{"fabric 9000", "End", "", nil, "", []string{"nfv1", "nfv2"}},
		{"segment", "End", "nfv1", nil,
			"mtu: chain web at nfv1 towards fc00:3::e: 1500 (eth-s at h) + 96 bytes of SRv6 headers > 1500 (eth-out): Linux drops packets over 1404 bytes",
			[]string{"nfv1", "nfv2"}},
		{"last segment", "End", "nfv2", nil,
			"mtu: chain web at nfv2 towards fc00:4::d6: 1500 (eth-s at h)", []string{"nfv1", "nfv2"}},
		{"transit unknown without a path", "End", "r", nil, "", []string{"nfv1", "nfv2"}},
		{"transit on the traced path", "End", "r", traced,
			"mtu: chain web at r towards fc00:3::e: 1500 (eth-s at h)", []string{"nfv1", "nfv2", "r", "r1"}},
		{"after a binding SID", "End.B6.Encaps", "nfv2", nil, "", []string{"nfv1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, agents := newCtl(segmentPlan(tc.second))
			agents["h"].With = agent.Caps{MTU: mtus(fabric, "eth-r1")}
			var asked []string
			var mu sync.Mutex
			for _, n := range []string{"nfv1", "r", "nfv2", "egress", "r1"} {
				mtu := 9000
				if n == tc.small {
					mtu = 1500
				}
				f := mtus(map[string]int{"eth-out": mtu}, "eth-out")
				if agents[n] == nil {
					a := agenttest.New(n)
					agents[n], c.Agents[n] = a, a
					c.Plan.Nodes[n] = &nodestate.Node{Name: n}
				}
				agents[n].With = agent.Caps{MTU: agenttest.MTUFunc(func(ctx context.Context, dsts []netip.Addr) (*nodestate.MTUs, error) {
					mu.Lock()
					asked = append(asked, n)
					mu.Unlock()
					return f(ctx, dsts)
				})}
			}
			warns, notes := c.Headroom(context.Background(), tc.paths)
			if len(notes) != 0 {
				t.Errorf("notes %v", notes)
			}
			wantWarning(t, warns, tc.want)
			slices.Sort(asked)
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("asked %v, want %v", asked, tc.asked)
			}
		})
	}
}

// TestHeadroomSegmentSilent: a segment node that cannot say (an agent
// older than the MTUs RPC) is a note; the headend's check still holds.
func TestHeadroomSegmentSilent(t *testing.T) {
	c, agents := newCtl(segmentPlan("End"))
	agents["h"].With = agent.Caps{MTU: mtus(map[string]int{"eth-s": 1500, "eth-r1": 1500, "eth-x": 1500}, "eth-r1")}
	agents["nfv2"].With = agent.Caps{MTU: mtus(map[string]int{"eth-out": 9000}, "eth-out")}
	warns, notes := c.Headroom(context.Background(), nil)
	if len(warns) != 1 || warns[0].Node != "h" {
		t.Errorf("warnings %v: want the headend's", warns)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "node nfv1: its agent cannot report MTUs") {
		t.Errorf("notes %v: want one for nfv1", notes)
	}
}
