package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
)

// Selection at ingress (docs/pools.md "The data path"): pool_in marks a
// chain's plain packet with the chosen instance, Mark(table, k); a rule
// "<the chain's selectors> fwmark Mark(table, k) lookup Mark(table, k)"
// one priority before the chain's own sends it to a table holding the
// chain's route with that instance's complete SID list.
const (
	// MarkBase is the top byte of every mark pool_in and pool_local set
	// (pool_out lets such packets pass; the local tables' rule skips them). The probes' mark (ProbeMark) is not one.
	MarkBase = 0x29000000
	// MarkBypass is k for the table without the pool's segment.
	MarkBypass = 8
	// MarkPass is k of the mark pool_local sets on a local packet of the
	// chain it does not choose for (a probe): a rule sends it back to the
	// chain's own table.
	MarkPass = 9
	// MarkLocal is k of the table the chain's locally originated packets
	// are sent to (its route runs pool_local, lwt xmit).
	MarkLocal = 10
	// RouteProto stamps the per-instance tables' routes and their rules:
	// neither the domain's (nodestate.Proto) nor another kind's, so that
	// observation never takes them for drift (this package owns them).
	RouteProto = 0xcc // 204
	// MaxRules is the classifier's size (bpf/pool_tc.bpf.c POOL_RULES_MAX).
	MaxRules = 32
	ruleNone = 0xffffffff
)

// Mark is the mark (and table number) of chain table's instance k.
func Mark(table, k int) uint32 { return MarkBase | uint32(table)<<4 | uint32(k) }

// selEntry is one classifier entry before it is written.
type selEntry struct {
	rule   nodestate.Rule
	pool   uint32
	bypass bool
}

// entries are specs' chain rules and shadows in the kernel's rule order
// (priority, then table).
func entries(specs []pool.Spec) ([]selEntry, error) {
	seen := map[int]bool{}
	var out []selEntry
	for id, sp := range specs {
		for _, c := range sp.Chains {
			if !seen[c.Rule.Table] {
				seen[c.Rule.Table] = true
				out = append(out, selEntry{rule: c.Rule, pool: uint32(id), bypass: c.Bypass != nil})
			}
		}
	}
	for _, sp := range specs {
		for _, r := range sp.Shadows {
			if !seen[r.Table] {
				seen[r.Table] = true
				out = append(out, selEntry{rule: r, pool: ruleNone})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].rule.Priority != out[j].rule.Priority {
			return out[i].rule.Priority < out[j].rule.Priority
		}
		return out[i].rule.Table < out[j].rule.Table
	})
	if len(out) > MaxRules {
		return nil, fmt.Errorf("pool selector: %d chain rules decide pools' packets at this headend (at most %d)", len(out), MaxRules)
	}
	return out, nil
}

// words are a prefix's address and mask as the program compares them:
// two 64-bit words of the bytes in network order (IPv4: the first four).
func words(p netip.Prefix) (addr, mask [2]uint64) {
	if !p.IsValid() {
		return
	}
	var a, m [16]byte
	if p.Addr().Is4() {
		b := p.Masked().Addr().As4()
		copy(a[:], b[:])
		copy(m[:4], net.CIDRMask(p.Bits(), 32))
	} else {
		a = p.Masked().Addr().As16()
		copy(m[:], net.CIDRMask(p.Bits(), 128))
	}
	for i := range 2 {
		addr[i] = binary.LittleEndian.Uint64(a[8*i:])
		mask[i] = binary.LittleEndian.Uint64(m[8*i:])
	}
	return
}

func bpfRule(e selEntry, ifindex func(string) uint32) poolTCPoolRule {
	r := poolTCPoolRule{Family: uint32(e.rule.Family), Proto: uint32(e.rule.IPProto), Pool: e.pool}
	r.SportLo, r.SportHi = e.rule.Sport.Bounds()
	r.DportLo, r.DportHi = e.rule.Dport.Bounds()
	r.Src, r.SrcMask = words(e.rule.Src)
	r.Dst, r.DstMask = words(e.rule.Dst)
	if e.rule.Iif != "" {
		r.Ifindex = ifindex(e.rule.Iif)
	}
	if e.pool != ruleNone {
		r.Mark = Mark(e.rule.Table, 0)
		if !e.bypass {
			r.Flags |= uint32(poolTCPoolRuleFlagsPOOL_RULE_NOBYPASS)
		}
	}
	return r
}

