package perf

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var updateDocs = flag.Bool("update-docs", false, "regenerate docs/img/firewall-vs-rules.{png,svg} from testdata/firewall-vs-rules.json")

// firewallVsRules is the report behind docs/img/firewall-vs-rules.png,
// rebuilt from the medians docs/firewall.md publishes.
func firewallVsRules(t *testing.T) *Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "firewall-vs-rules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Experiment, Baseline string
		Size                 int
		Throughput           map[string]map[string]float64 `json:"throughput_ratio"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	r := &Report{Experiment: d.Experiment, Baseline: d.Baseline}
	behs := make([]string, 0, len(d.Throughput))
	for beh := range d.Throughput {
		behs = append(behs, beh)
	}
	sort.Strings(behs)
	for _, beh := range behs {
		for rules, v := range d.Throughput[beh] {
			n, err := strconv.Atoi(rules)
			if err != nil {
				t.Fatal(err)
			}
			r.Results = append(r.Results, Result{Run: 1, Size: d.Size, Behavior: beh, Name: beh, Rules: n, Ratio: &Summary{Median: v}})
		}
	}
	return r
}

// TestRulesPlotLegendClear: the legend of the throughput-vs-rules plot is
// drawn above every line (it covered the netfilter lines' ends before).
// With -update-docs the test also regenerates the plot in docs/img.
func TestRulesPlotLegendClear(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *Report
	}{{"docs firewall-vs-rules", firewallVsRules(t)}, {"sample", sampleReport()}} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok, err := tc.r.rulesPlot()
			if err != nil || !ok {
				t.Fatalf("rulesPlot: %v %v", ok, err)
			}
			if !p.Legend.Top {
				t.Fatal("legend not at the top: the check below (every value under its bottom edge) would not keep lines clear of it")
			}
			dc := p.DataCanvas(draw.New(vgimg.New(rulesPlotWidth, plotHeight)))
			legendBottom := p.Legend.Rectangle(dc).Min.Y
			for _, x := range tc.r.Results {
				for _, s := range []*Summary{x.Ratio, x.CPURatio} {
					if s == nil || x.Rules == 0 {
						continue
					}
					y := dc.Min.Y + (dc.Max.Y-dc.Min.Y)*vgLen((s.Median-p.Y.Min)/(p.Y.Max-p.Y.Min))
					if y >= legendBottom {
						t.Errorf("%s at %d rules (%.3f) is drawn at y=%v, under the legend (bottom y=%v)", x.Name, x.Rules, s.Median, y, legendBottom)
					}
				}
			}
		})
	}
	if *updateDocs {
		img := filepath.Join("..", "..", "docs", "img", "firewall-vs-rules")
		p, _, _ := firewallVsRules(t).rulesPlot()
		for _, ext := range []string{".png", ".svg"} {
			if err := p.Save(rulesPlotWidth, plotHeight, img+ext); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func vgLen(f float64) vg.Length { return vg.Length(f) }

// An experiment with one rule count (rules: [1]) has no throughput-vs-rules
// plot; drawing one panicked in gonum's log axis and killed `perf run`
// after the measurement.
func TestRulesPlotOneRuleCount(t *testing.T) {
	r := &Report{Experiment: "one", Baseline: "End", Results: []Result{
		{Run: 1, Size: 64, Behavior: "End.AN.FW", Name: "End.AN.FW", Rules: 1, Ratio: &Summary{Median: 1.4}},
		{Run: 1, Size: 64, Behavior: "End.AN.NF", Name: "End.AN.NF", Rules: 1, Ratio: &Summary{Median: 0.7}},
	}}
	if _, ok, err := r.rulesPlot(); ok || err != nil {
		t.Errorf("rulesPlot of one rule count: ok %v, err %v; want no plot", ok, err)
	}
	if _, err := r.WritePlots(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}
