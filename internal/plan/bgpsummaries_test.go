package plan

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
)

// bgpSquare is a - r1 - b and a - r2 - b (a, b GoBGP leaves, r1, r2 FRR
// routers) plus c behind r2, with routing: bgp and the summaries given:
// fc00::/16 holds a, b, the a–r1 and r1–b links and the a-r2 link; the
// r2–b link is fd00:2b::/64 and c's everything is in fd00::/16.
func bgpSquare(summaries string) string {
	return `name: sq
nodes:
  a: {role: ingress, id: 1, locator: "fc00:1::/64"}
  b: {role: egress, id: 2, locator: "fc00:2::/64"}
  c: {role: nfv, id: 3, locator: "fd00:3::/64"}
  r1: {role: router, id: 4}
  r2: {role: router, id: 5}
links:
  - {endpoints: ["a:e-r1", "r1:e-a"], ipv6: "fc00:a1::/64"}
  - {endpoints: ["r1:e-b", "b:e-r1"], ipv6: "fc00:1b::/64"}
  - {endpoints: ["a:e-r2", "r2:e-a"], ipv6: "fc00:a2::/64"}
  - {endpoints: ["r2:e-b", "b:e-r2"], ipv6: "fd00:2b::/64"}
  - {endpoints: ["r2:e-c", "c:e-r2"], ipv6: "fd00:2c::/64"}
routing:
  mode: bgp
  summaries: [` + summaries + `]
`
}

// Under bgp a router that is a member of a block aggregates it towards
// its neighbours outside it, and only towards those; plan says who.
func TestBGPSummaryAggregates(t *testing.T) {
	p, err := buildString(t, bgpSquare(`"fc00::/16", "fd00::/16"`))
	if err != nil {
		t.Fatal(err)
	}
	r2 := p.FRR["r2"] // member of both blocks: c is outside fc00::/16, a outside fd00::/16
	if got := strings.Join(r2.Lines(), "\n"); !strings.Contains(got, "aggregate fc00::/16") || !strings.Contains(got, "aggregate fd00::/16") ||
		!strings.Contains(got, "(a) dev e-a local fc00:a2::5 summarised fd00::/16") || !strings.Contains(got, "(c) dev e-c local fd00:2c::5 summarised fc00::/16") ||
		!strings.Contains(got, "(b) dev e-b local fd00:2b::5 summarised fd00::/16") {
		t.Errorf("r2's intent:\n%s", got)
	}
	if r1 := p.FRR["r1"]; len(r1.Aggregates) != 0 {
		t.Errorf("r1, all of whose neighbours are members of fc00::/16, aggregates %v", r1.Aggregates)
	}
	if a := p.Nodes["a"].BGP; len(a.Aggregates) != 0 {
		t.Errorf("GoBGP node a aggregates %v", a.Aggregates)
	}
	var b bytes.Buffer
	p.Render(&b)
	if want := "summary fc00::/16: 4 member node(s), 5 prefix(es) inside; aggregated (one BGP prefix to non-members) by 1 router(s)"; !strings.Contains(b.String(), want) {
		t.Errorf("plan does not explain the aggregate:\n%s", b.String())
	}
	// The boundary filter names the blocks, not the locators inside them.
	if bd := p.Nodes["a"].Boundary; bd == nil || len(bd.Locators) != 2 {
		t.Errorf("a's boundary locators: %+v, want the two blocks", bd)
	}
}

// A block whose members are not linked among themselves is refused under
// bgp: a member would announce the aggregate for members it cannot learn
// specifics from.
func TestBGPSummaryDisconnected(t *testing.T) {
	// c's locator moved into fc00::/16, and the a–r2 link out of it: r2,
	// c's only neighbour, is no longer a member, so c is cut off from the
	// other members.
	y := strings.Replace(bgpSquare(`"fc00::/16"`), `c: {role: nfv, id: 3, locator: "fd00:3::/64"}`, `c: {role: nfv, id: 3, locator: "fc00:3::/64"}`, 1)
	y = strings.Replace(y, `"fc00:a2::/64"`, `"fd02:a2::/64"`, 1)
	_, err := buildString(t, y)
	var list config.ErrorList
	if !errors.As(err, &list) || list[0].Path != "routing.summaries[0]" || !strings.Contains(list[0].Msg, "cannot reach c inside fc00::/16 without leaving it") {
		t.Fatalf("Build: %v, want a refusal naming c", err)
	}
}
