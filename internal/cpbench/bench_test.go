package cpbench

import (
	"encoding/json"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// Benchmarks of the controller's fixed and per-node costs (docs/scale.md,
// "Where a command's CPU goes"): go test -run X -bench . ./internal/cpbench/

// benchPlan plans the generated Clos fabric of n nodes.
func benchPlan(b *testing.B, n int) *plan.Plan {
	y, _ := lab.Fabric{Topology: "clos", Nodes: n, Summaries: true}.YAML()
	d, err := config.Parse([]byte(y), ".")
	if err != nil {
		b.Fatal(err)
	}
	p, err := plan.Build(d)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkDigestNode: nodestate.Digest of one node of a 250-node fabric
// (the controller's once per node and command, an agent's per request).
func BenchmarkDigestNode(b *testing.B) {
	p := benchPlan(b, 250)
	var nodes []*nodestate.Node
	for _, n := range p.Nodes {
		nodes = append(nodes, n)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := nodes[i%len(nodes)]
		nodestate.Digest(n, n)
	}
}

// BenchmarkJSONNode: a node's state as JSON (session.IntentDigest).
func BenchmarkJSONNode(b *testing.B) {
	p := benchPlan(b, 250)
	var nodes []*nodestate.Node
	for _, n := range p.Nodes {
		nodes = append(nodes, n)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := nodes[i%len(nodes)]
		json.Marshal(n)
	}
}

// BenchmarkLoadPlan1000: parsing and planning a 1,000-node fabric, what
// every command pays before it contacts an agent.
func BenchmarkLoadPlan1000(b *testing.B) {
	y, _ := lab.Fabric{Topology: "clos", Nodes: 1000, Summaries: true}.YAML()
	for i := 0; i < b.N; i++ {
		d, err := config.Parse([]byte(y), ".")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := plan.Build(d); err != nil {
			b.Fatal(err)
		}
	}
}
