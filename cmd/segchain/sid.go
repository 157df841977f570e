package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/pkg/srv6svc"
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
			return s.locked(cmd, func() error { return s.add(cmd.OutOrStdout(), cmd.ErrOrStderr(), args) })
		},
	}
	del := &cobra.Command{
		Use:   "del SID[/LEN]",
		Short: "Remove a local SID installed by segchain",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.locked(cmd, func() error { return s.del(cmd.OutOrStdout(), args[0]) })
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
			return s.show(cmd.OutOrStdout(), args, output)
		},
	}
	outputFlag(show, &output)
	flush := &cobra.Command{
		Use:   "flush",
		Short: "Remove every hand-made local SID (the domain's and other tools' are kept)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return s.locked(cmd, func() error { return s.flush(cmd.OutOrStdout()) })
		},
	}
	clearCmd := &cobra.Command{
		Use:   "clear-counters [SID[/LEN]]",
		Short: "Reset the counters of one local SID or of all (with the boundary filter's)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.locked(cmd, func() error { return s.clearCounters(cmd.OutOrStdout(), args) })
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

// locked runs a verb that changes the node under the node's lock.
func (s *sidCLI) locked(cmd *cobra.Command, fn func() error) error {
	locks, err := lockNetns(cmd.Context(), cmd.ErrOrStderr(), s.netns, s.noWait)
	if err != nil {
		return err
	}
	defer locks.Release()
	return fn()
}

func (s *sidCLI) open() (*dataplane.Handle, error) {
	h, err := dataplane.Open(s.netns)
	if err != nil {
		return nil, fmt.Errorf("open netns %q: %w", s.nsName(), err)
	}
	return h, nil
}

func (s *sidCLI) nsName() string {
	if s.netns == "" {
		return "current"
	}
	return s.netns
}

func (s *sidCLI) add(w, ew io.Writer, args []string) error {
	if len(args) > 2 && args[1] == "action" { // iproute2: ip -6 route add SID encap seg6local action End.X ...
		args = append(args[:1:1], args[2:]...)
	}
	if ext, canon := localsid.FindExtension(s.exts, args[1]); ext != nil {
		sid, err := localsid.ParseSID(args[0])
		if err != nil {
			return err
		}
		if err := ext.Add(s.netns, sid, canon, args[2:]); err != nil {
			return fmt.Errorf("add %s %s: %w", sid, canon, err)
		}
		// eBPF SIDs carry no route protocol: the ownership record tells
		// apply and destroy to leave this one alone.
		if err := local.MarkHandMade(s.netns, sid, canon); err != nil {
			return fmt.Errorf("add %s %s: record it as hand-made: %w", sid, canon, err)
		}
		fmt.Fprintf(w, "added %s %s\n", sid, canon)
		return nil
	}
	r, err := localsid.Parse(args)
	if err != nil {
		return err
	}
	h, err := s.open()
	if err != nil {
		return err
	}
	defer h.Close()
	if err := checkFeatures(h.Probe, r.Seg6Local); err != nil {
		return err
	}
	sids, err := h.LocalSIDs()
	if err != nil {
		return fmt.Errorf("list local sids: %w", err)
	}
	for _, l := range sids {
		if l.Route.Dst == r.Dst && l.Route.Table == r.Table {
			if nodestate.Owned(l.Protocol) {
				return fmt.Errorf("sid %s already exists and belongs to the domain (%s, installed by segchain apply)", r.Dst, localsid.Format(l.Route, nil))
			}
			return fmt.Errorf("sid %s already exists (%s); del it first", r.Dst, localsid.Format(l.Route, nil))
		}
	}
	if err := h.ReplaceRouteAs(r, nodestate.ProtoManual); err != nil {
		return fmt.Errorf("add %s: %w", r.Dst, err)
	}
	fmt.Fprintf(w, "added %s\n", localsid.Format(r, nil))
	if v, err := h.Sysctl("net.ipv6.conf.all.forwarding"); err == nil && strings.TrimSpace(v) == "0" {
		fmt.Fprintln(ew, "warning: net.ipv6.conf.all.forwarding is 0 in this namespace: SRv6 packets will not be forwarded")
	}
	return nil
}

// checkFeatures turns a kernel feature the behaviour needs but Probe says is
// missing into an error naming it, instead of the kernel's bare EINVAL.
// probe is only called when the behaviour depends on a probed feature;
// features Probe did not report (empty Name) are not checked.
func checkFeatures(probe func() dataplane.Features, l *nodestate.Seg6Local) error {
	var f *dataplane.Features
	need := func(pick func(*dataplane.Features) dataplane.Feature, what string) error {
		if f == nil {
			p := probe()
			f = &p
		}
		ft := pick(f)
		if ft.Name == "" || ft.Supported {
			return nil
		}
		reason := ft.Reason
		if reason == "" {
			reason = ft.Name + " missing"
		}
		return fmt.Errorf("%s needs %s, which this kernel lacks (%s): %w", l.Action, what, reason, dataplane.ErrNotSupported)
	}
	vrf := func(f *dataplane.Features) dataplane.Feature { return f.VRF }
	var checks []func() error
	add := func(pick func(*dataplane.Features) dataplane.Feature, what string) {
		checks = append(checks, func() error { return need(pick, what) })
	}
	switch l.Action {
	case "End.DT4":
		add(vrf, "VRF devices (End.DT4 looks up a VRF table)")
		add(func(f *dataplane.Features) dataplane.Feature { return f.EndDT4 }, "End.DT4")
	case "End.DT46":
		add(vrf, "VRF devices (End.DT46 looks up a VRF table)")
		add(func(f *dataplane.Features) dataplane.Feature { return f.EndDT46 }, "End.DT46")
	case "End.BPF":
		add(func(f *dataplane.Features) dataplane.Feature { return f.EndBPF }, "End.BPF")
	}
	if l.VRFTable != 0 && l.Action != "End.DT4" && l.Action != "End.DT46" {
		add(vrf, "VRF devices (vrftable)")
		add(func(f *dataplane.Features) dataplane.Feature { return f.VRFTable }, "vrftable")
	}
	for _, fl := range l.Flavors {
		switch fl {
		case "psp":
			add(func(f *dataplane.Features) dataplane.Feature { return f.FlavorPSP }, "the PSP flavor")
		case "next-csid":
			add(func(f *dataplane.Features) dataplane.Feature { return f.FlavorNextCSID }, "the NEXT-C-SID flavor")
		default: // usp, usd: no Linux kernel implements them
			return fmt.Errorf("%s flavor %s: the Linux kernel implements only psp and next-csid: %w", l.Action, fl, dataplane.ErrNotSupported)
		}
	}
	for _, c := range checks {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

func (s *sidCLI) del(w io.Writer, arg string) error {
	sid, err := localsid.ParseSID(arg)
	if err != nil {
		return err
	}
	// SIDs bound by a process (userspace services) are not made by sid
	// add: their extension removes a dead binding, bypass route included.
	for _, e := range s.exts {
		if u, ok := e.(interface {
			DelBinding(string, netip.Prefix) (bool, error)
		}); ok {
			if done, err := u.DelBinding(s.netns, sid); err != nil {
				return fmt.Errorf("del %s: %w", sid, err)
			} else if done {
				fmt.Fprintf(w, "deleted %s\n", sid)
				return nil
			}
		}
	}
	h, err := s.open()
	if err != nil {
		return err
	}
	defer h.Close()
	sids, err := h.LocalSIDs()
	if err != nil {
		return fmt.Errorf("list local sids: %w", err)
	}
	n := 0
	for _, l := range sids {
		if l.Route.Dst != sid {
			continue
		}
		switch {
		case nodestate.HandMade(l.Protocol):
		case nodestate.Owned(l.Protocol):
			return fmt.Errorf("sid %s belongs to the domain (installed by segchain apply): remove it from the domain file and apply, or segchain destroy", sid)
		default:
			return fmt.Errorf("sid %s was not installed by segchain (route protocol %s): remove it with ip -6 route del", sid, protoName(l.Protocol))
		}
		if err := h.DeleteRouteAs(l.Route, l.Protocol); err != nil {
			return fmt.Errorf("del %s: %w", sid, err)
		}
		n++
	}
	hm, err := local.HandMade(s.netns)
	if err != nil {
		return err
	}
	for _, e := range s.exts {
		if _, mine := hm[sid]; !mine {
			if err := s.refuseDomainExt(e, sid); err != nil {
				return err
			}
			continue
		}
		ok, err := e.Del(s.netns, sid)
		if err != nil {
			return fmt.Errorf("del %s: %w", sid, err)
		}
		if ok {
			n++
		}
	}
	if _, mine := hm[sid]; mine {
		if err := local.MarkHandMade(s.netns, sid, ""); err != nil {
			return err
		}
	}
	if n == 0 {
		return fmt.Errorf("sid %s not found in netns %s", sid, s.nsName())
	}
	fmt.Fprintf(w, "deleted %s\n", sid)
	return nil
}

// refuseDomainExt fails when extension e serves sid but did not get it from
// sid add: it is the domain's (segchain apply), not ours to delete.
func (s *sidCLI) refuseDomainExt(e localsid.Extension, sid netip.Prefix) error {
	entries, err := e.Show(s.netns)
	if err != nil {
		return fmt.Errorf("show %s: %w", strings.Join(e.Behaviors(), "/"), err)
	}
	for _, en := range entries {
		if en.SID == sid {
			return fmt.Errorf("sid %s (%s) belongs to the domain (installed by segchain apply): remove it from the domain file and apply, or segchain destroy", sid, en.Behavior)
		}
	}
	return nil
}

// sidRow is one line of `sid show`, native or from an extension.
type sidRow struct {
	entry localsid.Entry
	text  string
}

func (s *sidCLI) collect(filter *netip.Prefix) ([]sidRow, error) {
	h, err := s.open()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	sids, err := h.LocalSIDs()
	if err != nil {
		return nil, fmt.Errorf("list local sids: %w", err)
	}
	var rows []sidRow
	for _, l := range sids {
		if filter != nil && l.Route.Dst != *filter {
			continue
		}
		text := localsid.Format(l.Route, l.Counters)
		switch {
		case nodestate.HandMade(l.Protocol):
		case nodestate.Owned(l.Protocol):
			text += "  [domain: installed by segchain apply]"
		case l.Protocol == srv6svc.RouteProtocol:
			text += "  [on-failure bypass route of a userspace service]"
		default:
			text += fmt.Sprintf("  [proto %s: not installed by segchain]", protoName(l.Protocol))
		}
		rows = append(rows, sidRow{entry: localsid.NativeEntry(l.Route, l.Protocol, l.Counters), text: text})
	}
	for _, e := range s.exts {
		entries, err := e.Show(s.netns)
		if err != nil {
			return nil, fmt.Errorf("show %s: %w", strings.Join(e.Behaviors(), "/"), err)
		}
		for _, en := range entries {
			if filter != nil && en.SID != *filter {
				continue
			}
			rows = append(rows, sidRow{entry: en, text: localsid.FormatEntry(en)})
		}
	}
	if filter == nil {
		b, err := boundaryRows(s.netns)
		if err != nil {
			return nil, err
		}
		rows = append(rows, b...)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].entry.SID, rows[j].entry.SID
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c < 0
		}
		return a.Bits() < b.Bits()
	})
	return rows, nil
}

