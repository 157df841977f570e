package perf

import (
	"fmt"
	"image/color"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WritePlots draws, as PNG and SVG: the ratio of every behaviour with its
// 95% CI whiskers (per run and size), throughput vs offered rate (from the
// PDR searches) and throughput vs number of rules (when rules vary).
func (r *Report) WritePlots(dir string) ([]string, error) {
	var files []string
	save := func(p *plot.Plot, base string, w vg.Length) error {
		for _, ext := range []string{".png", ".svg"} {
			f := filepath.Join(dir, base+ext)
			if err := p.Save(w, 4*vg.Inch, f); err != nil {
				return fmt.Errorf("save plot %s: %w", f, err)
			}
			files = append(files, f)
		}
		return nil
	}
	type key struct{ run, size int }
	groups := map[key][]Result{}
	var keys []key
	for _, x := range r.Results {
		k := key{x.Run, x.Size}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], x)
	}
	for _, k := range keys {
		for _, m := range []struct {
			file, title string
			get         func(Result) *Summary
		}{
			{"ratios", "throughput ratio to " + r.Baseline, func(x Result) *Summary { return x.Ratio }},
			{"cpu-ratios", "CPU-cost ratio to " + r.Baseline + " (ns/packet of " + r.Baseline + " ÷ own)", func(x Result) *Summary { return x.CPURatio }},
		} {
			var names []string
			var vals plotter.Values
			var errs plotter.YErrors
			for _, x := range groups[k] {
				s := m.get(x)
				if s == nil || x.Rules > 0 {
					continue
				}
				names = append(names, x.Name)
				vals = append(vals, s.Median)
				errs = append(errs, struct{ Low, High float64 }{s.Median - s.CI95[0], s.CI95[1] - s.Median})
			}
			if len(vals) == 0 {
				continue
			}
			p := plot.New()
			p.Title.Text = fmt.Sprintf("%s, %d B, run %d\n%s (median, 95%% CI)", r.Experiment, k.size, k.run, m.title)
			p.Y.Label.Text = "ratio to " + r.Baseline
			p.Y.Min = 0
			bars, err := plotter.NewBarChart(vals, vg.Points(18))
			if err != nil {
				return files, err
			}
			bars.Color = color.RGBA{R: 70, G: 110, B: 180, A: 255}
			bars.LineStyle.Width = 0
			p.Add(bars)
			eb, err := plotter.NewYErrorBars(&errorBars{vals: vals, errs: errs})
			if err != nil {
				return files, err
			}
			p.Add(eb)
			p.NominalX(names...)
			p.X.Tick.Label.Rotation = 0.8
			p.X.Tick.Label.XAlign = -0.9
			p.X.Tick.Label.YAlign = -0.3
			w := max(vg.Length(len(names))*0.5*vg.Inch+1.5*vg.Inch, 6*vg.Inch)
			if err := save(p, fmt.Sprintf("%s-run%d-%dB", m.file, k.run, k.size), w); err != nil {
				return files, err
			}
		}
	}
	// Throughput vs offered rate, from the search steps.
	p := plot.New()
	p.Title.Text = r.Experiment + ": throughput vs offered rate (PDR search steps)"
	p.X.Label.Text = "offered rate (kpps)"
	p.Y.Label.Text = "throughput (kpps)"
	var lines []any
	for _, x := range r.Results {
		pts := plotter.XYs{}
		for _, s := range x.Searches {
			for _, st := range s.Steps {
				pts = append(pts, plotter.XY{X: st.Rate / 1e3, Y: st.Rate * st.DeliveryRatio / 1e3})
			}
		}
		if len(pts) == 0 {
			continue
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
		lines = append(lines, fmt.Sprintf("%s %dB", x.Name, x.Size), pts)
	}
	if len(lines) > 0 {
		if err := plotutil.AddLinePoints(p, lines...); err != nil {
			return files, err
		}
		if err := save(p, "throughput-vs-rate", 7*vg.Inch); err != nil {
			return files, err
		}
	}
	// Throughput (as ratios to the baseline) vs rule count.
	if p, ok, err := r.rulesPlot(); err != nil {
		return files, err
	} else if ok {
		if err := save(p, "throughput-vs-rules", rulesPlotWidth); err != nil {
			return files, err
		}
	}
	return files, nil
}