// ProgramRules writes the classifier: entries first, then their count
// (a reader never sees a count beyond what is written).
func (h *Headend) ProgramRules(specs []pool.Spec) error {
	es, err := entries(specs)
	if err != nil {
		return err
	}
	idx := map[string]uint32{}
	if err := nsutil.Do(h.netns, func() error {
		l, err := net.Interfaces()
		for _, i := range l {
			idx[i.Name] = uint32(i.Index)
		}
		return err
	}); err != nil {
		return fmt.Errorf("pool selector: interfaces: %w", err)
	}
	ifindex := func(name string) uint32 {
		if i, ok := idx[name]; ok {
			return i
		}
		return ^uint32(0) // a rule naming a missing device matches nothing
	}
	var set poolTCPoolRuleset
	for i, e := range es {
		set.R[i] = bpfRule(e, ifindex)
	}
	set.N = uint32(len(es))
	// Double-buffered: write the set not in use, then switch to it.
	var cur uint32
	_ = h.objs.PoolRsel.Lookup(uint32(0), &cur)
	next := (cur + 1) & 1
	if err := h.objs.PoolRules.Put(next, &set); err != nil {
		return fmt.Errorf("pool selector: write rules: %w", err)
	}
	if err := h.objs.PoolRsel.Put(uint32(0), next); err != nil {
		return fmt.Errorf("pool selector: switch rules: %w", err)
	}
	return nil
}

// localRoute is a chain's table for its locally originated packets: the
// chain's destination by its route's device and gateway, through
// pool_local (lwt xmit), which marks the packet and has it routed again.
type localRoute struct {
	route    nodestate.Route // Table MarkLocal's; Seg6 nil
	headroom int             // the longest of the chain's encaps: the MTU the host's sockets see, as the chain's route gave them
}

// kernelState is what the selection by mark needs of the kernel: per
// chain and instance (and bypass) a table with the chain's route and a
// rule into it; and for a chain whose rule can match the headend's own
// packets (no iif, or iif lo), their path (LocalRules).
func kernelState(specs []pool.Spec) (routes []nodestate.Route, rules []netlink.Rule, locals []localRoute) {
	for _, sp := range specs {
		for _, c := range sp.Chains {
			local := c.Rule.Iif == "" || c.Rule.Iif == "lo"
			head := 0
			if c.Route.Seg6 != nil {
				head = c.Route.Seg6.Overhead()
			}
			add := func(k int, enc nodestate.Seg6Encap) {
				m := Mark(c.Rule.Table, k)
				r := c.Route
				r.Table, r.Owner, r.Seg6 = int(m), "pool "+sp.Pool.Name, &enc
				routes = append(routes, r)
				rules = append(rules, markRule(c.Rule, m))
				if local {
					rules = append(rules, localMarkRule(c.Rule, m, int(m)))
				}
				head = max(head, enc.Overhead())
			}
			for k, enc := range c.Instances {
				add(k, enc)
			}
			if c.Bypass != nil {
				add(MarkBypass, *c.Bypass)
			}
			if !local {
				continue
			}
			rules = append(rules, localMarkRule(c.Rule, Mark(c.Rule.Table, MarkPass), c.Rule.Table), localRule(c.Rule))
			r := c.Route
			r.Table, r.Owner, r.Seg6 = int(Mark(c.Rule.Table, MarkLocal)), "pool "+sp.Pool.Name, nil
			locals = append(locals, localRoute{route: r, headroom: head})
		}
	}
	return routes, rules, locals
}

