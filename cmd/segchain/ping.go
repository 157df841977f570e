package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/oam"
)

// icmpFlags are ping's and traceroute's: where the probes start.
type icmpFlags struct {
	dom     domainFlags
	from    string
	timeout time.Duration
}

func (f *icmpFlags) register(cmd *cobra.Command) {
	f.dom.register(cmd, true)
	cmd.Flags().StringVar(&f.from, "from", "", "the lab node the probes are sent from (required)")
	cmd.Flags().DurationVarP(&f.timeout, "timeout", "W", time.Second, "how long to wait for each probe's answer")
}

// setup resolves the lab, the source node's namespace and the SID list's
// words (addresses or service names).
func (f *icmpFlags) setup(cmd *cobra.Command, words []string) (oam.Domain, string, []netip.Addr, error) {
	var d oam.Domain
	if err := checkOutput(f.dom.output); err != nil {
		return d, "", nil, err
	}
	if f.dom.labNm == "" || f.from == "" {
		return d, "", nil, errors.New("name the lab and the node to send from: --lab NAME --from NODE")
	}
	s, err := f.dom.session(cmd, true)
	if err != nil {
		return d, "", nil, err
	}
	defer s.Close()
	d = oam.Domain{Config: s.Domain, Plan: s.Plan, Netns: s.Lab.Nodes}
	ns, ok := d.Netns[f.from]
	if !ok {
		return d, "", nil, fmt.Errorf("--from %s: no such node in lab %s", f.from, f.dom.labNm)
	}
	var split []string
	for _, w := range words {
		split = append(split, strings.Split(w, ",")...)
	}
	addrs, err := d.Resolve(split)
	return d, ns, addrs, err
}

func newPingCmd() *cobra.Command {
	var f icmpFlags
	var count int
	var interval time.Duration
	var via []string
	var respond bool
	cmd := &cobra.Command{
		Use:   "ping --lab NAME --from NODE [--via SID,...] [--respond] [-c N] [-o json] TARGET",
		Short: "ICMPv6 echo to a SID or an address, optionally along a segment list (RFC 9259)",
		Long: `ping sends ICMPv6 echo requests from NODE's own stack to TARGET (an address,
a SID or a service name of the domain, which stands for its SID), as RFC
9259 section 3.1 describes: with --via, along a segment list carried in an
SRH (the kernel builds it from the socket's routing header option: the
segments in the order they are visited, TARGET last, Segment List[0]),
without it as a classic ping. Each reply is shown with the responder, the
lab node that owns it and the round-trip time; an ICMPv6 error (time
exceeded, unreachable, parameter problem) with the SID that was active
when it was sent (quoted by the responder).

Linux's seg6local behaviours do not process an upper-layer header addressed
to a SID (RFC 8986 4.1.1's "SL = 0: process the upper-layer header" is not
implemented; a packet to an End SID without an SRH is dropped too): a ping
to a native SID gets no answer, exactly as iputils ping gets none. A ping
to an address along SIDs (--via) is answered by the address's owner.

--respond attaches segchain's echo responder to the node that owns TARGET
for the ping (a TCX ingress program answering ICMPv6 echo requests to the
node's seg6local SIDs, docs/oam.md): a native SID then answers, from the
SID, as RFC 9259 3.1 expects (and an iputils ping meanwhile too).

Exit status: 0 when every request was answered by an echo reply, 2 when
some were not, 1 on error.`,
		Example: "  segchain ping --lab default --from ingress fc00:25::2\n  segchain ping --lab default --from ingress --respond nfv1-end\n  segchain ping --lab default --from ingress --via nfv1-end,nfv2-end fc00:4d::d",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, ns, segs, err := f.setup(cmd, append(via, args[0]))
			if err != nil {
				return err
			}
			target := segs[len(segs)-1]
			if respond {
				node := d.NodeOf(target.String())
				rns, ok := d.Netns[node]
				if !ok {
					return fmt.Errorf("--respond: %s is no lab node's SID", target)
				}
				r, err := oam.AttachEcho(rns)
				if err != nil {
					return fmt.Errorf("--respond on %s: %w", node, err)
				}
				defer r.Close()
				if !r.Serves(target) {
					what := "no seg6local route of " + node
					if s, ok := d.SIDAt(target); ok {
						what = fmt.Sprintf("%s's %s SID %s, served by segchain's tc program, not a seg6local route", node, s.Behavior, cmp.Or(s.Service, s.SID.String()))
					}
					return fmt.Errorf("--respond: the echo responder answers %s's seg6local SIDs; %s is %s", node, target, what)
				}
			}
			replies, err := oam.Ping(ns, target, segs[:len(segs)-1], count, interval, f.timeout)
			for i := range replies {
				replies[i].Node = d.NodeOf(replies[i].From)
			}
			if err != nil {
				return err
			}
			ok := 0
			for _, r := range replies {
				if r.Type == "echo-reply" {
					ok++
				}
			}
			if f.dom.output == "json" {
				err = writeJSON(cmd.OutOrStdout(), map[string]any{"target": target.String(), "via": addrStrings(segs[:len(segs)-1]), "from": f.from, "replies": replies, "received": ok})
			} else {
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "ping %s%s from %s\n", target, viaText(segs[:len(segs)-1]), f.from)
				printReplies(w, replies, "SEQ")
				fmt.Fprintf(w, "%d sent, %d echo replies\n", len(replies), ok)
			}
			if err == nil && ok < len(replies) {
				msg := fmt.Sprintf("%d of %d echo requests not answered", len(replies)-ok, len(replies))
				if hint := d.NoEchoHint(target); hint != "" && !respond && ok == 0 {
					msg += ": " + hint + "; --respond attaches segchain's echo responder to it"
				}
				return &exitStatus{code: exitChanges, msg: msg}
			}
			return err
		},
	}
	f.register(cmd)
	cmd.Args = cobra.ExactArgs(1)
	cmd.Flags().IntVarP(&count, "count", "c", 3, "echo requests to send")
	cmd.Flags().DurationVarP(&interval, "interval", "i", 200*time.Millisecond, "time between echo requests")
	cmd.Flags().BoolVar(&respond, "respond", false, "attach segchain's echo responder to TARGET's node for the ping, so that a native SID answers (Linux's seg6local does not)")
	cmd.Flags().StringSliceVar(&via, "via", nil, "segments to visit before TARGET (addresses or service names, comma-separated)")
	return cmd
}

