package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/pool/poolperf"
)

func newPerfPoolsCmd() *cobra.Command {
	var (
		tb     testbedFlags
		output string
		rounds int
		window time.Duration
		wire   bool
		bound  bool
	)
	cmd := &cobra.Command{
		Use:   "pools [--rounds 40] [--window 100ms] [--wire] [--boundary] [-o json]",
		Short: "Measure what a pool of instances costs at the headend against a chain on a headend without pools",
		Long: `Measures per-flow pool selection at the headend (docs/pools.md) on the built-in
testbed with the sandwich method, 64-byte packets, one flow. The reference is a
single-instance chain as segchain installs one (an ip rule into the chain's
table, encap seg6 with 2 SIDs) on a headend WITHOUT pools: no pool program on
its interfaces. The arms:

  T.Encaps.rule (A/A)    the reference again: the method's own error
  T.Encaps.pool+in+out   the chain's first SID a pool of 3 instances, with the
                         pool programs as apply installed them before session
                         17 (pool_in at TCX ingress chooses and marks,
                         pool_out at TCX egress)
  T.Encaps.pool+in       the same pool with pool_in only: as apply installs it
                         since session 17 (the headend's own packets are chosen
                         for on a route of their own, no program on egress)
  T.Encaps.rule+in+out   the single-instance chain on a headend with pools,
                         the install before session 17
  T.Encaps.rule+in       the same with pool_in only (what a chain without a
                         pool pays on a headend with pools)
  T.Encaps.rule+empty-tcx  the single-instance chain with an empty TCX ingress
                         program: what the hook alone costs

The programs sit on interfaces, so the generator's template switch to an arm
also attaches the arm's programs and the switch back to the reference detaches
them, before the settle time (as "perf boundary" does). The testbed's
forwarding sink is a TCX egress program on the output port, so the egress
hook is entered in every arm: the "+out" arms pay pool_out's program, not the
hook's entry (pool_out let forwarded packets pass after one compare). With
--wire the packets are counted at the tester's end of the wire instead: no
program on the SUT's egress, so those arms pay the egress hook too.

With --boundary the SR domain boundary filter is on the input port for the
whole run, every arm and the reference included, as apply puts it on a
headend's host-facing interface by default (docs/security.md): the pool
programs go after it on TCX ingress, as apply orders them, so the arms
measure what a pool adds where the hook already runs a program
(rule+empty-tcx: one more program behind the filter).

Reported per arm: R_cpu (the reference's SUT CPU ns/packet ÷ the arm's;
median and 95 % CI) and the throughput ratio when enough windows had the SUT
CPU to themselves. 40 rounds take about 1.5 minutes.`,
		Example: "  segchain perf pools --rounds 40",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			res, err := measureOn(&tb, rounds, window, func(drv *perf.NetnsDriver) (*poolperf.Result, error) {
				return poolperf.Measure(drv, rounds, window, wire, bound)
			})
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			ref := "no pool program"
			if bound {
				ref += ", boundary filter on the input port in every arm"
			}
			fmt.Fprintf(w, "reference %s (%s): %.1f ns/packet (median of %d windows)\n\n",
				poolperf.Slots[0].Name, ref, res.RefNsPerPkt.Median, res.RefNsPerPkt.Runs)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ARM\tR_CPU\tCI95\tTHROUGHPUT RATIO\tNS/PACKET")
			for _, a := range res.Arms {
				thr := "not measurable"
				if a.Throughput.Runs > 0 {
					thr = fmt.Sprintf("%.4f (n=%d)", a.Throughput.Median, a.Throughput.Runs)
				}
				fmt.Fprintf(tw, "%s\t%.4f\t%.4f–%.4f\t%s\t%.1f\n", a.Name, a.CPURatio.Median,
					a.CPURatio.CI95[0], a.CPURatio.CI95[1], thr, a.NsPerPkt.Median)
			}
			return tw.Flush()
		},
	}
	tb.register(cmd)
	cmd.Flags().IntVar(&rounds, "rounds", 40, "sandwich rounds")
	cmd.Flags().DurationVar(&window, "window", 100*time.Millisecond, "measured window per arm and round")
	cmd.Flags().BoolVar(&wire, "wire", false, "count at the tester's wire instead of a TCX sink on the SUT's output port (no program on the SUT's egress: the pool_out arms pay the egress hook's entry)")
	cmd.Flags().BoolVar(&bound, "boundary", false, "keep the boundary filter on the SUT's input port in every arm, as apply does on a host-facing interface (the pool programs go after it)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
