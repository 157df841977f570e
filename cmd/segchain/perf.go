package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/dataplane/firewall/fwperf"
	"github.com/segchain/segchain/internal/dataplane/netfilter/nfperf"
	"github.com/segchain/segchain/internal/dataplane/srunaware/proxyperf"
	"github.com/segchain/segchain/internal/dataplane/userspace/usvcperf"
	"github.com/segchain/segchain/internal/oam/oamperf"
	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/pool/poolperf"
)

// perfRegistry lists every recipe segchain knows. Other areas add their
// recipes here by passing their constructors' results.
func perfRegistry() (*perf.Registry, error) {
	recipes := append(perf.NativeRecipes(), perf.BaselineRecipes()...)
	recipes = append(recipes, proxyperf.Recipes()...)
	recipes = append(recipes, fwperf.Recipes()...)
	recipes = append(recipes, nfperf.Recipes()...)
	recipes = append(recipes, usvcperf.Recipes()...)
	recipes = append(recipes, poolperf.Recipes()...)
	recipes = append(recipes, oamperf.Recipes()...)
	recipes = append(recipes, perf.USIDRecipes()...)
	return perf.NewRegistry(recipes...)
}

func newPerfCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:          "perf",
		Short:        "Benchmark SRv6 behaviours (after SRPerf): saturated ratios, PDR/NDR",
		SilenceUsage: true,
		Long: `segchain perf measures SRv6 behaviours on a testbed. The built-in testbed is a
tester namespace with a tx and an rx veth port and a SUT namespace in
between; an XDP live-frames generator sends the exact frame each behaviour
needs, a tc program counts what the SUT forwards, and the SUT's work runs in
one pinned threaded-NAPI kernel thread whose CPU time gives ns/packet.

Every figure is a ratio to a baseline (plain IPv6 forwarding) measured in the
same run by sandwich interleaving (REF, X, REF, Y, ...), with an A/A control
that rejects a drifting run. Two ratios are reported: R_cpu (the SUT's CPU
ns/packet, baseline ÷ behaviour: the headline, immune to other work on the
machine) and the throughput ratio (counted only over windows in which the
SUT thread had its CPU to itself; "not measurable" when too few had).
PDR/NDR searches (exponential then binary) are available for NIC testbeds;
on veth use a relaxed loss threshold (≥ 2%).

Every run also measures per-packet latency: the generator stamps each
frame's last 16 bytes with its send time, the sink records how long it
took; all behaviours at one paced rate (latency.rate_pps), interleaved
with the baseline. Reported: p50, p99, p99.9, max, and the latency each
behaviour adds to the baseline (its percentile minus the baseline's).

  segchain perf ls                              the behaviour recipes
  segchain perf run -f EXP.yaml [--out DIR]     an experiment (examples/perf/)
  segchain perf limit [--repeat N]              the testbed's physical limit
  segchain perf boundary [--rounds N]           the SR domain boundary filter's cost
  segchain perf control-plane [--nodes 10,50]   apply through agents at scale

See docs/benchmarks.md.`,
	}
	cmd.AddCommand(newPerfRunCmd(), newPerfLsCmd(), newPerfLimitCmd(), newPerfBoundaryCmd(), newPerfPoolsCmd(), newPerfOAMCmd(), newPerfControlPlaneCmd())
	return cmd
}

// testbedFlags are the built-in testbed's options shared by run and limit.
type testbedFlags struct {
	genCPU, sutCPU   int
	sutNice, genNice int
	shareSUTCPU      bool
}

func (f *testbedFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.genCPU, "gen-cpu", 0, "CPU of the generator")
	cmd.Flags().IntVar(&f.sutCPU, "sut-cpu", 1, "CPU of the SUT's NAPI thread")
	cmd.Flags().IntVar(&f.sutNice, "sut-nice", 0, "nice value of the SUT's NAPI thread (-20: win the CPU on a shared machine)")
	cmd.Flags().IntVar(&f.genNice, "gen-nice", 0, "nice value of the generator thread while it sends")
	cmd.Flags().BoolVar(&f.shareSUTCPU, "share-sut-cpu", false, "let segchain's own threads run on the SUT CPU too (default: confined to the generator CPU)")
}

// measureOn checks the sandwich flags, brings the testbed up, prepares
// the SUT and runs measure on it; the testbed is down when it returns.
func measureOn[T any](f *testbedFlags, rounds int, window time.Duration, measure func(*perf.NetnsDriver) (T, error)) (T, error) {
	var zero T
	if rounds < 1 || window <= 0 {
		return zero, fmt.Errorf("need --rounds ≥ 1 and --window > 0")
	}
	drv, down, err := f.up()
	if err != nil {
		return zero, err
	}
	defer down()
	if err := perf.PrepareSUT(drv.Env()); err != nil {
		return zero, err
	}
	return measure(drv)
}