func newTracerouteCmd() *cobra.Command {
	var f icmpFlags
	var maxHops int
	cmd := &cobra.Command{
		Use:   "traceroute --lab NAME --from NODE [--max-hops N] [-o json] SID-LIST",
		Short: "Traceroute along a segment list (RFC 9259): every node on the way and the SID active there",
		Long: `traceroute sends ICMPv6 echo requests from NODE along SID-LIST (addresses
or service names, comma- or space-separated; the last is the target, the
others are carried in an SRH, in the order they are visited) with hop limits
1, 2, ... as RFC 9259 section 3.2 describes. Each node on the way answers
the probe whose hop limit runs out there with an ICMPv6 Time Exceeded that
quotes it: the report shows, per hop, the responder, its lab node, the
round-trip time and the SID that was active (the quoted destination) with
its Segments Left, so the SR endpoints are told apart from the transit
routers. It ends at the target's echo reply, an unreachable or parameter
problem, or --max-hops.

Exit status: 0 the target answered, 2 it did not, 1 on error.`,
		Example: "  segchain traceroute --lab default --from ingress nfv1-end,nfv2-end,fc00:4d::d",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, ns, segs, err := f.setup(cmd, args)
			if err != nil {
				return err
			}
			target := segs[len(segs)-1]
			replies, err := oam.Traceroute(ns, target, segs[:len(segs)-1], maxHops, f.timeout)
			for i := range replies {
				replies[i].Node = d.NodeOf(replies[i].From)
			}
			if err != nil {
				return err
			}
			reached := len(replies) > 0 && replies[len(replies)-1].Type == "echo-reply"
			if f.dom.output == "json" {
				err = writeJSON(cmd.OutOrStdout(), map[string]any{"target": target.String(), "via": addrStrings(segs[:len(segs)-1]), "from": f.from, "hops": replies, "reached": reached})
			} else {
				w := cmd.OutOrStdout()
				fmt.Fprintf(w, "traceroute to %s%s from %s, %d hops max\n", target, viaText(segs[:len(segs)-1]), f.from, maxHops)
				printReplies(w, replies, "HOP")
			}
			if err == nil && !reached {
				msg := fmt.Sprintf("%s did not answer", target)
				if hint := d.NoEchoHint(target); hint != "" {
					msg += ": " + hint + lastAnswered(replies)
				}
				return &exitStatus{code: exitChanges, msg: msg}
			}
			return err
		},
	}
	f.register(cmd)
	cmd.Args = cobra.MinimumNArgs(1)
	cmd.Flags().IntVar(&maxHops, "max-hops", 16, "largest hop limit to try")
	return cmd
}

// lastAnswered names the last hop that answered a traceroute ("" if
// none did).
func lastAnswered(rs []oam.Reply) string {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Type != "timeout" {
			return fmt.Sprintf("; the last hop that answered was %d (%s)", rs[i].Seq, cmp.Or(rs[i].Node, rs[i].From))
		}
	}
	return ""
}

func printReplies(w io.Writer, rs []oam.Reply, first string) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tFROM\tNODE\tANSWER\tRTT ms\tACTIVE SID (SL)\n", first)
	for _, r := range rs {
		rtt, sid := "-", "-"
		if r.Type != "timeout" {
			rtt = fmt.Sprintf("%.3f", r.RTT)
		}
		if r.ActiveSID != "" {
			sid = r.ActiveSID
			if r.SL != nil {
				sid += fmt.Sprintf(" (%d)", *r.SL)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", r.Seq, dash(r.From), dash(r.Node), r.Type, rtt, sid)
	}
	tw.Flush()
}

func viaText(segs []netip.Addr) string {
	if len(segs) == 0 {
		return ""
	}
	return " via " + strings.Join(addrStrings(segs), " ")
}

func addrStrings(as []netip.Addr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}
