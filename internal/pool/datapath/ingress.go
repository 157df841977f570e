package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"

	"github.com/vishvananda/netlink"
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
	// MarkBase is the top byte of every mark pool_in sets (pool_out lets
	// such packets pass). The probes' mark (ProbeMark) is not one.
	MarkBase = 0x29000000
	// MarkBypass is k for the table without the pool's segment.
	MarkBypass = 8
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

// kernelState is what the selection by mark needs of the kernel: per
// chain and instance (and bypass) a table with the chain's route and a
// rule into it.
func kernelState(specs []pool.Spec) (routes []nodestate.Route, rules []netlink.Rule) {
	for _, sp := range specs {
		for _, c := range sp.Chains {
			add := func(k int, enc nodestate.Seg6Encap) {
				m := Mark(c.Rule.Table, k)
				r := c.Route
				r.Table, r.Owner, r.Seg6 = int(m), "pool "+sp.Pool.Name, &enc
				routes = append(routes, r)
				rules = append(rules, markRule(c.Rule, m))
			}
			for k, enc := range c.Instances {
				add(k, enc)
			}
			if c.Bypass != nil {
				add(MarkBypass, *c.Bypass)
			}
		}
	}
	return routes, rules
}

// markRule is the chain's rule narrowed to mark m, one priority before
// the chain's own, into table m.
func markRule(cr nodestate.Rule, m uint32) netlink.Rule {
	r := cr
	r.Priority, r.Table, r.Proto = cr.Priority-1, int(m), RouteProto
	if r.Family != 4 {
		r.Family = 6
	}
	nr, _ := dataplane.NetlinkRule(r, m) // the family is 4 or 6: no error
	return *nr
}

func ruleKey(r netlink.Rule) string {
	return fmt.Sprintf("%d/%d/%d/%d/%v/%v/%d/%v/%v/%s", r.Family, r.Priority, r.Table, r.Mark, r.Src, r.Dst, r.IPProto, r.Sport, r.Dport, r.IifName)
}

// syncKernel makes netns's per-instance tables and rules what specs want:
// new ones added, stale ones (of pools or chains gone) removed. The
// routes first, so that a new rule never points into an empty table.
func syncKernel(netns string, specs []pool.Spec) error {
	routes, rules := kernelState(specs)
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

// missingRules counts the rules specs want that netns lacks.
func missingRules(netns string, specs []pool.Spec) (int, error) {
	_, rules := kernelState(specs)
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
