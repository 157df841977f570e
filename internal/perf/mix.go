package perf

import (
	"fmt"
	"io"
	"strings"
)

// MixRow is one behaviour's cost over a packet size mix (Experiment.Mix).
type MixRow struct {
	Run  int    `json:"run"`
	Name string `json:"name"`
	// NsPerPacket is Σ wᵢ·nsᵢ / Σ wᵢ: each size's median SUT ns/packet,
	// weighted. A CPU-bound SUT's cost per packet of the mix, each packet
	// costing what it costs at its size (no cross-size effects measured).
	NsPerPacket float64 `json:"ns_per_packet"`
	// BaselineRatio is the baseline's mix ns/packet ÷ this one's.
	BaselineRatio float64 `json:"baseline_ratio"`
}

// Mixes weighs each behaviour's per-size results by e.Mix, per run. A
// behaviour missing a size (skipped, or no CPU figure) has no row.
func Mixes(r *Report) []MixRow {
	e := r.Config
	if len(e.Mix) == 0 || len(e.Mix) != len(e.Sizes) {
		return nil
	}
	weight := map[int]float64{}
	total := 0.0
	for i, s := range e.Sizes {
		weight[s] += e.Mix[i]
		total += e.Mix[i]
	}
	type key struct {
		run  int
		name string
	}
	sum, sizes := map[key]float64{}, map[key]int{}
	var order []key
	for _, x := range r.Results {
		if x.NsPerPacket == nil {
			continue
		}
		k := key{x.Run, x.Name}
		if _, ok := sizes[k]; !ok {
			order = append(order, k)
		}
		sum[k] += weight[x.Size] * x.NsPerPacket.Median
		sizes[k]++
	}
	distinct := len(weight)
	var out []MixRow
	base := map[int]float64{}
	for _, k := range order {
		if sizes[k] != distinct {
			continue
		}
		row := MixRow{Run: k.run, Name: k.name, NsPerPacket: sum[k] / total}
		if k.name == r.Baseline {
			base[k.run] = row.NsPerPacket
		}
		out = append(out, row)
	}
	for i := range out {
		if b := base[out[i].Run]; b > 0 && out[i].NsPerPacket > 0 {
			out[i].BaselineRatio = b / out[i].NsPerPacket
		}
	}
	return out
}

// writeMixes writes the mix table of each run.
func writeMixes(w io.Writer, r *Report) {
	rows := Mixes(r)
	if len(rows) == 0 {
		return
	}
	parts := make([]string, len(r.Config.Sizes))
	for i, s := range r.Config.Sizes {
		parts[i] = fmt.Sprintf("%d B × %g", s, r.Config.Mix[i])
	}
	run := -1
	for _, x := range rows {
		if x.Run != run {
			run = x.Run
			fmt.Fprintf(w, "Run %d, packet size mix (%s; each size measured on its own, SUT ns/packet weighted):\n\n", run, strings.Join(parts, ", "))
			fmt.Fprintf(w, "| Behaviour | SUT ns/packet (mix) | %s ÷ this |\n|---|---:|---:|\n", r.Baseline)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.3f |\n", x.Name, x.NsPerPacket, x.BaselineRatio)
	}
	fmt.Fprintln(w)
}