// localRule sends the chain's locally originated packets (iif lo) that
// carry no pool mark into its local table, one priority before the
// chain's own rule. The mask keeps pool_local's rerouted packets out.
func localRule(cr nodestate.Rule) netlink.Rule {
	r := cr
	r.Priority, r.Table, r.Proto, r.Iif = cr.Priority-1, int(Mark(cr.Table, MarkLocal)), RouteProto, "lo"
	nr := poolRule(r, 0)
	mask := uint32(0xff000000)
	nr.Mark, nr.Mask = 0, &mask
	return nr
}

// localMarkRule sends a local packet pool_local marked m into table: no
// selectors besides iif lo and the mark, because the kernel routes it
// again without its ports (bpf_lwt_xmit_reroute), and the mark alone
// names the chain and the instance.
func localMarkRule(cr nodestate.Rule, m uint32, table int) netlink.Rule {
	return poolRule(nodestate.Rule{Family: cr.Family, Priority: cr.Priority - 1, Table: table, Proto: RouteProto, Iif: "lo"}, m)
}

// markRule is the chain's rule narrowed to mark m, one priority before
// the chain's own, into table m.
func markRule(cr nodestate.Rule, m uint32) netlink.Rule {
	r := cr
	r.Priority, r.Table, r.Proto = cr.Priority-1, int(m), RouteProto
	return poolRule(r, m)
}

// poolRule is r with mark m as netlink sends it, its family IPv6 unless
// it is IPv4 (a chain's rule may leave it unset).
func poolRule(r nodestate.Rule, m uint32) netlink.Rule {
	if r.Family != 4 {
		r.Family = 6
	}
	nr, _ := dataplane.NetlinkRule(r, m) // the family is 4 or 6: no error
	return *nr
}

func ruleKey(r netlink.Rule) string {
	var mask uint32
	if r.Mask != nil {
		mask = *r.Mask
	}
	return fmt.Sprintf("%d/%d/%d/%d/%#x/%v/%v/%d/%v/%v/%s", r.Family, r.Priority, r.Table, r.Mark, mask, r.Src, r.Dst, r.IPProto, r.Sport, r.Dport, r.IifName)
}

