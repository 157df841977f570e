package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/dataplane/firewall"
	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/localsid"
)

// newFwCmd is the rule CLI of the SR-aware firewall (End.AN.FW).
func newFwCmd() *cobra.Command {
	f := &fwCLI{}
	cmd := &cobra.Command{
		Use:   "fw",
		Short: "Rules of the SR-aware firewall (End.AN.FW)",
		Long: `segchain fw manages the rules of an SR-aware firewall instance (End.AN.FW,
after SERA). An instance is bound to a SID prefix and created with segchain sid:

  segchain sid add fc00:2::f1:0/112 End.AN.FW args 16 policy accept

Every packet whose IPv6 destination falls in the prefix is classified against
the instance's rules (first match wins, as in an iptables chain) and acted
upon; with 'args 16' the rightmost 16 bits of the active SID are its ARGS.

Rules use ip6tables syntax (iptables syntax with -4), passed as the remaining
arguments, no quoting needed:

  segchain fw add fc00:2::f1:0/112 -s 2001:db8::/32 -p tcp --dport 80 -j DROP
  segchain fw add fc00:2::f1:0/112 -4 -s 10.0.0.0/8 -p udp --dport 53 -j ACCEPT
  segchain fw add fc00:2::f1:0/112 -m srh --srh-segs-left-gt 2 -j SEG6 --seg6-action skip-next
  segchain fw add fc00:2::f1:0/112 -p tcp --dport 443 -j SEG6 --seg6-action eval-args
  segchain fw insert fc00:2::f1:0/112 1 -p icmpv6 -j ACCEPT
  segchain fw list fc00:2::f1:0/112
  segchain fw del fc00:2::f1:0/112 2
  ip6tables-save | segchain fw import fc00:2::f1:0/112 -
  segchain fw args fc00:2::f1:0/112 7 drop
  segchain fw policy fc00:2::f1:0/112 drop

Basic rules (no -m srh) match the original packet: the inner IPv6/IPv4
packet in encap mode; in insert mode the IPv6 source, the final destination
(Segment List[0]) and the transport header after the SRH; a packet without
SRH as it is. Advanced rules (-m srh) match -s/-d on the outer header,
--inner-src/--inner-dst on the original, and the SRH: --srh-next-hdr,
--srh-hdr-len-eq|gt|lt, --srh-segs-left-eq|gt|lt, --srh-last-entry-eq|gt|lt,
--srh-tag, --srh-psid (SL[SL+1]), --srh-nsid (SL[SL-1]), --srh-lsid (SL[0]);
each can be negated with '!'.

Actions: ACCEPT (= SEG6 --seg6-action go-next: End, the packet goes on to the
next segment), DROP, REJECT [--reject-with ...] (ICMPv6 error to the SRv6
source, rate-limited), SEG6 --seg6-action skip-next (SL -= 2), go-last
(SL = 0), eval-args (the action is the ARGS value's in the instance's table:
by default 0 go-next, 1 drop, 2 skip-next, 3 go-last; an unknown value is
dropped with an ICMPv6 Parameter Problem pointing at the destination).

Every change replaces the instance's whole rule set atomically: a packet
sees the old rules or the new ones, never a mix. Counters of unchanged rules
are kept. Classification cost does not depend on the number of rules (up to
4096 per instance): see docs/firewall.md.`,
	}
	var output string
	add := &cobra.Command{
		Use:                "add SID RULE...",
		Short:              "Append a rule",
		Long:               "Append RULE (ip6tables syntax; -4 for iptables syntax) to the instance at SID.\n--netns NS (or --lab L --node N) may go anywhere on the line.",
		Example:            "  segchain fw add fc00:2::f1:0/112 -s 2001:db8::/32 -p tcp --dport 80 -j DROP",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.rawRun(cmd, args, 1, func(sid netip.Prefix, rest []string) error {
				return f.edit(cmd.OutOrStdout(), sid, func(in *firewall.Instance) error { return in.AppendRule(rest) })
			})
		},
	}
	insert := &cobra.Command{
		Use:                "insert SID POS RULE...",
		Short:              "Insert a rule at position POS (1 = first)",
		Long:               "Insert RULE (ip6tables syntax; -4 for iptables syntax) at position POS of the\ninstance at SID; the rule there and those after it move down.\n--netns NS (or --lab L --node N) may go anywhere on the line.",
		Example:            "  segchain fw insert fc00:2::f1:0/112 1 -p ipv6-icmp -j ACCEPT",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.rawRun(cmd, args, 2, func(sid netip.Prefix, rest []string) error {
				pos, err := strconv.Atoi(rest[0])
				if err != nil || pos < 1 {
					return fmt.Errorf("position %q: want a number from 1", rest[0])
				}
				return f.edit(cmd.OutOrStdout(), sid, func(in *firewall.Instance) error { return in.InsertRule(pos, rest[1:]) })
			})
		},
	}
	del := &cobra.Command{
		Use:     "del SID POS",
		Short:   "Delete the rule at position POS (as fw list numbers them)",
		Example: "  segchain fw del fc00:2::f1:0/112 2",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			sid, err := localsid.ParseSID(args[0])
			if err != nil {
				return err
			}
			pos, err := strconv.Atoi(args[1])
			if err != nil || pos < 1 {
				return fmt.Errorf("position %q: want a number from 1", args[1])
			}
			return f.edit(cmd.OutOrStdout(), sid, func(in *firewall.Instance) error { return in.DeleteRule(pos) })
		},
	}
	list := &cobra.Command{
		Use:   "list [SID]",
		Short: "Show instances, their rules and per-rule packet/byte counters",
		Long: `List firewall instances (all, or the one bound to SID): policy, ARGS table,
counters of the instance (packets, actions taken, ICMP errors sent or
rate-limited, drops by reason) and every rule with its packet and byte
counters, numbered as del and insert take them.`,
		Example: "  segchain fw list fc00:2::f1:0/112 -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.list(cmd.OutOrStdout(), args, output)
		},
	}
	outputFlag(list, &output)
	flush := &cobra.Command{
		Use:   "flush SID",
		Short: "Remove every rule of an instance (the policy then decides)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sid, err := localsid.ParseSID(args[0])
			if err != nil {
				return err
			}
			return f.edit(cmd.OutOrStdout(), sid, func(in *firewall.Instance) error { in.Rules = nil; return nil })
		},
	}
	imp := &cobra.Command{
		Use:   "import SID [FILE|-]",
		Short: "Replace the rules with the FORWARD chain of an ip6tables-save/iptables-save file",
		Long: `Read iptables-save or ip6tables-save output (FILE, or standard input for '-'
or no FILE) and make the filter table's FORWARD chain the instance's rule set,
its policy the instance's policy. Any construct the firewall cannot represent
(other matches or targets, jumps to user chains) refuses the whole file, with
every offending line listed.`,
		Example: "  ip6tables-save | segchain fw import fc00:2::f1:0/112 -\n  segchain fw import fc00:2::f1:0/112 rules.v6",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			sid, err := localsid.ParseSID(args[0])
			if err != nil {
				return err
			}
			var r io.Reader = cmd.InOrStdin()
			name := "standard input"
			if len(args) == 2 && args[1] != "-" {
				fh, err := os.Open(args[1])
				if err != nil {
					return err
				}
				defer fh.Close()
				r, name = fh, args[1]
			}
			res, err := fwrule.Import(r)
			if err != nil {
				return fmt.Errorf("import %s: %w", name, err)
			}
			// What the firewall does not take on purpose (other tables
			// and chains) is said, never dropped silently.
			for _, note := range res.Skipped {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s: %s\n", name, note)
			}
			return f.edit(cmd.OutOrStdout(), sid, func(in *firewall.Instance) error {
				in.Rules = res.Rules
				if res.Policy != nil {
					in.Policy = *res.Policy
				}
				return nil
			})
		},
	}
	argsCmd := &cobra.Command{
		Use:   "args SID VALUE ACTION",
		Short: "Set the action of an ARGS value for eval-args (go-next, drop, reject, skip-next, go-last, or 'none' to remove)",
		Long: `Set the action eval-args takes for a packet whose active SID carries ARGS
VALUE: go-next (accept), drop, reject, skip-next or go-last; 'none' removes the
value, so that packets carrying it are dropped with an ICMPv6 Parameter
Problem. The table starts as 0 go-next, 1 drop, 2 skip-next, 3 go-last.`,
		Example: "  segchain fw args fc00:2::f1:0/112 7 go-last\n  segchain fw args fc00:2::f1:0/112 1 none",
		Args:    cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			sid, err := localsid.ParseSID(args[0])
			if err != nil {
				return err
			}
			v, err := strconv.ParseUint(args[1], 0, 32)
			if err != nil {
				return fmt.Errorf("ARGS value %q: %w", args[1], err)
			}
			return f.edit(cmd.OutOrStdout(), sid, func(in *firewall.Instance) error { return in.SetArg(uint32(v), args[2]) })
		},
	}
	policy := &cobra.Command{
		Use:   "policy SID accept|drop",
		Short: "Set what happens to packets no rule matches",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			sid, err := localsid.ParseSID(args[0])
			if err != nil {
				return err
			}
			k, err := fwrule.ParseTargetKind(args[1])
			if err != nil || (k != fwrule.Accept && k != fwrule.Drop) {
				return fmt.Errorf("policy %q: want accept or drop", args[1])
			}
			return f.edit(cmd.OutOrStdout(), sid, func(in *firewall.Instance) error { in.Policy = k; return nil })
		},
	}
	f.nf.register(cmd.PersistentFlags())
	cmd.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := normalizeOutput(cmd, args); err != nil {
			return err
		}
		if cmd.DisableFlagParsing {
			return nil // rawRun takes the flags from the words
		}
		var err error
		f.netns, err = f.nf.resolve()
		return err
	}
	for _, c := range []*cobra.Command{del, flush, imp, argsCmd, policy} {
		c.Flags().BoolVar(&f.noWait, "no-wait", false, noWaitUsage)
	}
	cmd.AddCommand(add, insert, del, list, flush, imp, argsCmd, policy)
	return cmd
}