// upTestbed builds the netns testbed and tears it down on Ctrl-C/SIGTERM
// too; the caller defers the returned down function.
func (f *testbedFlags) up() (*perf.NetnsDriver, func(), error) {
	drv := perf.NewNetnsDriver(perf.NetnsOptions{GenCPU: f.genCPU, SUTCPU: f.sutCPU, SUTNice: f.sutNice, GenNice: f.genNice,
		ConfineProcess: !f.shareSUTCPU})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sig; ok {
			_ = drv.Down()
			os.Exit(130)
		}
	}()
	down := func() {
		signal.Stop(sig)
		close(sig) // no signal comes after Stop: ends the goroutine above
		_ = drv.Down()
	}
	if err := drv.Up(); err != nil {
		down()
		return nil, nil, fmt.Errorf("testbed: %w", err)
	}
	return drv, down, nil
}

func newPerfLimitCmd() *cobra.Command {
	var (
		tb           testbedFlags
		output       string
		size, repeat int
		window       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "limit [--repeat N] [--window 1s] [--size 64] [-o json]",
		Short: "Measure the testbed's physical limit and stack ceiling (no SUT behaviour)",
		Long: `Measure the built-in testbed's own limits, the figures every "perf run" also
measures once per run and size before its trials (report "ceilings"):

  physical limit   the generator flat out into a native XDP_DROP on the SUT's
                   input port, run by the SUT port's threaded NAPI thread on
                   the SUT CPU; nothing touches the frames on this path, so
                   the generator skips its per-frame template rewrite
  with rewrite     the same, the generator rewriting every frame from its
                   template as it must for any stack SUT: the generator's
                   limit as used in trials
  stack ceiling    the generator into the SUT's stack (skb + GRO) and a tc
                   ingress drop: the most any stack-based SUT can forward
  latency floor    the latency (p50 / p99) of the same two paths at the
                   latency phase's 20000 pps: the testbed's own share of
                   every latency perf run reports

The frame is plain IPv6 (the baseline's) with a --size-byte IP packet. Each
figure is the median of 5 slices of --window after a 300 ms warm-up;
--repeat N measures N times and also prints the median over repeats. See
docs/benchmarks.md ("Ceilings").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if repeat < 1 || window <= 0 {
				return fmt.Errorf("need --repeat ≥ 1 and --window > 0")
			}
			if size < perf.MinSize || size > perf.MaxSize {
				return fmt.Errorf("--size %d outside %d..%d", size, perf.MinSize, perf.MaxSize)
			}
			reg, err := perfRegistry()
			if err != nil {
				return err
			}
			base, err := reg.Get("IPv6")
			if err != nil {
				return err
			}
			drv, down, err := tb.up()
			if err != nil {
				return err
			}
			defer down()
			cs, err := perf.MeasureLimits(drv, base, size, repeat, window)
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), cs)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "| Repeat | Generator sent (kpps) | Physical limit: → XDP_DROP (kpps) | with rewrite (kpps) | → stack + tc drop (kpps) | latency floor p50 / p99 (µs): → XDP_DROP | → stack + tc drop |\n")
			fmt.Fprintf(w, "|---:|---:|---:|---:|---:|---:|---:|\n")
			var gen, lim, rw, st, lx, ls []float64
			floor := func(l *perf.LatencyResult, into *[]float64) string {
				if l == nil || l.Packets == 0 {
					return ""
				}
				*into = append(*into, l.P50)
				return fmt.Sprintf("%.2f / %.2f", l.P50/1e3, l.P99/1e3)
			}
			for _, c := range cs {
				fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %.0f | %s | %s |\n", c.Run, c.GenPPS/1e3, c.XDPDropPPS/1e3, c.XDPDropRewritePPS/1e3, c.StackDropPPS/1e3,
					floor(c.XDPDropLatency, &lx), floor(c.StackDropLatency, &ls))
				gen, lim, rw, st = append(gen, c.GenPPS), append(lim, c.XDPDropPPS), append(rw, c.XDPDropRewritePPS), append(st, c.StackDropPPS)
			}
			if len(cs) > 1 {
				fmt.Fprintf(w, "| median | %.0f | %.0f | %.0f | %.0f | %.2f (p50) | %.2f (p50) |\n", perf.Median(gen)/1e3, perf.Median(lim)/1e3, perf.Median(rw)/1e3, perf.Median(st)/1e3,
					perf.Median(lx)/1e3, perf.Median(ls)/1e3)
			}
			return nil
		},
	}
	tb.register(cmd)
	cmd.Flags().IntVar(&size, "size", 64, "bytes of the IP packet (48..1356)")
	cmd.Flags().IntVar(&repeat, "repeat", 3, "measurements")
	cmd.Flags().DurationVar(&window, "window", time.Second, "measured time per figure (after a 300 ms warm-up)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text (Markdown table) or json; table is an alias of text")
	return cmd
}

func newPerfLsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the behaviour recipes",
		RunE: func(cmd *cobra.Command, args []string) error {
			reg, err := perfRegistry()
			if err != nil {
				return err
			}
			type row struct {
				Name        string `json:"name"`
				Description string `json:"description"`
			}
			var rows []row
			for _, r := range reg.List() {
				rows = append(rows, row{r.Name(), r.Describe()})
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "BEHAVIOUR\tDESCRIPTION")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\n", r.Name, r.Description)
			}
			return tw.Flush()
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func newPerfRunCmd() *cobra.Command {
	var (
		file, out, output string
		tb                testbedFlags
		rounds, runs      int
		quiet             bool
	)
	cmd := &cobra.Command{
		Use:   "run -f EXP.yaml [--out DIR] [-o json]",
		Short: "Run an experiment on the built-in netns testbed",
		Long: `Run an experiment file (see examples/perf/ and its README for the fields). The
testbed is built with unique namespace names and torn down afterwards, also
on error or Ctrl-C. Each run and packet size first measures the testbed's
ceilings (as "segchain perf limit" does), then the behaviours' throughput,
then their latency at a paced rate (the experiment's latency: section;
latency.enabled: false skips it).

Results: a Markdown table on stdout (or the JSON report with -o json); with
--out, report.json, results.csv, table.md, windows.csv (every measured
window: rates, the SUT thread's CPU time, run-queue wait and steal) and
PNG/SVG plots in DIR. The command exits non-zero when an A/A control is
more than sandwich.aa_limit from 1 (the report says "valid": false).
Progress: log lines on stderr, and a progress bar with ETA when stderr is a
terminal (never in a CI log or a file); -q silences both.

Example:
  segchain perf run -f examples/perf/table5_1.yaml --out bench-out/t51 --rounds 40`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return fmt.Errorf("-f EXP.yaml is required")
			}
			exp, err := perf.LoadExperiment(file)
			if err != nil {
				return err
			}
			if rounds > 0 {
				exp.Sandwich.Rounds = rounds
			}
			if runs > 0 {
				exp.Runs = runs
			}
			if err := exp.Validate(); err != nil {
				return err
			}
			reg, err := perfRegistry()
			if err != nil {
				return err
			}
			for _, b := range append([]string{exp.Baseline}, exp.Behaviors...) {
				if _, err := reg.Get(b); err != nil {
					return err
				}
			}
			drv, down, err := tb.up()
			if err != nil {
				return err
			}
			defer down()
			stderr := cmd.ErrOrStderr()
			// The bar is drawn only on a terminal, and log lines go
			// through the console so that they never cut into it.
			con := perf.NewConsole(stderr)
			bar := &perf.Bar{W: con.Bar()}
			runner := &perf.Runner{Driver: drv, Registry: reg, Log: con, Progress: bar}
			if quiet {
				runner.Log, bar.W = nil, nil
			}
			rep, err := runner.Run(exp)
			if !quiet {
				bar.Finish()
			}
			if err != nil {
				return err
			}
			if out != "" {
				files, err := rep.WriteAll(out)
				if err != nil {
					return err
				}
				for _, f := range files {
					fmt.Fprintln(stderr, "wrote", f)
				}
			}
			if output == "json" {
				err = rep.WriteJSON(cmd.OutOrStdout())
			} else {
				err = rep.WriteMarkdown(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if !rep.Valid {
				return fmt.Errorf("run rejected: the A/A control drifted more than %.0f%% from 1", 100*exp.Sandwich.AALimit)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "experiment file (YAML)")
	cmd.Flags().StringVar(&out, "out", "", "directory for report.json, results.csv, table.md and plots")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "stdout format: text (Markdown table) or json; table is an alias of text")
	tb.register(cmd)
	cmd.Flags().IntVar(&rounds, "rounds", 0, "override sandwich.rounds")
	cmd.Flags().IntVar(&runs, "runs", 0, "override runs")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar or log on stderr")
	return cmd
}
