package lab

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// A 1,000-node Clos under routing: bgp plans: the pods' and planes'
// blocks replace the locators and node addresses inside them in every
// boundary filter, as under static routing. Until session 14 plan refused
// it twice: routing.summaries was refused under bgp, and without them
// each filter needed 7,912 entries (at most 4,096).
func TestFabricBGP1000Plans(t *testing.T) {
	f := Fabric{Topology: "clos", Nodes: 1000, Routing: "bgp", Summaries: true}
	_, p := buildFabric(t, f)
	max := 0
	for _, n := range p.Nodes {
		if b := n.Boundary; b != nil {
			max = maxInt(max, len(b.Locators)+len(b.External)+len(b.Nodes)+len(b.SFs))
		}
	}
	if max == 0 || max > nodestate.BoundaryPrefixesMax {
		t.Fatalf("largest boundary filter: %d entries, want 1..%d", max, nodestate.BoundaryPrefixesMax)
	}
	if len(p.Summaries) != 54 || len(p.FRR) != 208 {
		t.Errorf("%d summaries, %d FRR routers: want 54 (50 pods, 4 planes) and 208", len(p.Summaries), len(p.FRR))
	}
	t.Logf("largest boundary filter %d entries", max)
	// Without summaries the same fabric is still refused, for the filter.
	y, _ := Fabric{Topology: "clos", Nodes: 1000, Routing: "bgp"}.YAML()
	d, err := config.Parse([]byte(y), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Build(d); err == nil || !strings.Contains(err.Error(), "the boundary filter holds at most 4096") {
		t.Errorf("1,000 nodes under bgp without summaries: %v, want the filter's refusal", err)
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Under bgp with summaries, every spine aggregates its pod's block and
// its plane's (it is a member of both, with neighbours outside each) and
// sends each neighbour outside a block only the aggregate; super-spines,
// all of whose neighbours are members of their plane, and the leaves
// (GoBGP) aggregate nothing.
func TestFabricBGPAggregates(t *testing.T) {
	d, p := buildFabric(t, Fabric{Topology: "clos3", Nodes: 100, Routing: "bgp", Summaries: true})
	pod0, plane0 := netip.MustParsePrefix("fc00::/16"), netip.MustParsePrefix("fd00::/16")
	sp := p.FRR["sp0x0"]
	if sp == nil || len(sp.Aggregates) != 2 || sp.Aggregates[0] != pod0 || sp.Aggregates[1] != plane0 {
		t.Fatalf("sp0x0 aggregates %v, want [%s %s]", sp.Aggregates, pod0, plane0)
	}
	for _, n := range sp.Neighbors {
		want := plane0 // a leaf of pod 0: outside plane 0
		if d.Nodes[n.Node].Role == config.RoleRouter {
			want = pod0 // a super-spine of plane 0: outside pod 0
		}
		if len(n.Summarised) != 1 || n.Summarised[0] != want {
			t.Errorf("sp0x0 → %s: summarised %v, want [%s]", n.Node, n.Summarised, want)
		}
	}
	if ss := p.FRR["ss0x0"]; len(ss.Aggregates) != 0 {
		t.Errorf("ss0x0 aggregates %v: all its neighbours are members of its plane", ss.Aggregates)
	}
	for n, nd := range p.Nodes {
		if nd.BGP != nil && len(nd.BGP.Aggregates) != 0 {
			t.Errorf("GoBGP node %s aggregates %v", n, nd.BGP.Aggregates)
		}
	}
}

// The generated fabric's BGP timers (perf control-plane --bgp-keepalive,
// --bgp-hold) reach every speaker's intent and every router's FRR
// configuration; unset, the defaults (1 s, 3 s) as before; a timer given
// under static routing writes nothing.
func TestFabricBGPTimers(t *testing.T) {
	for _, c := range []struct {
		name            string
		f               Fabric
		keepalive, hold int
	}{
		{"defaults", Fabric{Topology: "clos", Nodes: 100, Routing: "bgp", Summaries: true}, 1, 3},
		{"10/30", Fabric{Topology: "clos", Nodes: 100, Routing: "bgp", Summaries: true, Keepalive: 10, Hold: 30}, 10, 30},
		{"2-tier without summaries", Fabric{Topology: "clos", Nodes: 40, Routing: "bgp", Keepalive: 5, Hold: 15}, 5, 15},
		{"line", Fabric{Topology: "line", Nodes: 6, Routing: "bgp", Keepalive: 3, Hold: 9}, 3, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, p := buildFabric(t, c.f)
			speakers := 0
			check := func(node string, b *nodestate.BGP) {
				speakers++
				if b.Keepalive != c.keepalive || b.Hold != c.hold {
					t.Errorf("%s: timers %d/%d, want %d/%d", node, b.Keepalive, b.Hold, c.keepalive, c.hold)
				}
			}
			for name, n := range p.Nodes {
				if n.BGP != nil {
					check(name, n.BGP)
				}
			}
			for name, b := range p.FRR {
				check(name, b)
				if want := fmt.Sprintf(" timers bgp %d %d\n", c.keepalive, c.hold); !strings.Contains(frr.Render(name, b).BGPD, want) {
					t.Errorf("%s: FRR configuration lacks %q", name, want)
				}
			}
			if speakers == 0 {
				t.Fatal("no BGP speaker planned")
			}
		})
	}
	y, err := Fabric{Topology: "clos", Nodes: 40, Keepalive: 10, Hold: 30}.YAML()
	if err != nil || strings.Contains(y, "keepalive") || strings.Contains(y, "routing:") {
		t.Errorf("static fabric with timers: %v\n%s", err, y)
	}
}
