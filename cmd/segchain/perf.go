package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/proxy/proxyperf"
)

// perfRegistry lists every recipe segchain knows. Other areas add their
// recipes here by passing their constructors' results.
func perfRegistry() (*perf.Registry, error) {
	recipes := append(perf.NativeRecipes(), perf.BaselineRecipes()...)
	recipes = append(recipes, proxyperf.Recipes()...)
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
that rejects a drifting run. PDR/NDR searches (exponential then binary) are
available for NIC testbeds; on veth use a relaxed loss threshold (≥ 2%).
See docs/benchmarks.md.`,
	}
	cmd.AddCommand(newPerfRunCmd(), newPerfLsCmd())
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
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "BEHAVIOUR\tDESCRIPTION")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\n", r.Name, r.Description)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func newPerfRunCmd() *cobra.Command {
	var (
		file, out, output string
		genCPU, sutCPU    int
		sutNice, genNice  int
		rounds, runs      int
		quiet             bool
	)
	cmd := &cobra.Command{
		Use:   "run -f EXP.yaml [--out DIR] [-o json]",
		Short: "Run an experiment on the built-in netns testbed",
		Long: `Run an experiment file (see examples/perf/). The testbed is built with unique
namespace names and torn down afterwards, also on error or Ctrl-C.
Results: a Markdown table on stdout (or the JSON report with -o json); with
--out, report.json, results.csv, table.md and PNG/SVG plots in DIR.`,
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
			drv := perf.NewNetnsDriver(perf.NetnsOptions{GenCPU: genCPU, SUTCPU: sutCPU, SUTNice: sutNice, GenNice: genNice})
			// Tear down on Ctrl-C / SIGTERM too.
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sig)
			go func() {
				if _, ok := <-sig; ok {
					_ = drv.Down()
					os.Exit(130)
				}
			}()
			if err := drv.Up(); err != nil {
				return fmt.Errorf("testbed: %w", err)
			}
			defer drv.Down()
			stderr := cmd.ErrOrStderr()
			bar := &perf.Bar{W: stderr}
			runner := &perf.Runner{Driver: drv, Registry: reg, Log: stderr, Progress: bar}
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
	cmd.Flags().StringVarP(&output, "output", "o", "table", "stdout format: table (Markdown) or json")
	cmd.Flags().IntVar(&genCPU, "gen-cpu", 0, "CPU of the generator")
	cmd.Flags().IntVar(&sutCPU, "sut-cpu", 1, "CPU of the SUT's NAPI thread")
	cmd.Flags().IntVar(&sutNice, "sut-nice", 0, "nice value of the SUT's NAPI thread (-20: win the CPU on a shared machine)")
	cmd.Flags().IntVar(&genNice, "gen-nice", 0, "nice value of the generator thread while it sends")
	cmd.Flags().IntVar(&rounds, "rounds", 0, "override sandwich.rounds")
	cmd.Flags().IntVar(&runs, "runs", 0, "override runs")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress bar or log on stderr")
	return cmd
}
