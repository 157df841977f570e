package cpbench

import (
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/plan"
)

// The generated domains are valid and plan at every size benchmarked.
func TestDomainValid(t *testing.T) {
	for _, n := range []int{5, 10, 50, 100} {
		for _, changed := range []bool{false, true} {
			d, err := config.Parse([]byte(Domain(n, changed)), t.TempDir())
			if err != nil {
				t.Fatalf("%d nodes (changed %v): %v", n, changed, err)
			}
			if _, err := plan.Build(d); err != nil {
				t.Fatalf("%d nodes: plan: %v", n, err)
			}
			if len(d.Nodes) != n {
				t.Fatalf("%d nodes: got %d", n, len(d.Nodes))
			}
		}
	}
}

// Under routing: bgp every SR node of the line speaks BGP with its SR
// neighbours and has no static route.
func TestDomainBGP(t *testing.T) {
	d, err := config.Parse([]byte(DomainRouting(100, false, "bgp")), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	if b := p.Nodes["n50"].BGP; b == nil || len(b.Neighbors) != 2 {
		t.Fatalf("n50's BGP intent: %+v", b)
	}
	if b := p.Nodes["ingress"].BGP; b == nil || len(b.Neighbors) != 1 {
		t.Fatalf("ingress's BGP intent: %+v", b)
	}
}
