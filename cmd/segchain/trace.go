package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/oam/oamsvc"
)

func newTraceCmd() *cobra.Command {
	var f domainFlags
	var timeout time.Duration
	var tap string
	var sample uint32
	var duration time.Duration
	var metricsListen string
	cmd := &cobra.Command{
		Use:   "trace (--lab NAME | -f FILE) [--timeout D] [--tap tracepoint|tcx] [-o json] CHAIN",
		Short: "Send a probe along a chain and show every function it went through, with times",
		Long: `trace sends one probe of CHAIN's own flow (a packet its classifier
matches: the match's src/dst prefixes, protocol and the low end of its port
ranges; UDP port 33434 when the match names none; TCP probes are a SYN
carrying data) into the chain's headend from the host on the headend's
link, so it is classified, encapsulated (H.Encaps/H.Insert, HMAC) and
forwarded as real traffic is. While it runs, a tracing program on the
net:netif_receive_skb tracepoint timestamps the probe wherever a lab node
receives it, before XDP-generic and the TCX programs: outer SRv6, the plain
inner packet between a proxy and its SF, the decapsulated packet after the
egress. It only reads, and is removed when trace ends (--tap tcx: a TCX
program at the head of every interface's ingress instead). See
docs/oam.md.

The report has one line per hop, in order: the headend, each SID (node,
SID, behaviour, service), the SR-unaware SF behind a proxy, the
decapsulating egress and the delivery to the destination host, each with
whether the probe reached it and left it, the time from the headend (AT)
and the time the hop held it (HELD; a proxy: to the SF and back), in
microseconds, and the transit nodes crossed (VIA). A hop served before the
tap (userspace SIDs in native XDP) is shown reached when a later hop saw
the probe.

CHAIN/reverse traces the reverse of a bidirectional chain: its probe is
the forward match swapped, sent from the host on the forward egress's
link.

A broken chain names its first hop the probe did not get through (not
reached, or reached and never left), where it was seen last, where the
kernel dropped it and why (the skb:kfree_skb tracepoint's drop reason,
e.g. IP_INNOROUTES, NETFILTER_DROP), and the drop counters that went up
meanwhile on any node: per-SID errors and drop
reasons (segchain's eBPF behaviours, seg6local counters) and the kernel's
IP statistics (Ip6OutNoRoutes, Ip6InDiscards ...).

Through agents (-f FILE whose nodes name an agent, or a lab brought up
with --agents): each node's agent runs the tap for its own node and
streams the sightings over its mutual-TLS connection (the OAM service),
and the headend's agent hands the probe to its stack as arriving on the
host link (an XDP program run in live-frame mode), so no host has to
send it. Times are then on each node's wall clock (CLOCK_REALTIME added
to its kernel's timestamps): between machines as good as their time
synchronisation (the report's clock says so). Nodes without an agent are
tapped here, in their namespace.

With --sample N (RFC 9259 §2.1, O-flag sampling): no probe; for
--duration the chain's headend sets the SRH's O-flag on 1 in N of the
chain's own packets (its boundary filter marks them on the way in and a
rule sends them to an O-flagged copy of the chain's route, so HMAC chains
are signed with the flag; without a boundary filter on the headend, a TCX
egress program, which skips HMAC chains: the output says which), and a TCX
ingress program on the interfaces of the chain's segment nodes timestamps
every O-flagged packet they receive. Each sampled packet's sightings are put together by the
bytes after its SRH; the report has, per hop (the headend, then each
segment), how many sampled packets arrived, the latency from the headend
and from the previous hop (p50/p90/p99/max, µs) and a histogram. The
SR-unaware SF behind a proxy sees no SRH: its time is in the step to the
segment after the proxy. Chains whose SRH carries an HMAC are counted but
not marked (the HMAC covers the flags). Through agents, each node's agent
runs its part (the OAM service's Sample) and the headend's agent marks.

With --sample N --metrics-listen ADDR (a lab without agents): continuous
sampling, exported to Prometheus. The programs stay attached; every
second the sampled packets seen at every hop are added to per-hop latency
histograms (segchain_sample_hop_step_seconds: from the previous hop;
segchain_sample_hop_latency_seconds: from the headend) served on
http://ADDR/metrics with the marker's counts (segchain_sample_packets_total,
_marked_total, _hmac_unmarked_total, _incomplete_total). It runs until
interrupted, or for --duration when given, then prints the totals.

With --metrics-listen ADDR and no --sample (through agents): the same
histograms of the sampling the chain keeps (chains[].oam.sample, kept by
apply on the agents): no program is attached; every second each node's
new sightings are read from its agent and paired here (docs/oam.md, "Kept
by apply"). segchain status shows the same per hop. In a lab without
agents, nothing keeps it between commands: the chain's declared rate is
sampled by this command as with --sample.

Exit status: 0 the probe was delivered, 2 the chain is broken, 1 error.`,
		Example: "  segchain trace --lab default web\n  segchain trace --lab default web --sample 100 --duration 2s\n  segchain trace --lab default web --sample 1000 --metrics-listen 127.0.0.1:9464 --duration 3s\n  segchain trace --lab default firewalled -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			// SIGINT and SIGTERM end a sampling run as its duration does:
			// the boundary marking it set (pinned selectors, O-flagged
			// tables and rules) outlives a process killed by them.
			ctx, stopSignals := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stopSignals()
			cmd.SetContext(ctx)
			s, err := f.session(cmd, true)
			if err != nil {
				return err
			}
			defer s.Close()
			d := oamsvc.Domain(s)
			if d.Remote == nil && f.labNm == "" && len(d.Netns) == 0 {
				return errors.New("no node to trace: name a lab (--lab NAME), or a domain file (-f FILE) whose nodes have an agent (nodes.NAME.agent) or a namespace (nodes.NAME.netns)")
			}
			if sample == 0 && metricsListen != "" {
				var dur time.Duration
				if cmd.Flags().Changed("duration") {
					dur = duration
				}
				return followKept(cmd, d, args[0], metricsListen, dur)
			}
			if sample > 0 && metricsListen != "" {
				var dur time.Duration
				if cmd.Flags().Changed("duration") {
					dur = duration
				}
				return sampleContinuous(cmd, d, args[0], sample, metricsListen, dur)
			}
			if sample > 0 {
				sr, err := oam.Sample(cmd.Context(), d, args[0], oam.SampleOptions{Rate: sample, Duration: duration})
				if err != nil {
					return err
				}
				if f.output == "json" {
					return writeJSON(cmd.OutOrStdout(), sr)
				}
				printSample(cmd.OutOrStdout(), sr)
				return nil
			}
			r, err := oam.Trace(cmd.Context(), d, args[0], oam.Options{Timeout: timeout, Tap: tap})
			if err != nil {
				return err
			}
			// The last trace of each chain labels segchain graph's picture.
			if f.labNm != "" {
				if serr := oam.SaveReport(oam.TraceDir(f.labNm), r); serr != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: last trace not kept for segchain graph: %v\n", serr)
				}
			}
			// Traces kept for labs that are down since.
			_ = oam.PruneTraceDirs(func(name string) bool {
				_, err := lab.Get(name)
				return errors.Is(err, lab.ErrNotFound)
			})
			if f.output == "json" {
				err = writeJSON(cmd.OutOrStdout(), r)
			} else {
				printTrace(cmd.OutOrStdout(), r)
			}
			if err == nil && r.Broken != nil {
				return &exitStatus{code: exitChanges, msg: fmt.Sprintf("chain %s is broken at %s: %s", r.Chain, r.Broken.Name, r.Broken.Reason)}
			}
			return err
		},
	}
	f.register(cmd, true)
	cmd.Args = cobra.ExactArgs(1)
	cmd.Flags().DurationVar(&timeout, "timeout", 300*time.Millisecond, "how long to wait for the probe's delivery")
	cmd.Flags().Uint32Var(&sample, "sample", 0, "O-flag sampling of live traffic instead of a probe: the headend sets the O-flag on 1 in N of the chain's packets for --duration, every node timestamps them; per-hop counts and latencies")
	cmd.Flags().DurationVar(&duration, "duration", 10*time.Second, "with --sample: how long the headend marks")
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "serve per-hop latency histograms for Prometheus on ADDR (host:port; e.g. 127.0.0.1:9464) until interrupted or --duration when given: with --sample, of a continuous run in a lab; without, of the chain's kept sampling (chains[].oam.sample) through agents")
	cmd.Flags().StringVar(&tap, "tap", oam.TapTracepoint, "where the probe is seen: tracepoint (one attach to net:netif_receive_skb for every node) or tcx (a TCX ingress program on every interface)")
	return cmd
}