// rulesPlotWidth × plotHeight is the size of the throughput-vs-rules plot.
const (
	rulesPlotWidth = 7 * vg.Inch
	plotHeight     = 4 * vg.Inch
)

// rulesPlot draws every behaviour's ratios against the number of rules,
// its legend clear of the lines (ok is false when the results have fewer
// than two rule counts: nothing to draw a line over, and a log axis over
// one value has no range).
func (r *Report) rulesPlot() (*plot.Plot, bool, error) {
	counts := map[int]bool{}
	for _, x := range r.Results {
		if x.Rules > 0 && x.Ratio != nil {
			counts[x.Rules] = true
		}
	}
	if len(counts) < 2 {
		return nil, false, nil
	}
	byBeh := map[string]plotter.XYs{}
	var behs []string
	for _, x := range r.Results {
		if x.Rules == 0 || x.Ratio == nil {
			continue
		}
		for _, m := range []struct {
			label string
			s     *Summary
		}{{"throughput", x.Ratio}, {"cpu", x.CPURatio}} {
			if m.s == nil {
				continue
			}
			b := fmt.Sprintf("%s %dB (%s ratio)", x.Behavior, x.Size, m.label)
			if _, ok := byBeh[b]; !ok {
				behs = append(behs, b)
			}
			byBeh[b] = append(byBeh[b], plotter.XY{X: float64(x.Rules), Y: m.s.Median})
		}
	}
	if len(behs) > 0 {
		p := plot.New()
		p.Title.Text = r.Experiment + ": throughput vs number of rules (ratio to " + r.Baseline + ", median)"
		p.X.Label.Text = "rules"
		p.Y.Label.Text = "ratio to " + r.Baseline
		p.Y.Min = 0
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{}
		var l []any
		maxY := 0.0
		for _, b := range behs {
			pts := byBeh[b]
			sort.Slice(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
			l = append(l, b, pts)
			for _, pt := range pts {
				maxY = max(maxY, pt.Y)
			}
		}
		if err := plotutil.AddLinePoints(p, l...); err != nil {
			return nil, false, err
		}
		clearLegend(p, rulesPlotWidth, plotHeight, maxY)
		return p, true, nil
	}
	return nil, false, nil
}

// clearLegend puts the legend in the top right corner of the data area and
// raises the Y axis so that every value up to maxY is drawn below it: the
// legend (one line per series) never covers a line, however many series
// there are. w × h is the size the plot is saved at.
func clearLegend(p *plot.Plot, w, h vg.Length, maxY float64) {
	p.Legend.Top = true
	if maxY <= p.Y.Min {
		return
	}
	dc := p.DataCanvas(draw.New(vgimg.New(w, h))) // measuring only
	lr := p.Legend.Rectangle(dc)
	height := dc.Max.Y - dc.Min.Y
	free := height - (lr.Max.Y - lr.Min.Y) - height/20 // a gap below the legend
	if free <= height/4 {
		free = height / 4 // a legend taller than the plot: keep some room for data
	}
	p.Y.Max = p.Y.Min + (maxY-p.Y.Min)*float64(height/free)
}

// errorBars adapts bar values and CI offsets to plotter.YErrorBars, bars
// being at x = 0, 1, 2, … as NominalX places them.
type errorBars struct {
	vals plotter.Values
	errs plotter.YErrors
}

func (e *errorBars) Len() int                    { return len(e.vals) }
func (e *errorBars) XY(i int) (float64, float64) { return float64(i), e.vals[i] }
func (e *errorBars) YError(i int) (float64, float64) {
	return e.errs[i].Low, e.errs[i].High
}
