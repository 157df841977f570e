package bgp

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/nodestate"
)

func TestSelect(t *testing.T) {
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	in := &nodestate.BGP{
		Neighbors: []nodestate.BGPNeighbor{
			{Node: "r1", Addr: a("fc00:15::5"), Dev: "eth-r1", ASN: 5},
			{Node: "r2", Addr: a("fc00:16::6"), Dev: "eth-r2", ASN: 6},
		},
		Prefixes: []netip.Prefix{p("fc00:1::/64"), p("fc00:15::/64")},
	}
	learned := map[netip.Prefix][]Candidate{
		// Equal AS paths: ECMP over both.
		p("fc00:4::/64"): {{Neighbor: a("fc00:16::6"), ASPath: 3}, {Neighbor: a("fc00:15::5"), ASPath: 3}},
		// The shorter wins.
		p("fc00:2::/64"): {{Neighbor: a("fc00:15::5"), ASPath: 2}, {Neighbor: a("fc00:16::6"), ASPath: 4}},
		// Then the lower ORIGIN.
		p("fc00:3::/64"): {{Neighbor: a("fc00:15::5"), ASPath: 2, Origin: 2}, {Neighbor: a("fc00:16::6"), ASPath: 2}},
		// Own and connected prefixes are never installed.
		p("fc00:1::/64"):  {{Neighbor: a("fc00:15::5"), ASPath: 2}},
		p("fc00:15::/64"): {{Neighbor: a("fc00:15::5"), ASPath: 1}},
		p("fc00:99::/64"): {{Neighbor: a("fc00:15::5"), ASPath: 1}},
		// From an unknown neighbor: ignored.
		p("fc00:7::/64"): {{Neighbor: a("fc00:77::7"), ASPath: 1}},
	}
	all := func(netip.Addr) bool { return true }
	skip := func(q netip.Prefix) bool { return q == p("fc00:99::/64") }
	r1, r2 := Hop{Via: a("fc00:15::5"), Dev: "eth-r1"}, Hop{Via: a("fc00:16::6"), Dev: "eth-r2"}
	want := []Route{
		{Dst: p("fc00:2::/64"), Hops: []Hop{r1}},
		{Dst: p("fc00:3::/64"), Hops: []Hop{r2}},
		{Dst: p("fc00:4::/64"), Hops: []Hop{r1, r2}},
	}
	if diff := cmp.Diff(strs(want), strs(Select(in, learned, all, skip))); diff != "" {
		t.Errorf("all usable (-want +got):\n%s", diff)
	}
	// r1's link lost carrier: everything over r2, the longer path too.
	notR1 := func(x netip.Addr) bool { return x != a("fc00:15::5") }
	want = []Route{
		{Dst: p("fc00:2::/64"), Hops: []Hop{r2}},
		{Dst: p("fc00:3::/64"), Hops: []Hop{r2}},
		{Dst: p("fc00:4::/64"), Hops: []Hop{r2}},
	}
	if diff := cmp.Diff(strs(want), strs(Select(in, learned, notR1, skip))); diff != "" {
		t.Errorf("r1 unusable (-want +got):\n%s", diff)
	}
}

func strs(rs []Route) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}
