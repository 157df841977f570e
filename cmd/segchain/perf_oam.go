package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/oam/oamperf"
	"github.com/segchain/segchain/internal/perf"
)

func newPerfOAMCmd() *cobra.Command {
	var (
		tb     testbedFlags
		output string
		rounds int
		window time.Duration
		wire   bool
	)
	cmd := &cobra.Command{
		Use:   "oam [--rounds 30] [--window 100ms] [--wire] [-o json]",
		Short: "Measure what O-flag sampling costs a headend and a segment node against nodes without any sampling program",
		Long: `Measures O-flag sampling's cost (docs/oam.md, docs/benchmarks.md "#30") on the
built-in testbed with the sandwich method, 64-byte packets, in two sandwiches
whose references carry no sampling program at all.

The headend (reference T.Encaps: the kernel's encap seg6 route, 2 SIDs):
  T.Encaps (A/A)               the reference again: the method's own error
  T.Encaps+marker-tcx          the TCX marker (sessions 10-12) at 1:1000 on the
                               output port's egress
  T.Encaps+empty-tcx-egress    an empty TCX program there: the hook alone
  T.Encaps.oam.route           the route as encap bpf in, pushing the same SRH
                               through the kernel's encapsulation, O-flag 1:1000
  T.Encaps.route               the same program marking none

A segment node (reference End: seg6local End):
  End (A/A)                    the reference again
  End+tap-fentry               the tap as fentry on seg6_local_input_core
  End+tap-tcx                  the TCX tap (sessions 10-12) on the input port
  End+empty-tcx-ingress        an empty TCX program there: the hook alone

The headend behind the boundary filter (reference T.Encaps+boundary: T.Encaps
as a chain — a rule, a table — with boundary_in on the input port, no sampling):
  T.Encaps+boundary (A/A)      the reference again
  T.Encaps+boundary+mark-1000  the filter marking 1:1000, the O-rule and the
                               O-flagged table (session 15's mechanism)
  T.Encaps+boundary+marker-tcx the TCX marker at 1:1000 on the output port

Programs on interfaces and tracing programs are attached by the generator's
switch to their arm and detached by the switch back to the reference. The
testbed's forwarding sink is a TCX egress program on the output port, so the
egress hook is entered in every arm unless --wire counts at the tester's wire
instead. Reported per arm: R_cpu (the reference's SUT CPU ns/packet ÷ the arm's;
median and 95 % CI), the throughput ratio when enough windows had the SUT CPU
to themselves, and ns/packet. 30 rounds take about 3 minutes.`,
		Example: "  segchain perf oam --rounds 30 --wire",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			res, err := measureOn(&tb, rounds, window, func(drv *perf.NetnsDriver) ([]oamperf.Result, error) {
				return oamperf.Measure(drv, rounds, window, wire)
			})
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			for _, r := range res {
				fmt.Fprintf(w, "reference %s (no sampling program): %.1f ns/packet (median of %d windows)\n\n",
					r.Ref, r.RefNsPerPkt.Median, r.RefNsPerPkt.Runs)
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ARM\tR_CPU\tCI95\tTHROUGHPUT RATIO\tNS/PACKET")
				for _, a := range r.Arms {
					thr := "not measurable"
					if a.Throughput.Runs > 0 {
						thr = fmt.Sprintf("%.4f (n=%d)", a.Throughput.Median, a.Throughput.Runs)
					}
					fmt.Fprintf(tw, "%s\t%.4f\t%.4f–%.4f\t%s\t%.1f\n", a.Name, a.CPURatio.Median,
						a.CPURatio.CI95[0], a.CPURatio.CI95[1], thr, a.NsPerPkt.Median)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				for _, s := range r.Skipped {
					fmt.Fprintf(w, "not measured: %s\n", s)
				}
				fmt.Fprintln(w)
			}
			return nil
		},
	}
	tb.register(cmd)
	cmd.Flags().IntVar(&rounds, "rounds", 30, "sandwich rounds")
	cmd.Flags().DurationVar(&window, "window", 100*time.Millisecond, "measured window per arm and round")
	cmd.Flags().BoolVar(&wire, "wire", false, "count at the tester's wire instead of a TCX sink on the SUT's output port (no program on the SUT's egress: the egress arms pay the hook's entry)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
