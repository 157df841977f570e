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
		"pdr_pps_mean", "pdr_pps_cv", "ndr_pps_mean", "pdr_ratio",
		"latency_rate_pps", "latency_p50_ns", "latency_p99_ns", "latency_p999_ns", "latency_max_ns",
		"latency_added_p50_ns", "latency_added_p99_ns", "latency_packets", "latency_unstamped"})
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
		_ = cw.Write(append([]string{strconv.Itoa(x.Run), strconv.Itoa(x.Size), x.Name, x.Behavior, strconv.Itoa(x.Rules),
			f0(x.ThroughputPPS, med), f0(x.ThroughputPPS, cv), f0(x.NsPerPacket, med),
			f0(x.Ratio, med), f0(x.Ratio, lo), f0(x.Ratio, hi), f0(x.CPURatio, med), f0(x.CPURatio, lo), f0(x.CPURatio, hi),
			f0(x.PDRPPS, mean), f0(x.PDRPPS, cv), f0(x.NDRPPS, mean), pr}, latencyCells(x.Latency)...))
	}
	cw.Flush()
	return cw.Error()
}

// latencyCells are a result's latency columns of results.csv (empty when
// not measured).
func latencyCells(l *LatencyResult) []string {
	if l == nil || l.NotMeasured != "" {
		return make([]string, 9)
	}
	fl := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	return []string{fl(l.RatePPS), fl(l.P50), fl(l.P99), fl(l.P999), fl(l.Max), fl(l.AddedP50), fl(l.AddedP99),
		strconv.FormatUint(l.Packets, 10), strconv.FormatUint(l.Unstamped, 10)}
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
	if r.Config.Shape != "" {
		fmt.Fprintf(w, "**Link-bound**: the SUT's output port is a tbf-shaped wire of %s; throughput is bytes on that wire, not the SUT's CPU.\n\n", r.Config.Shape)
	}
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
			hasSat = hasSat || x.CPURatio != nil
			hasPDR = hasPDR || x.PDRPPS != nil
		}
		hdr := "| Behaviour |"
		sep := "|---|"
		if hasSat {
			hdr += " R_cpu | 95% CI | SUT ns/packet | R_" + r.Baseline + " throughput | 95% CI | Throughput (kpps) | rounds: cpu / throughput (replaced) |"
			sep += "---:|---|---:|---:|---|---:|---:|"
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
				row += satCells(x)
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
		if hasSat {
			fmt.Fprint(w, roundsLegend)
		}
		writeLatencyTable(w, groups[k], r.Baseline)
		for _, x := range groups[k] {
			if x.ThroughputDisturbed {
				fmt.Fprint(w, "Throughput in parentheses: no window had the SUT thread on its CPU throughout; the figure is the co-runners' as much as the SUT's.\n\n")
				break
			}
		}
	}
	writeMixes(w, r)
	if len(r.Ceilings) > 0 {
		fmt.Fprintln(w, "| Run | Size | Generator sent (kpps) | Physical limit: → SUT port XDP_DROP (kpps) | same, frames rewritten (kpps) | → SUT stack + tc drop (kpps) | latency floor p50 / p99 (µs): → XDP_DROP | → stack + tc drop |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
		for _, c := range r.Ceilings {
			fmt.Fprintf(w, "| %d | %d | %.0f | %.0f | %.0f | %.0f | %s | %s |\n", c.Run, c.Size, c.GenPPS/1e3, c.XDPDropPPS/1e3, c.XDPDropRewritePPS/1e3, c.StackDropPPS/1e3,
				floorCell(c.XDPDropLatency), floorCell(c.StackDropLatency))
		}
		fmt.Fprintln(w)
	}
	if len(r.Controls) > 0 {
		fmt.Fprintf(w, "| Run | Size | A/A cpu | 95%% CI | within %.0f%% | A/A throughput | 95%% CI | within %.0f%% | undisturbed rounds | SUT thread busy (median) |\n",
			100*r.Config.Sandwich.AALimit, 100*r.Config.Sandwich.AALimit)
		fmt.Fprintln(w, "|---:|---:|---:|---|---|---:|---|---|---:|---:|")
		for _, c := range r.Controls {
			thr := fmt.Sprintf("%.3f | %.3f–%.3f | %v", c.Ratio.Median, c.Ratio.CI95[0], c.Ratio.CI95[1], c.Valid)
			if c.ThroughputInconclusive {
				thr = "— | — | not measurable"
				if c.Ratio.Runs > 0 {
					thr = fmt.Sprintf("%.3f | %.3f–%.3f | not measurable", c.Ratio.Median, c.Ratio.CI95[0], c.Ratio.CI95[1])
				}
			}
			fmt.Fprintf(w, "| %d | %d | %.3f | %.3f–%.3f | %v | %s | %d of %d | %.0f%% |\n", c.Run, c.Size,
				c.CPURatio.Median, c.CPURatio.CI95[0], c.CPURatio.CI95[1], c.CPUValid, thr,
				c.Ratio.Runs, c.CPURatio.Runs, 100*c.MedianBusy)
		}
		fmt.Fprintln(w)
		for _, c := range r.Controls {
			if c.ThroughputInconclusive {
				fmt.Fprintf(w, "Run %d, %d B: **the throughput ratio is not measurable in this run**: the SUT thread had its CPU to itself throughout only %d of %d A/A rounds (it ran %.0f%% of a window, median); other work shared its CPU. The CPU ratio (R_cpu) is the figure.\n\n",
					c.Run, c.Size, c.Ratio.Runs, c.CPURatio.Runs, 100*c.MedianBusy)
			}
		}
	}
	for _, c := range r.Controls {
		if l := c.Latency; l != nil && l.NotMeasured == "" {
			fmt.Fprintf(w, "Run %d, %d B: A/A latency control (the baseline against itself): added p50 %s µs, p99 %s µs; per round, added p50 %s.\n\n",
				c.Run, c.Size, us(l.AddedP50), us(l.AddedP99), roundsCI(l.AddedP50Rounds))
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "* skipped %s: %s\n", s.Behavior, s.Reason)
	}
	return nil
}