func printTrace(w io.Writer, r *oam.Report) {
	fmt.Fprintf(w, "trace %s (%s): probe %s from %s\n", r.Chain, r.Mode, r.Probe, r.From)
	if r.Clock == oam.ClockAgents {
		fmt.Fprintf(w, "times on %s\n", r.Clock)
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tHOP\tNODE\tSID\tBEHAVIOR\tSERVICE\tREACHED\tIN→OUT\tAT µs\tHELD µs\tVIA")
	for i, h := range r.Hops {
		reached := "no"
		switch {
		case h.Reached && h.Left, h.Reached && h.Kind == oam.KindDelivery:
			reached = "yes"
		case h.Reached:
			reached = "not left"
		case h.Inferred:
			reached = "inferred"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", i, h.Kind, h.Node, dash(h.SID), dash(h.Behavior), dash(h.Service),
			reached, dash(strings.Trim(h.In+"→"+h.Out, "→")), us(h.AtUS), us(h.HeldUS), dash(strings.Join(h.Via, " → ")))
	}
	tw.Flush()
	if r.Broken == nil {
		fmt.Fprintf(w, "delivered: every hop passed (trace took %.1f ms)\n", r.TookMS)
		return
	}
	fmt.Fprintf(w, "BROKEN at hop %d, %s: %s", r.Broken.Hop, r.Broken.Name, r.Broken.Reason)
	if r.Broken.LastSeen != "" {
		fmt.Fprintf(w, "; last seen at %s", r.Broken.LastSeen)
	}
	fmt.Fprintln(w)
	for _, k := range r.Broken.KernelDrops {
		fmt.Fprintf(w, "  %s: the kernel dropped it (%s) on %s at %.1f µs\n", k.Node, k.Reason, dash(k.Iface), k.AtUS)
	}
	if len(r.Broken.Drops) == 0 && len(r.Broken.KernelDrops) == 0 {
		fmt.Fprintln(w, "no drop counter went up (a drop nobody counts: an SF's own filter, a link down)")
	}
	for _, d := range r.Broken.Drops {
		fmt.Fprintf(w, "  %s: %s +%d\n", d.Node, d.Counter, d.Delta)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func us(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v)
}

func printSample(w io.Writer, r *oam.SampleReport) {
	fmt.Fprintf(w, "sampled %s (%s): 1 in %d of %d packets marked (%d) at the headend", r.Chain, r.Mode, r.Rate, r.Packets, r.Marked)
	if r.HMAC > 0 {
		fmt.Fprintf(w, ", %d not marked (HMAC)", r.HMAC)
	}
	fmt.Fprintln(w)
	switch {
	case r.Marker == oam.MarkerBoundary:
		fmt.Fprintln(w, "marked by the headend's boundary filter (on the way in), O-flagged by the chain's route")
	case r.Marker == oam.MarkerTCX && r.MarkerNote != "":
		fmt.Fprintf(w, "marked by the TCX egress marker: %s\n", r.MarkerNote)
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tHOP\tNODE\tSID\tBEHAVIOR\tSERVICE\tPACKETS\tSTEP p50 µs\tp99\tmax\tAT p50 µs\tp99")
	q := func(v *oam.Quantiles) (string, string, string) {
		if v == nil {
			return "-", "-", "-"
		}
		return fmt.Sprintf("%.1f", v.P50), fmt.Sprintf("%.1f", v.P99), fmt.Sprintf("%.1f", v.Max)
	}
	for i, h := range r.Hops {
		s50, s99, smax := q(h.StepUS)
		a50, a99, _ := q(h.AtUS)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", i, h.Kind, h.Node, dash(h.SID), dash(h.Behavior), dash(h.Service),
			h.Packets, s50, s99, smax, a50, a99)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d sampled packet(s) not seen at every hop (took %.0f ms)\n", r.Incomplete, r.TookMS)
}