type fwCLI struct {
	nf     nodeFlags // --netns, --lab/--node
	netns  string    // the namespace they name ("" = the current one)
	noWait bool
}

// rawRun handles the verbs whose rule words are not flags of ours: it
// takes --netns NS (or --lab L --node N) and --no-wait anywhere on the
// line and -h/--help before the SID, then needs at least n more words (SID
// first).
func (f *fwCLI) rawRun(cmd *cobra.Command, args []string, n int, fn func(netip.Prefix, []string) error) error {
	args, err := f.nf.take(args)
	if err != nil {
		return err
	}
	rest := args[:0:0]
	for _, a := range args {
		if a == "--no-wait" {
			f.noWait = true
			continue
		}
		rest = append(rest, a)
	}
	args = rest
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		return cmd.Help()
	}
	if f.netns, err = f.nf.resolve(); err != nil {
		return err
	}
	if len(args) < n+1 {
		return fmt.Errorf("usage: segchain fw %s", cmd.Use)
	}
	sid, err := localsid.ParseSID(args[0])
	if err != nil {
		return err
	}
	return fn(sid, args[1:])
}

// edit applies change to the instance at sid and installs the result
// atomically, holding the node's lock (read-modify-write).
func (f *fwCLI) edit(w io.Writer, sid netip.Prefix, change func(*firewall.Instance) error) error {
	locks, err := lockNetns(context.Background(), os.Stderr, f.netns, f.noWait)
	if err != nil {
		return err
	}
	defer locks.Release()
	in, err := firewall.Edit(f.netns, sid, change)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %d rules, policy %s\n", in.SID, len(in.Rules), in.Policy)
	return nil
}