// syncKernel makes netns's per-instance tables and rules what specs want:
// new ones added, stale ones (of pools or chains gone) removed. The
// routes first, so that a new rule never points into an empty table.
// local is pool_local, the program of the local tables' routes (nil only
// when specs want none).
func syncKernel(netns string, specs []pool.Spec, local *ebpf.Program) error {
	routes, rules, locals := kernelState(specs)
	if len(locals) > 0 && local == nil {
		return fmt.Errorf("pool selector: the local tables need pool_local")
	}
	dp, err := dataplane.Open(netns)
	if err != nil {
		return err
	}
	defer dp.Close()
	var errs []error
	want := map[string]bool{}
	for _, r := range routes {
		want[fmt.Sprintf("%d/%s", r.Table, r.Dst)] = true
		if err := dp.ReplaceRouteAs(r, RouteProto); err != nil {
			errs = append(errs, fmt.Errorf("pool selector: %w", err))
		}
	}
	err = nsutil.Do(netns, func() error {
		nh, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer nh.Close()
		for _, l := range locals {
			want[fmt.Sprintf("%d/%s", l.route.Table, l.route.Dst)] = true
			if err := replaceLocal(nh, l, local); err != nil {
				errs = append(errs, err)
			}
		}
		wantRule := map[string]bool{}
		for _, r := range rules {
			wantRule[ruleKey(r)] = true
		}
		have := map[string]bool{}
		for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
			l, err := nh.RuleList(fam)
			if err != nil {
				return fmt.Errorf("pool selector: list rules: %w", err)
			}
			for _, r := range l {
				if r.Protocol != RouteProto {
					continue
				}
				r.Family = fam
				k := ruleKey(r)
				if wantRule[k] && !have[k] {
					have[k] = true
					continue
				}
				if err := nh.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) {
					errs = append(errs, fmt.Errorf("pool selector: delete rule %s: %w", k, err))
				}
			}
		}
		for _, r := range rules {
			if have[ruleKey(r)] {
				continue
			}
			if err := nh.RuleAdd(&r); err != nil && !errors.Is(err, unix.EEXIST) {
				errs = append(errs, fmt.Errorf("pool selector: add rule %s: %w", ruleKey(r), err))
			}
		}
		for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
			l, err := nh.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC, Protocol: RouteProto},
				netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
			if err != nil {
				return fmt.Errorf("pool selector: list routes: %w", err)
			}
			for _, r := range l {
				dst := "::/0"
				if fam == unix.AF_INET {
					dst = "0.0.0.0/0"
				}
				if r.Dst != nil {
					dst = netip.MustParsePrefix(r.Dst.String()).String()
				}
				if want[fmt.Sprintf("%d/%s", r.Table, dst)] {
					continue
				}
				if err := nh.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
					errs = append(errs, fmt.Errorf("pool selector: delete route %s table %d: %w", r.Dst, r.Table, err))
				}
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// replaceLocal installs a chain's local table: its destination through
// pool_local (lwt xmit, headroom the chain's longest encap) by the
// chain's route's device and gateway, protocol RouteProto.
func replaceLocal(nh *netlink.Handle, l localRoute, prog *ebpf.Program) error {
	r := l.route
	nr := &netlink.Route{Dst: &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), r.Dst.Addr().BitLen())},
		Table: r.Table, Protocol: RouteProto, Family: unix.AF_INET6}
	if r.Dst.Addr().Is4() {
		nr.Family = unix.AF_INET
	}
	if r.Dev != "" {
		lk, err := nh.LinkByName(r.Dev)
		if err != nil {
			return fmt.Errorf("pool selector: local table %d: device %s: %w", r.Table, r.Dev, err)
		}
		nr.LinkIndex = lk.Attrs().Index
	}
	if r.Via.IsValid() {
		nr.Gw = r.Via.AsSlice()
	}
	enc := &netlink.BpfEncap{}
	if err := enc.SetProg(nl.LWT_BPF_XMIT, prog.FD(), "pool_local"); err != nil {
		return fmt.Errorf("pool selector: local table %d: %w", r.Table, err)
	}
	if err := enc.SetXmitHeadroom(l.headroom); err != nil {
		return fmt.Errorf("pool selector: local table %d: %w", r.Table, err)
	}
	nr.Encap = enc
	if err := nh.RouteReplace(nr); err != nil {
		return fmt.Errorf("pool selector: local table %d: route %s through pool_local: %w", r.Table, r.Dst, err)
	}
	return nil
}

// missingRules counts the rules specs want that netns lacks.
func missingRules(netns string, specs []pool.Spec) (int, error) {
	_, rules, _ := kernelState(specs)
	if len(rules) == 0 {
		return 0, nil
	}
	have := map[string]bool{}
	err := nsutil.Do(netns, func() error {
		nh, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer nh.Close()
		for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
			l, err := nh.RuleList(fam)
			if err != nil {
				return fmt.Errorf("pool selector: list rules: %w", err)
			}
			for _, r := range l {
				if r.Protocol == RouteProto {
					r.Family = fam
					have[ruleKey(r)] = true
				}
			}
		}
		return nil
	})
	n := 0
	for _, r := range rules {
		if !have[ruleKey(r)] {
			n++
		}
	}
	return n, err
}

// missingLocalRoutes counts the local tables specs want whose route
// (through pool_local) netns lacks.
func missingLocalRoutes(netns string, specs []pool.Spec) (int, error) {
	_, _, locals := kernelState(specs)
	n := 0
	err := nsutil.Do(netns, func() error {
		nh, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return err
		}
		defer nh.Close()
		for _, l := range locals {
			fam := unix.AF_INET6
			if l.route.Dst.Addr().Is4() {
				fam = unix.AF_INET
			}
			rs, err := nh.RouteListFiltered(fam, &netlink.Route{Table: l.route.Table, Protocol: RouteProto},
				netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
			if err != nil {
				return fmt.Errorf("pool selector: list table %d: %w", l.route.Table, err)
			}
			if len(rs) == 0 {
				n++
			}
		}
		return nil
	})
	return n, err
}
