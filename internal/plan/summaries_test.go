package plan

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
)

// line3 is a - b - c with locators a:fc00:1::, b:fd00:2::, c:fc00:3::
// and the summaries given.
func line3(summaries string) string {
	return `name: sum
nodes:
  a: {role: ingress, id: 1, locator: "fc00:1::/64"}
  b: {role: nfv, id: 2, locator: "fd00:2::/64"}
  c: {role: egress, id: 3, locator: "fc00:3::/64"}
links:
  - {endpoints: ["a:e-b", "b:e-a"], ipv6: "` + "fc00:12::/64" + `"}
  - {endpoints: ["b:e-c", "c:e-b"], ipv6: "fd00:23::/64"}
routing:
  mode: static
  summaries: [` + summaries + `]
`
}

func buildString(t *testing.T, y string) (*Plan, error) {
	t.Helper()
	d, err := config.Parse([]byte(y), t.TempDir())
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return Build(d)
}

// A block whose members reach each other through a node outside it is
// refused: that node would route the block back towards its nearest
// member (a loop).
func TestSummaryNotConvex(t *testing.T) {
	_, err := buildString(t, line3(`"fc00::/16"`))
	var list config.ErrorList
	if !errors.As(err, &list) || list[0].Path != "routing.summaries[0]" || !strings.Contains(list[0].Msg, "through b, which is outside it") {
		t.Fatalf("Build: %v, want a refusal at routing.summaries[0] naming b", err)
	}
}

// A block that lies inside a locator, or holds nothing, is refused.
func TestSummaryRefusals(t *testing.T) {
	for sum, want := range map[string]string{
		`"fc00:1::/80"`: "lies inside fc00:1::/64 of node a",
		`"fe80:1::/32"`: "holds no node's locator or link address",
	} {
		_, err := buildString(t, line3(sum))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("summary %s: %v, want %q", sum, err, want)
		}
	}
}

// A convex block (b's locator, the b–c link): the nodes outside it (a, and
// c, which has a locator outside it) get one route to the block instead of
// the routes to what is inside; its member b keeps its own; plan says so.
func TestSummaryRoutes(t *testing.T) {
	p, err := buildString(t, line3(`"fd00::/16"`))
	if err != nil {
		t.Fatal(err)
	}
	has := func(node, dst string) bool {
		for _, r := range p.Nodes[node].Routes {
			if r.Dst.String() == dst {
				return true
			}
		}
		return false
	}
	if !has("a", "fd00::/16") || has("a", "fd00:2::/64") || has("a", "fd00:23::/64") {
		t.Errorf("a's routes: %v, want fd00::/16 instead of b's locator and the b–c link", p.Nodes["a"].Routes)
	}
	if !has("c", "fd00::/16") || has("c", "fd00:2::/64") {
		t.Errorf("c's routes: %v", p.Nodes["c"].Routes)
	}
	if !has("b", "fc00:1::/64") || !has("b", "fc00:3::/64") || has("b", "fd00::/16") {
		t.Errorf("b (the member) routes: %v", p.Nodes["b"].Routes)
	}
	var b bytes.Buffer
	p.Render(&b)
	if want := "summary fd00::/16: 1 member node(s), 2 prefix(es) inside; 2 node(s) route it as one prefix towards the nearest member"; !strings.Contains(b.String(), want) {
		t.Errorf("plan does not explain the summary:\n%s", b.String())
	}
}

// routing.summaries is validated: prefixes, IPv6, masked, disjoint; in
// either routing mode.
func TestSummaryValidation(t *testing.T) {
	for sum, want := range map[string]string{
		`"x"`:                        `"x" is not a prefix`,
		`"10.0.0.0/8"`:               "want an IPv6 prefix",
		`"fd00::1/16"`:               "has host bits set (did you mean fd00::/16?)",
		`"fd00::/16", "fd00:2::/32"`: "fd00:2::/32 overlaps routing.summaries[0] fd00::/16",
	} {
		_, err := config.Parse([]byte(line3(sum)), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("summaries [%s]: %v, want %q", sum, err, want)
		}
	}
	// Under bgp too (session 14: the routers aggregate them).
	y := strings.Replace(line3(`"fd00::/16"`), "mode: static", "mode: bgp", 1)
	if _, err := config.Parse([]byte(y), t.TempDir()); err != nil {
		t.Errorf("bgp with summaries: %v", err)
	}
}