// writeLatencyTable writes the latency of one run and size, if measured:
// absolute percentiles and what each behaviour adds to the baseline.
func writeLatencyTable(w io.Writer, xs []Result, baseline string) {
	var rate float64
	for _, x := range xs {
		if x.Latency != nil {
			rate = x.Latency.RatePPS
			break
		}
	}
	if rate == 0 {
		return
	}
	fmt.Fprintf(w, "Latency at %.0f pps offered (µs; added = minus %s in the same run):\n\n", rate, baseline)
	fmt.Fprintln(w, "| Behaviour | p50 | p99 | p99.9 | max | added p50 | added p99 | added p50 per round (95% CI) | packets | unstamped | SUT wait/packet |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
	for _, x := range xs {
		l := x.Latency
		switch {
		case l == nil:
			continue
		case l.NotMeasured != "":
			fmt.Fprintf(w, "| %s | — | — | — | — | — | — | not measured: %s | %d | %d | |\n", x.Name, l.NotMeasured, l.Packets, l.Unstamped)
			continue
		}
		added50, added99 := us(l.AddedP50), us(l.AddedP99)
		if x.Behavior == baseline && x.Rules == 0 {
			added50, added99 = "0", "0"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %s |\n", x.Name, us(l.P50), us(l.P99), us(l.P999), us(l.Max),
			added50, added99, roundsCI(l.AddedP50Rounds), l.Packets, l.Unstamped, us(l.SUTWaitPerPacket))
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, latencyLegend)
}

// latencyLegend explains the latency table (docs/benchmarks.md says more).
const latencyLegend = "Latency: generator send → sink, every behaviour at the same paced rate; the absolute figures include the testbed's own share " +
	"(generator batch flush, veth, the SUT thread's wake-up). Added = the behaviour's percentile minus the baseline's: what it adds to plain forwarding; " +
	"per round: the window's p50 minus its two baseline neighbours'. SUT wait/packet: how long the SUT thread waited for its CPU per packet — " +
	"a few µs is its wake-up; far more means other work on its CPU, and the tails are that work's.\n\n"

// floorCell is a testbed latency floor as "p50 / p99" in µs.
func floorCell(l *LatencyResult) string {
	if l == nil || l.Packets == 0 {
		return ""
	}
	return us(l.P50) + " / " + us(l.P99)
}

// us formats ns as µs with two decimals, signed when negative.
func us(ns float64) string { return strconv.FormatFloat(ns/1e3, 'f', 2, 64) }

// roundsCI formats a per-round added-latency summary (ns) as µs.
func roundsCI(s *Summary) string {
	if s == nil || s.Runs == 0 {
		return ""
	}
	return fmt.Sprintf("%s (%s – %s, %d rounds)", us(s.Median), us(s.CI95[0]), us(s.CI95[1]), s.Runs)
}

// roundsLegend explains the table's rounds column (docs/benchmarks.md says
// the same).
const roundsLegend = "Rounds: cpu / throughput (replaced) = the sandwich rounds counted in R_cpu (every saturated round) / " +
	"in the throughput ratio (only rounds whose windows had the SUT thread on its CPU ≥ (1 − max_lost) of the time), " +
	"and in parentheses the rounds replaced because a window was not saturated.\n\n"

// satCells are a result's saturated-method cells: the CPU ratio first
// (the figure that survives a shared machine), then the throughput ratio
// over the rounds in which the SUT thread had its CPU to itself.
func satCells(x Result) string {
	if x.CPURatio == nil || x.NsPerPacket == nil {
		return " | | | | | | |"
	}
	cr := x.CPURatio
	cell := fmt.Sprintf(" %.1f%% | %.1f–%.1f%% | %.0f |", 100*cr.Median, 100*cr.CI95[0], 100*cr.CI95[1], x.NsPerPacket.Median)
	nThr := 0
	if x.Ratio != nil {
		nThr = x.Ratio.Runs
		cell += fmt.Sprintf(" %.1f%% | %.1f–%.1f%% |", 100*x.Ratio.Median, 100*x.Ratio.CI95[0], 100*x.Ratio.CI95[1])
	} else {
		cell += " — | — |"
	}
	if x.ThroughputPPS != nil && x.ThroughputDisturbed {
		cell += fmt.Sprintf(" (%.0f) |", x.ThroughputPPS.Median/1e3)
	} else if x.ThroughputPPS != nil {
		cell += fmt.Sprintf(" %.0f |", x.ThroughputPPS.Median/1e3)
	} else {
		cell += " — |"
	}
	return cell + fmt.Sprintf(" %d / %d (%d) |", cr.Runs, nThr, x.DiscardedRounds)
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
	if len(r.Windows) > 0 {
		if err := write("windows.csv", r.WriteWindowsCSV); err != nil {
			return files, err
		}
	}
	plots, err := r.WritePlots(dir)
	return append(files, plots...), err
}

// WriteWindowsCSV writes every measured sandwich window (the raw data
// behind the ratios: rates, the SUT thread's CPU time, its run-queue wait
// and the steal of its CPU, and whether the window counted).
func (r *Report) WriteWindowsCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"run", "size", "round", "seq", "arm", "slot", "dur_ns", "tx", "rx", "sut_cpu_ns", "sut_wait_ns", "sut_steal_ns",
		"rx_pps", "ns_per_packet", "busy", "lost", "valid", "lat_packets", "lat_p50_ns", "lat_p99_ns"})
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	fl := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, x := range r.Windows {
		d := x.Delta
		_ = cw.Write([]string{strconv.Itoa(x.Run), strconv.Itoa(x.Size), strconv.Itoa(x.Round), strconv.Itoa(x.Seq), x.Arm, strconv.Itoa(x.Slot),
			strconv.FormatInt(d.Dur.Nanoseconds(), 10), u(d.Tx), u(d.Rx), u(d.SUTCPU), u(d.SUTWait), u(d.SUTSteal),
			fl(d.RxPPS()), fl(d.NsPerPacket()), fl(d.Busy()), fl(d.Lost()), x.Valid, u(x.LatPackets), fl(x.LatP50), fl(x.LatP99)})
	}
	cw.Flush()
	return cw.Error()
}
