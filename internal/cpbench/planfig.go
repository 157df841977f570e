package cpbench

import (
	"runtime"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/plan"
)

// PlanResult is one generated domain's plan figures, without a lab
// (perf control-plane --plan-only).
type PlanResult struct {
	Nodes         int     `json:"nodes"`
	Topology      string  `json:"topology"`
	Summaries     int     `json:"summaries"`
	Routes        int     `json:"routes"`           // over all nodes
	RoutesMax     int     `json:"routes_max"`       // of any node
	LeafRoutesMax int     `json:"leaf_routes_max"`  // of an NFV leaf
	OpsMax        int     `json:"ops_per_node_max"` // apply from scratch
	OpsMean       float64 `json:"ops_per_node_mean"`
	OneChainNodes int     `json:"one_chain_nodes"`
	// Plan is the time to parse and plan the domain; AllocKiB what that
	// allocated.
	Plan     time.Duration `json:"plan_ns"`
	AllocKiB uint64        `json:"alloc_kib"`
}

// Plan plans the fabric f and measures it.
func Plan(f lab.Fabric) (PlanResult, error) {
	r := PlanResult{Nodes: f.Nodes, Topology: f.Kind()}
	y, err := f.YAML()
	if err != nil {
		return r, err
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	d, err := config.Parse([]byte(y), ".")
	if err != nil {
		return r, err
	}
	p, err := plan.Build(d)
	r.Plan = time.Since(start)
	runtime.ReadMemStats(&m1)
	r.AllocKiB = (m1.TotalAlloc - m0.TotalAlloc) >> 10
	if err != nil {
		return r, err
	}
	for name, n := range p.Nodes {
		r.Routes += len(n.Routes)
		r.RoutesMax = max(r.RoutesMax, len(n.Routes))
		if d.Nodes[name].Role == config.RoleNFV {
			r.LeafRoutesMax = max(r.LeafRoutesMax, len(n.Routes))
		}
	}
	r.OpsMax, r.OpsMean, r.OneChainNodes, r.Summaries, err = PlanFigures(f)
	return r, err
}
