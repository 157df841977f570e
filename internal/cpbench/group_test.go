package cpbench

import (
	"fmt"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
)

// The lighter mode's domain is the generated one with every node behind
// its group's agent: it validates, and every node has its address.
func TestGroupDomain(t *testing.T) {
	for _, f := range []lab.Fabric{{Topology: "clos", Nodes: 16, Summaries: true}, {Topology: "clos", Nodes: 100, Summaries: true}, {Topology: "line", Nodes: 10}} {
		y, err := f.YAML()
		if err != nil {
			t.Fatal(err)
		}
		d, err := config.Parse([]byte(y), ".")
		if err != nil {
			t.Fatal(err)
		}
		g := &groups{addrs: map[string]string{}, pki: "/nonexistent/pki"}
		for i, n := range d.NodeNames() {
			g.addrs[n] = fmt.Sprintf("[::1]:%d", 20000+i)
		}
		ya, err := g.domain(y)
		if err != nil {
			t.Fatal(err)
		}
		da, err := config.Parse([]byte(ya), ".")
		if err != nil {
			t.Fatalf("%s %d: %v", f.Topology, f.Nodes, err)
		}
		for n, a := range g.addrs {
			if da.Nodes[n].Agent != a {
				t.Errorf("%s %d: node %s agent %q, want %q", f.Topology, f.Nodes, n, da.Nodes[n].Agent, a)
			}
		}
		if da.Security.PKI == nil || da.Security.PKI.Cert == "" {
			t.Errorf("%s %d: no security.pki", f.Topology, f.Nodes)
		}
		g.addrs["nosuchnode"] = "[::1]:1"
		if _, err := g.domain(y); err == nil {
			t.Errorf("%s %d: a node the domain lacks was not noticed", f.Topology, f.Nodes)
		}
	}
}