// boundaryRows are the drops of the namespace's SR domain boundary filter,
// one row per interface and direction with a counter per reason (SID ::/0:
// the filter covers every destination on the interface).
func boundaryRows(netns string) ([]sidRow, error) {
	cs, err := boundary.Counters(netns)
	if err != nil {
		return nil, fmt.Errorf("boundary counters: %w", err)
	}
	byKey := map[[2]string]*localsid.Entry{}
	var keys [][2]string
	for _, c := range cs {
		k := [2]string{c.Iface, c.Direction}
		e := byKey[k]
		if e == nil {
			e = &localsid.Entry{SID: netip.PrefixFrom(netip.IPv6Unspecified(), 0), Behavior: "boundary",
				Params: map[string]string{"dev": c.Iface, "dir": c.Direction}, Counters: map[string]uint64{}}
			byKey[k] = e
			keys = append(keys, k)
		}
		e.Counters[c.Reason] += c.Packets
		e.Counters["bytes"] += c.Bytes
	}
	var rows []sidRow
	for _, k := range keys {
		rows = append(rows, sidRow{entry: *byKey[k], text: localsid.FormatEntry(*byKey[k])})
	}
	return rows, nil
}

func protoName(p int) string {
	switch p {
	case 2:
		return "kernel"
	case 3:
		return "boot"
	case 4:
		return "static"
	}
	return fmt.Sprint(p)
}

