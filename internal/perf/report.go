package perf

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func f0(s *Summary, get func(*Summary) float64) string {
	if s == nil {
		return ""
	}
	return strconv.FormatFloat(get(s), 'f', 4, 64)
}

// WriteCSV writes one row per result.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"run", "size", "name", "behavior", "rules",
		"throughput_pps_median", "throughput_pps_cv", "ns_per_packet_median",
		"ratio_median", "ratio_ci95_lo", "ratio_ci95_hi", "cpu_ratio_median", "cpu_ratio_ci95_lo", "cpu_ratio_ci95_hi",
		"pdr_pps_mean", "pdr_pps_cv", "ndr_pps_mean", "pdr_ratio"})
	med := func(s *Summary) float64 { return s.Median }
	mean := func(s *Summary) float64 { return s.Mean }
	cv := func(s *Summary) float64 { return s.CV }
	lo := func(s *Summary) float64 { return s.CI95[0] }
	hi := func(s *Summary) float64 { return s.CI95[1] }
	for _, x := range r.Results {
		pr := ""
		if x.PDRRatio != 0 {
			pr = strconv.FormatFloat(x.PDRRatio, 'f', 4, 64)
		}
		_ = cw.Write([]string{strconv.Itoa(x.Run), strconv.Itoa(x.Size), x.Name, x.Behavior, strconv.Itoa(x.Rules),
			f0(x.ThroughputPPS, med), f0(x.ThroughputPPS, cv), f0(x.NsPerPacket, med),
			f0(x.Ratio, med), f0(x.Ratio, lo), f0(x.Ratio, hi), f0(x.CPURatio, med), f0(x.CPURatio, lo), f0(x.CPURatio, hi),
			f0(x.PDRPPS, mean), f0(x.PDRPPS, cv), f0(x.NDRPPS, mean), pr})
	}
	cw.Flush()
	return cw.Error()
}

// WriteMarkdown writes tables in the style of the thesis' Table 5.1: per
// run and size, each behaviour's throughput (kpps), ratio to the baseline
// with its 95% CI, and the SUT's ns/packet; then the ceilings and controls.
func (r *Report) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "### %s\n\n", r.Experiment)
	if r.Description != "" {
		fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(r.Description))
	}
	fmt.Fprintf(w, "Testbed %s, kernel %s, %d CPUs, method %s, baseline %s, started %s, took %s.\n\n",
		r.Testbed, r.Kernel, r.CPUs, r.Method, r.Baseline, r.Started.Format("2006-01-02 15:04 UTC"), r.Duration.D())
	type key struct{ run, size int }
	var keys []key
	groups := map[key][]Result{}
	for _, x := range r.Results {
		k := key{x.Run, x.Size}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], x)
	}
	for _, k := range keys {
		fmt.Fprintf(w, "Run %d, %d-byte packets:\n\n", k.run, k.size)
		hasSat, hasPDR := false, false
		for _, x := range groups[k] {
			hasSat = hasSat || x.Ratio != nil
			hasPDR = hasPDR || x.PDRPPS != nil
		}
		hdr := "| Behaviour |"
		sep := "|---|"
		if hasSat {
			hdr += " Throughput (kpps) | R_" + r.Baseline + " | 95% CI | SUT ns/packet | R_cpu | 95% CI | rounds (replaced) |"
			sep += "---:|---:|---|---:|---:|---|---:|"
		}
		if hasPDR {
			hdr += fmt.Sprintf(" PDR@%g%% (kpps) | CV | R_PDR |", r.Config.PDR.LossPercent)
			sep += "---:|---:|---:|"
			if r.Config.PDR.NDR {
				hdr += " NDR (kpps) |"
				sep += "---:|"
			}
		}
		fmt.Fprintln(w, hdr)
		fmt.Fprintln(w, sep)
		for _, x := range groups[k] {
			row := "| " + x.Name + " |"
			if hasSat {
				if x.Ratio != nil {
					cr := x.CPURatio
					if cr == nil {
						cr = &Summary{}
					}
					row += fmt.Sprintf(" %.0f | %.1f%% | %.1f–%.1f%% | %.0f | %.1f%% | %.1f–%.1f%% | %d (%d) |",
						x.ThroughputPPS.Median/1e3, 100*x.Ratio.Median, 100*x.Ratio.CI95[0], 100*x.Ratio.CI95[1],
						x.NsPerPacket.Median, 100*cr.Median, 100*cr.CI95[0], 100*cr.CI95[1], x.Ratio.Runs, x.DiscardedRounds)
				} else {
					row += " | | | | | | |"
				}
			}
			if hasPDR {
				if x.PDRPPS != nil {
					row += fmt.Sprintf(" %.0f | %.3f | %s |", x.PDRPPS.Mean/1e3, x.PDRPPS.CV, pct(x.PDRRatio, x.Behavior == r.Baseline))
				} else {
					row += " | | |"
				}
				if r.Config.PDR.NDR {
					if x.NDRPPS != nil {
						row += fmt.Sprintf(" %.0f |", x.NDRPPS.Mean/1e3)
					} else {
						row += " |"
					}
				}
			}
			fmt.Fprintln(w, row)
		}
		fmt.Fprintln(w)
	}
	if len(r.Ceilings) > 0 {
		fmt.Fprintln(w, "| Run | Size | Generator sent (kpps) | Physical limit: → SUT port XDP_DROP (kpps) | same, frames rewritten (kpps) | → SUT stack + tc drop (kpps) |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|")
		for _, c := range r.Ceilings {
			fmt.Fprintf(w, "| %d | %d | %.0f | %.0f | %.0f | %.0f |\n", c.Run, c.Size, c.GenPPS/1e3, c.XDPDropPPS/1e3, c.XDPDropRewritePPS/1e3, c.StackDropPPS/1e3)
		}
		fmt.Fprintln(w)
	}
	if len(r.Controls) > 0 {
		fmt.Fprintf(w, "| Run | Size | A/A throughput | 95%% CI | within %.0f%% | A/A cpu | 95%% CI | within %.0f%% |\n",
			100*r.Config.Sandwich.AALimit, 100*r.Config.Sandwich.AALimit)
		fmt.Fprintln(w, "|---:|---:|---:|---|---|---:|---|---|")
		for _, c := range r.Controls {
			fmt.Fprintf(w, "| %d | %d | %.3f | %.3f–%.3f | %v | %.3f | %.3f–%.3f | %v |\n", c.Run, c.Size,
				c.Ratio.Median, c.Ratio.CI95[0], c.Ratio.CI95[1], c.Valid,
				c.CPURatio.Median, c.CPURatio.CI95[0], c.CPURatio.CI95[1], c.CPUValid)
		}
		fmt.Fprintln(w)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "* skipped %s: %s\n", s.Behavior, s.Reason)
	}
	return nil
}

func pct(v float64, base bool) string {
	if base {
		return "100%"
	}
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

// WriteAll writes report.json, results.csv, table.md and the plots into dir.
func (r *Report) WriteAll(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", p, err)
		}
		files = append(files, p)
		return f.Close()
	}
	if err := write("report.json", r.WriteJSON); err != nil {
		return files, err
	}
	if err := write("results.csv", r.WriteCSV); err != nil {
		return files, err
	}
	if err := write("table.md", r.WriteMarkdown); err != nil {
		return files, err
	}
	plots, err := r.WritePlots(dir)
	return append(files, plots...), err
}
