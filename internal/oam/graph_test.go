package oam

import (
	"encoding/xml"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/cpbench"
	"github.com/segchain/segchain/internal/plan"
)

// A 100-node generated domain (the control-plane benchmark's: a line of
// NFV nodes with several chains) stays on a page, and --chain greys the
// chains not asked for.
func TestGraphLargeDomain(t *testing.T) {
	d, err := config.Parse([]byte(cpbench.Domain(100, false)), ".")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Chains) < 2 {
		t.Fatalf("%d chains", len(p.Chains))
	}
	keep := p.Chains[0].Name
	g := BuildGraph(Domain{Config: d, Plan: p}, nil, nil, GraphOptions{Highlight: []string{keep}})
	svg := g.SVG()
	var root struct {
		Width  int `xml:"width,attr"`
		Height int `xml:"height,attr"`
	}
	if err := xml.Unmarshal([]byte(svg), &root); err != nil {
		t.Fatalf("SVG: %v", err)
	}
	// 100 nodes in a line: 9 bands of 12 columns, not 100 columns.
	t.Logf("drawn %dx%d", root.Width, root.Height)
	if root.Width > 2000 || root.Height > 2000 || len(g.Nodes) != 100 {
		t.Errorf("%d nodes drawn %dx%d", len(g.Nodes), root.Width, root.Height)
	}
	for _, c := range g.Chains {
		if c.Dim != (c.Name != keep) {
			t.Errorf("chain %s dim %v", c.Name, c.Dim)
		}
	}
	if n := strings.Count(svg, `data-dim="false"`); n != 1 {
		t.Errorf("%d chains in colour, want 1", n)
	}
}
