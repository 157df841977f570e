package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/nodestate"
)

// newSidCmd is the localsid CLI (after srconf localsid). Behaviours the
// kernel lacks are served by exts (the eBPF SR proxies), which main wires in.
func newSidCmd(exts ...localsid.Extension) *cobra.Command {
	s := &sidCLI{exts: exts}
	extra := map[string]string{}
	for _, e := range exts {
		for _, b := range e.Behaviors() {
			extra[b] = b + " PARAMS...\n      served by segchain in eBPF (see docs/sid.md)"
			if h, ok := e.(interface{ Help(string) string }); ok {
				extra[b] = h.Help(b) // an extension whose SIDs are not added here
			}
		}
	}
	cmd := &cobra.Command{
		Use:   "sid",
		Short: "Add, delete, show, flush local SIDs (seg6local) of this node",
		Long: `segchain sid manages the local SIDs of one node, like srconf localsid:
every SID is a seg6local route (without 'dev DEV', a local route on lo, as
'segchain apply' installs SIDs: it does not depend on any interface staying
up; with 'dev DEV', a route bound to DEV) stamped with the route protocol of
hand-made SIDs (` + fmt.Sprint(nodestate.ProtoManual) + `), so that flush removes only what segchain sid
installed. SIDs a domain installed (segchain apply, protocol ` + fmt.Sprint(nodestate.Proto) + `) are shown
but belong to the domain: sid del and flush leave them alone, and apply and
destroy never touch hand-made SIDs (plan reports a domain SID at the
destination of a hand-made one as a conflict).
State lives in the kernel and stays after the command exits. The node is the network namespace segchain runs in
('ip netns exec NS segchain sid ...'), the one named by --netns NS, or a lab
node: --lab LAB --node NODE (--node alone: the default lab). These flags go
anywhere on the line.

  sid add SID[/LEN] [action] BEHAVIOR [PARAMS...] [count|nocount] [dev DEV]
  sid del SID[/LEN]
  sid show [SID[/LEN]] [-o json]
  sid flush
  sid clear-counters [SID[/LEN]]

A SID without /LEN is a /128. Behaviour names are accepted in iproute2
spelling or lower case (End.DX6, end.dx6). Per-SID counters (packets, bytes,
errors) are on by default; 'nocount' turns them off. srconf's positional forms
are accepted too: 'end.dx6 ip fc00::1 veth0', 'end.dx2 veth0'; so is iproute2's
'action' keyword before the behaviour ('action End.X nh6 fc00::1').

Parameters (iproute2 keywords):
  nh4 IPV4 / nh6 IPV6   next hop of a cross-connect (ip ADDR: either family)
  oif DEV / iif DEV     outgoing / incoming interface
  table N|main          routing table to look the new DA / inner packet up in
  vrftable N            VRF table (needs VRF: not available on this kernel)
  segs S1,S2,...        segment list in path order (S1 visited first), as
                        iproute2's 'srh segs'; 'srh segs ...' also accepted
  hmac KEYID            add an HMAC TLV keyed by KEYID (ip sr hmac)
  flavors F[,F]         psp, usp, usd, next-csid (RFC 8986, RFC 9800); Linux
                        implements psp (End) and next-csid (End, End.X)
  lblen BITS nflen BITS next-csid's Locator-Block and uSID lengths (multiples
                        of 8; without them the kernel's 32 and 16: F3216)
  endpoint PATH         pinned lwt_seg6local program (End.BPF)

Behaviours:
` + localsid.HelpTable(extra) + `
Behaviours the kernel lacks (End.DT4, End.DT46 and vrftable need VRF devices,
which this kernel does not have) fail with an error naming the missing
feature. See docs/sid.md and docs/behaviors.md.`,
		Example: `  segchain sid --node nfv1 add fc00:2::100 End
  segchain sid --node nfv1 add fc00:2::101 end.x nh6 fc00:26::6
  segchain sid add fc00:2::102 action End.X nh6 fc00:26::6 --lab default --node nfv1
  segchain sid --node nfv1 add fc00:2::ab:0/112 End.DT6 table main
  segchain sid --netns sc-default-nfv1 show -o json
  ip netns exec sc-default-nfv1 segchain sid clear-counters fc00:2::100
  segchain sid --node nfv1 flush`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	s.nf.register(cmd.PersistentFlags())
	cmd.PersistentFlags().BoolVar(&s.noWait, "no-wait", false, noWaitUsage)
	cmd.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if err := normalizeOutput(cmd, args); err != nil {
			return err
		}
		var err error
		s.netns, err = s.nf.resolve()
		return err
	}

	add := &cobra.Command{
		Use:   "add SID[/LEN] BEHAVIOR [PARAMS...]",
		Short: "Install a local SID (fails if the SID exists)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.locked(cmd, func() error { return s.add(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args) })
		},
	}
	del := &cobra.Command{
		Use:   "del SID[/LEN]",
		Short: "Remove a local SID installed by segchain",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.locked(cmd, func() error { return s.del(cmd.Context(), cmd.OutOrStdout(), args[0]) })
		},
	}
	var output string
	show := &cobra.Command{
		Use:   "show [SID[/LEN]]",
		Short: "List local SIDs with behaviour, parameters and counters",
		Long: `List every seg6local route of the node (and the SIDs of segchain's eBPF
behaviours): behaviour, parameters, counters (packets, bytes, errors). Routes
not installed by segchain are marked with their route protocol. Without a SID,
the drops of the SR domain boundary filter follow, one line per interface and
direction ("::/0 boundary dev IFACE dir in|out|hmac", a counter per reason:
sid-space, sid-space-srh, srh-to-node, malformed, leak-sid, hmac-missing,
hmac-malformed, hmac-unknown-key, external-next, vlan, hmac-misplaced, to-sf; see
docs/security.md).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.show(cmd.Context(), cmd.OutOrStdout(), args, output)
		},
	}
	outputFlag(show, &output)
	flush := &cobra.Command{
		Use:   "flush",
		Short: "Remove every hand-made local SID (the domain's and other tools' are kept)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return s.locked(cmd, func() error { return s.flush(cmd.Context(), cmd.OutOrStdout()) })
		},
	}
	clearCmd := &cobra.Command{
		Use:   "clear-counters [SID[/LEN]]",
		Short: "Reset the counters of one local SID or of all (with the boundary filter's)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.locked(cmd, func() error { return s.clearCounters(cmd.Context(), cmd.OutOrStdout(), args) })
		},
	}
	cmd.AddCommand(add, del, show, flush, clearCmd)
	return cmd
}

type sidCLI struct {
	nf     nodeFlags // --netns, --lab/--node
	netns  string    // the namespace they name ("" = the current one)
	noWait bool
	exts   []localsid.Extension
}

// node is the localsid manager of the node the flags name.
func (s *sidCLI) node() localsid.Node {
	return &localsid.Manager{Netns: s.netns, NodeName: s.nf.node, Exts: s.exts}
}

func (s *sidCLI) nsName() string {
	if s.netns == "" {
		return "current"
	}
	return s.netns
}

// locked runs a verb that changes the node under the node's lock.
func (s *sidCLI) locked(cmd *cobra.Command, fn func() error) error {
	locks, err := lockNetns(cmd.Context(), cmd.ErrOrStderr(), s.netns, s.noWait)
	if err != nil {
		return err
	}
	defer locks.Release()
	return fn()
}

// sidArg parses the optional SID[/LEN] argument of show and clear-counters.
func sidArg(args []string) (*netip.Prefix, error) {
	if len(args) == 0 {
		return nil, nil
	}
	p, err := localsid.ParseSID(args[0])
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func (s *sidCLI) add(ctx context.Context, w, ew io.Writer, args []string) error {
	a, err := s.node().Add(ctx, args)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "added %s\n", a.SID)
	if a.Warning != "" {
		fmt.Fprintln(ew, "warning: "+a.Warning)
	}
	return nil
}

func (s *sidCLI) del(ctx context.Context, w io.Writer, arg string) error {
	sid, err := localsid.ParseSID(arg)
	if err != nil {
		return err
	}
	if err := s.node().Del(ctx, sid); err != nil {
		return err
	}
	fmt.Fprintf(w, "deleted %s\n", sid)
	return nil
}

func (s *sidCLI) show(ctx context.Context, w io.Writer, args []string, output string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	filter, err := sidArg(args)
	if err != nil {
		return err
	}
	rows, err := s.node().Show(ctx, filter)
	if err != nil {
		return err
	}
	if output == "json" {
		entries := make([]localsid.Entry, len(rows))
		for i, r := range rows {
			entries[i] = r.Entry
		}
		return writeJSON(w, entries)
	}
	for _, r := range rows {
		fmt.Fprintln(w, r.Text)
	}
	return nil
}

func (s *sidCLI) flush(ctx context.Context, w io.Writer) error {
	n, err := s.node().Flush(ctx)
	fmt.Fprintf(w, "flushed %d local SID(s) from netns %s\n", n, s.nsName())
	return err
}

func (s *sidCLI) clearCounters(ctx context.Context, w io.Writer, args []string) error {
	filter, err := sidArg(args)
	if err != nil {
		return err
	}
	n, err := s.node().ClearCounters(ctx, filter)
	if err != nil {
		return err
	}
	if filter != nil {
		fmt.Fprintf(w, "cleared counters of %s\n", *filter)
	} else {
		fmt.Fprintf(w, "cleared counters of %d local SID(s)\n", n)
	}
	return nil
}
