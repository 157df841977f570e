package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/boundary/boundaryperf"
	"github.com/segchain/segchain/internal/perf"
)

func newPerfBoundaryCmd() *cobra.Command {
	var (
		tb     testbedFlags
		output string
		rounds int
		window time.Duration
	)
	cmd := &cobra.Command{
		Use:   "boundary [--rounds 40] [--window 100ms] [-o json]",
		Short: "Measure what the SR domain boundary filter costs ordinary traffic",
		Long: `Measures the boundary filter (docs/security.md) on the built-in testbed with
the sandwich method: the reference is plain IPv6 forwarding without the filter;
the arms are, 64-byte packets each:

  IPv6 (A/A)               the reference again: the method's own error
  IPv6+boundary            the filter as installed (TCX ingress and egress)
  IPv6+empty-tcx           an empty TCX ingress program: the hook's own cost
  IPv6+empty-tcx+boundary  the filter where a TCX program already runs
  IPv6+empty-cls           the empty program as a cls_bpf direct-action filter
  IPv6+empty-xdp           an empty native XDP program
  IPv6+boundary-xdp        the filter's XDP ingress variant (TCX egress)
  T.Encaps (2 SIDs) without the filter, with it, with its XDP variant

The filter holds 8 locators, an external SID and 32 node addresses, none hit
by the test packets. The filter sits on an interface, so within one run it
cannot be on for one arm and off for another through different ports (this
kernel has no VLAN or macvlan devices): the generator's template switch to an
arm also attaches the arm's programs and the switch back to the reference
detaches them, before the settle time. Reported per arm: R_cpu (reference SUT
CPU ns/packet ÷ the arm's; median and 95 % CI) and the throughput ratio when
enough windows had the SUT CPU to themselves. The filter's cost is 1 − R_cpu
for IPv6 and 1 − R_cpu(T.Encaps+boundary) ÷ R_cpu(T.Encaps) at a headend.
Then every arm's latency at 20000 pps offered (rounds/4 interleaved rounds):
p50, p99, max and the latency added to the reference (docs/benchmarks.md,
"Latency").

The testbed's generator hands the SUT XDP frames, the one case where native
XDP on veth is cheap; for traffic sent through the stack see
TestBoundaryStackPath in internal/boundary/boundaryperf. 40 rounds take about
3.5 minutes.`,
		Example: "  segchain perf boundary --rounds 40",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			res, err := measureOn(&tb, rounds, window, func(drv *perf.NetnsDriver) (*boundaryperf.Result, error) {
				return boundaryperf.Measure(drv, rounds, window)
			})
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "reference IPv6 without the filter: %.1f ns/packet (median of %d windows)\n\n",
				res.RefNsPerPkt.Median, res.RefNsPerPkt.Runs)
			if l := res.RefLatency; l != nil {
				fmt.Fprintf(w, "latency at %.0f pps offered, reference: p50 %.2f µs, p99 %.2f µs, max %.2f µs (%d packets)\n\n",
					l.RatePPS, l.P50/1e3, l.P99/1e3, l.Max/1e3, l.Packets)
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ARM\tR_CPU\tCI95\tTHROUGHPUT RATIO\tNS/PACKET\tP50 µs\tP99 µs\tMAX µs\tADDED P50 µs\tADDED P99 µs")
			for _, a := range res.Arms {
				thr := "not measurable"
				if a.Throughput.Runs > 0 {
					thr = fmt.Sprintf("%.4f (n=%d)", a.Throughput.Median, a.Throughput.Runs)
				}
				lat := "\t\t\t\t"
				if l := a.Latency; l != nil && l.NotMeasured == "" {
					lat = fmt.Sprintf("%.2f\t%.2f\t%.2f\t%.2f\t%.2f", l.P50/1e3, l.P99/1e3, l.Max/1e3, l.AddedP50/1e3, l.AddedP99/1e3)
				}
				fmt.Fprintf(tw, "%s\t%.4f\t%.4f–%.4f\t%s\t%.1f\t%s\n", a.Name, a.CPURatio.Median,
					a.CPURatio.CI95[0], a.CPURatio.CI95[1], thr, a.NsPerPkt.Median, lat)
			}
			return tw.Flush()
		},
	}
	tb.register(cmd)
	cmd.Flags().IntVar(&rounds, "rounds", 40, "sandwich rounds")
	cmd.Flags().DurationVar(&window, "window", 100*time.Millisecond, "measured window per arm and round")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