func (f *fwCLI) list(w io.Writer, args []string, output string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	var sid *netip.Prefix
	if len(args) == 1 {
		p, err := localsid.ParseSID(args[0])
		if err != nil {
			return err
		}
		sid = &p
	}
	sts, err := firewall.ListAt(f.netns, sid)
	if err != nil {
		return err
	}
	if output == "json" {
		if sts == nil {
			sts = []firewall.Status{}
		}
		return writeJSON(w, sts)
	}
	for _, s := range sts {
		FormatFwStatus(w, s)
	}
	return nil
}

// FormatFwStatus prints one instance as `fw list` shows it.
func FormatFwStatus(w io.Writer, s firewall.Status) {
	in, c := s.Instance, s.Counters
	fmt.Fprintf(w, "%s %s args %d policy %s (table slot %d)\n", in.SID, firewall.Behavior, in.ArgsBits, in.Policy, s.Slot)
	args := in.Args
	if args == nil {
		args = fwrule.DefaultArgs()
	}
	if in.ArgsBits > 0 {
		var vs []uint32
		for v := range args {
			vs = append(vs, v)
		}
		sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
		var parts []string
		for _, v := range vs {
			if in.ArgsBits >= 32 || uint64(v) < 1<<in.ArgsBits {
				parts = append(parts, fmt.Sprintf("%d=%s", v, args[v]))
			}
		}
		fmt.Fprintf(w, "  eval-args table: %s (others: drop + parameter problem)\n", strings.Join(parts, " "))
	}
	fmt.Fprintf(w, "  %d pkts %d bytes: forwarded %d (go-next %d, skip-next %d, go-last %d), delivered %d, policy %d, icmp sent %d, rate-limited %d\n",
		c.Packets, c.Bytes, c.Forwarded, c.GoNext, c.SkipNext, c.GoLast, c.Delivered, c.Policy, c.ICMPSent, c.ICMPLimited)
	if len(c.Drops) > 0 {
		var rs []string
		for r := range c.Drops {
			rs = append(rs, r)
		}
		sort.Strings(rs)
		var parts []string
		for _, r := range rs {
			parts = append(parts, fmt.Sprintf("%s %d", r, c.Drops[r]))
		}
		fmt.Fprintf(w, "  drops: %s\n", strings.Join(parts, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  num\tpkts\tbytes\trule")
	for _, r := range s.Rules {
		fmt.Fprintf(tw, "  %d\t%d\t%d\t%s\n", r.Num, r.Packets, r.Bytes, r.Rule)
	}
	tw.Flush()
}
