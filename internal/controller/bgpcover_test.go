package controller

import (
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// A switch to routing: bgp with routing.summaries: a static route to a
// block is replaced by a router's aggregate, and a static route to a
// prefix inside a block a node is outside of by the aggregate covering
// it. Without that apply waited its whole settle bound for BGP routes
// that never come, or did not wait for the aggregate at all.
func TestBGPReplacementsAggregates(t *testing.T) {
	block, loc := netip.MustParsePrefix("fc01::/16"), netip.MustParsePrefix("fc01:0:1::/64")
	c := &Controller{Plan: &plan.Plan{
		Nodes: map[string]*nodestate.Node{"a": {Name: "a", BGP: &nodestate.BGP{ASN: 1}}},
		FRR:   map[string]*nodestate.BGP{"sp": {ASN: 2, Prefixes: []netip.Prefix{loc}, Aggregates: []netip.Prefix{block}}},
	}}
	want := c.bgpReplacements(map[string][]netip.Prefix{"a": {block, loc}})
	if got := want["a"]; len(got) != 2 {
		t.Fatalf("a waits for %v, want the block and the locator", got)
	}
	have := map[netip.Prefix]bool{block: true}
	if !covered(have, loc) || !covered(have, block) {
		t.Errorf("the aggregate %s does not cover %s", block, loc)
	}
	if covered(map[netip.Prefix]bool{netip.MustParsePrefix("fc02::/16"): true}, loc) {
		t.Errorf("another block covers %s", loc)
	}
}
