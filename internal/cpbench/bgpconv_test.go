package cpbench

import (
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
)

// Converged under routing: bgp means every leaf reaches every other leaf's
// locator with all its equal-cost next hops, not only the ingress and the
// egress (the definition until session 12).
func TestBGPWantEveryLeafPair(t *testing.T) {
	for _, f := range []lab.Fabric{
		{Topology: "clos2", Nodes: 12, Routing: "bgp"},  // 4 spines, 6 leaves
		{Topology: "clos3", Nodes: 100, Routing: "bgp"}, // 3 tiers: 5 pods of 4 spines, 8 super-spines
		{Topology: "line", Nodes: 10, Routing: "bgp"},
	} {
		y, err := f.YAML()
		if err != nil {
			t.Fatal(err)
		}
		d, err := config.Parse([]byte(y), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		want, err := bgpWant(d)
		if err != nil {
			t.Fatal(err)
		}
		leaves := 0
		for _, n := range d.Nodes {
			if n.Locator != "" {
				leaves++
			}
		}
		if len(want) != leaves {
			t.Fatalf("%s: %d leaves watched, want all %d", f.Kind(), len(want), leaves)
		}
		width := 4 // a Clos leaf: one next hop per spine it is linked to
		if f.Kind() == "line" {
			width = 1
		}
		for src, w := range want {
			if len(w) != leaves-1 {
				t.Fatalf("%s: %s wants %d locators, want every other leaf's (%d)", f.Kind(), src, len(w), leaves-1)
			}
			for p, n := range w {
				if n != width {
					t.Fatalf("%s: %s → %s: ECMP width %d, want %d", f.Kind(), src, p, n, width)
				}
			}
		}
	}
}

func TestBGPCheck(t *testing.T) {
	a, b := netip.MustParsePrefix("fc00:0:1::/64"), netip.MustParsePrefix("fc00:0:2::/64")
	pod, other := netip.MustParsePrefix("fc00::/16"), netip.MustParsePrefix("fc01::/16")
	want := map[netip.Prefix]int{a: 4, b: 4}
	for _, c := range []struct {
		have          map[netip.Prefix]int
		reached, full bool
	}{
		{map[netip.Prefix]int{a: 4, b: 4}, true, true},
		{map[netip.Prefix]int{a: 4, b: 5}, true, true},
		{map[netip.Prefix]int{a: 4, b: 1}, true, false},
		{map[netip.Prefix]int{a: 4}, false, false},
		{nil, false, false},
		// Aggregated (routing.summaries under bgp): the block covers
		// both; the kernel forwards by the most specific covering route,
		// so its width is the one that counts.
		{map[netip.Prefix]int{pod: 4}, true, true},
		{map[netip.Prefix]int{pod: 2}, true, false},
		{map[netip.Prefix]int{pod: 4, b: 1}, true, false},
		{map[netip.Prefix]int{other: 4, a: 4}, false, false},
		{map[netip.Prefix]int{netip.MustParsePrefix("fc00:0:1::1/128"): 4, pod: 4}, true, true},
	} {
		if r, f := bgpCheck(want, c.have); r != c.reached || f != c.full {
			t.Errorf("have %v: reached %v full %v, want %v %v", c.have, r, f, c.reached, c.full)
		}
	}
}
