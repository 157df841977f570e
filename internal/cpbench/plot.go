package cpbench

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WritePlot draws the apply times against the number of nodes, with the
// targets at 100 nodes as reference lines, to path (.svg or .png).
func WritePlot(res []Result, path string) error {
	p := plot.New()
	p.Title.Text = "segchain control plane through agents (one run per size)"
	p.X.Label.Text = "nodes"
	p.Y.Label.Text = "seconds"
	series := []struct {
		name string
		get  func(Result) float64
	}{
		{"from scratch", func(r Result) float64 { return r.FromScratch.Seconds() }},
		{"no-op apply", func(r Result) float64 { return r.NoOp.Seconds() }},
		{"one-chain change", func(r Result) float64 { return r.OneChain.Seconds() }},
		{"destroy", func(r Result) float64 { return r.Destroy.Seconds() }},
	}
	var args []any
	for _, s := range series {
		pts := make(plotter.XYs, len(res))
		for i, r := range res {
			pts[i] = plotter.XY{X: float64(r.Nodes), Y: s.get(r)}
		}
		args = append(args, s.name, pts)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return err
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Min = 0
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}