func (s *sidCLI) show(w io.Writer, args []string, output string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	var filter *netip.Prefix
	if len(args) == 1 {
		p, err := localsid.ParseSID(args[0])
		if err != nil {
			return err
		}
		filter = &p
	}
	rows, err := s.collect(filter)
	if err != nil {
		return err
	}
	if filter != nil && len(rows) == 0 {
		return fmt.Errorf("sid %s not found in netns %s", *filter, s.nsName())
	}
	if output == "json" {
		entries := make([]localsid.Entry, len(rows))
		for i, r := range rows {
			entries[i] = r.entry
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	for _, r := range rows {
		fmt.Fprintln(w, r.text)
	}
	return nil
}

func (s *sidCLI) flush(w io.Writer) error {
	h, err := s.open()
	if err != nil {
		return err
	}
	defer h.Close()
	sids, err := h.LocalSIDs()
	if err != nil {
		return fmt.Errorf("list local sids: %w", err)
	}
	n := 0
	var errs []error
	for _, l := range sids {
		if !nodestate.HandMade(l.Protocol) {
			continue
		}
		if err := h.DeleteRouteAs(l.Route, l.Protocol); err != nil {
			errs = append(errs, fmt.Errorf("del %s: %w", l.Route.Dst, err))
			continue
		}
		n++
	}
	// The extensions' hand-made SIDs only: the domain's stay.
	hm, err := local.HandMade(s.netns)
	if err != nil {
		return err
	}
	for _, e := range s.exts {
		entries, err := e.Show(s.netns)
		if err != nil {
			errs = append(errs, fmt.Errorf("show %s: %w", strings.Join(e.Behaviors(), "/"), err))
			continue
		}
		for _, en := range entries {
			if _, mine := hm[en.SID]; !mine {
				continue
			}
			if _, err := e.Del(s.netns, en.SID); err != nil {
				errs = append(errs, fmt.Errorf("del %s: %w", en.SID, err))
				continue
			}
			if err := local.MarkHandMade(s.netns, en.SID, ""); err != nil {
				errs = append(errs, err)
			}
			n++
		}
	}
	fmt.Fprintf(w, "flushed %d local SID(s) from netns %s\n", n, s.nsName())
	return errors.Join(errs...)
}

func (s *sidCLI) clearCounters(w io.Writer, args []string) error {
	var filter *netip.Prefix
	if len(args) == 1 {
		p, err := localsid.ParseSID(args[0])
		if err != nil {
			return err
		}
		filter = &p
	}
	h, err := s.open()
	if err != nil {
		return err
	}
	defer h.Close()
	sids, err := h.LocalSIDs()
	if err != nil {
		return fmt.Errorf("list local sids: %w", err)
	}
	n, found := 0, false
	if filter == nil {
		if err := boundary.ClearCounters(s.netns); err != nil {
			return fmt.Errorf("clear boundary counters: %w", err)
		}
	}
	for _, l := range sids {
		if filter != nil && l.Route.Dst != *filter {
			continue
		}
		found = true
		if l.Counters == nil {
			continue
		}
		if err := h.ClearCounters(l.Route); err != nil {
			return fmt.Errorf("clear counters of %s: %w", l.Route.Dst, err)
		}
		n++
	}
	for _, e := range s.exts {
		if filter != nil {
			entries, err := e.Show(s.netns)
			if err != nil {
				return fmt.Errorf("show %s: %w", strings.Join(e.Behaviors(), "/"), err)
			}
			mine := false
			for _, en := range entries {
				mine = mine || en.SID == *filter
			}
			if !mine {
				continue
			}
			found = true
		}
		if err := e.ClearCounters(s.netns, filter); err != nil {
			return fmt.Errorf("clear counters: %w", err)
		}
		n++
	}
	if filter != nil && !found {
		return fmt.Errorf("sid %s not found in netns %s", *filter, s.nsName())
	}
	if filter != nil {
		fmt.Fprintf(w, "cleared counters of %s\n", *filter)
	} else {
		fmt.Fprintf(w, "cleared counters of %d local SID(s)\n", n)
	}
	return nil
}
