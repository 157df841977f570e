package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
)

func ruleFamily(f int) (int, error) {
	switch f {
	case 4:
		return unix.AF_INET, nil
	case 6:
		return unix.AF_INET6, nil
	}
	return 0, fmt.Errorf("rule family %d: want 4 or 6", f)
}

func ipNet(p netip.Prefix) *net.IPNet {
	if !p.IsValid() {
		return nil
	}
	p = p.Masked()
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func portRange(p nodestate.PortRange) *netlink.RulePortRange {
	if p.IsZero() {
		return nil
	}
	return netlink.NewRulePortRange(p.Bounds())
}

// NetlinkRule is r (family 4 or 6) as an rtnetlink rule stamped with
// protocol r.Protocol() and, when mark is not 0, narrowed to packets whose
// mark is mark (fwmark mark/0xffffffff): the rule of a table a tc program
// steers to by skb->mark (O-flag sampling, pools' instances).
func NetlinkRule(r nodestate.Rule, mark uint32) (*netlink.Rule, error) {
	fam, err := ruleFamily(r.Family)
	if err != nil {
		return nil, err
	}
	nr := netlink.NewRule()
	nr.Family = fam
	nr.Priority = r.Priority
	nr.Table = r.Table
	nr.Src = ipNet(r.Src)
	nr.Dst = ipNet(r.Dst)
	nr.IPProto = r.IPProto
	nr.Sport = portRange(r.Sport)
	nr.Dport = portRange(r.Dport)
	nr.IifName = r.Iif
	nr.Protocol = uint8(r.Protocol())
	if mark != 0 {
		m := ^uint32(0)
		nr.Mark, nr.Mask = mark, &m
	}
	return nr, nil
}

// AddRule adds a policy rule stamped with protocol r.Protocol()
// (nodestate.Proto unless r.Proto says otherwise). The kernel keeps two
// rules that differ only in protocol apart, so an older segchain's rule is
// renumbered by adding it anew and then deleting the old one.
func (h *Handle) AddRule(r nodestate.Rule) error {
	nr, err := NetlinkRule(r, 0)
	if err == nil {
		err = h.nh.RuleAdd(nr)
	}
	if err != nil {
		return fmt.Errorf("add rule %q in netns %q: %w", r, h.netns, err)
	}
	return nil
}

// DeleteRule removes the segchain rule matching every field of r,
// protocol r.Protocol() included.
func (h *Handle) DeleteRule(r nodestate.Rule) error {
	nr, err := NetlinkRule(r, 0)
	if err == nil {
		err = h.nh.RuleDel(nr)
	}
	if err != nil {
		return fmt.Errorf("delete rule %q in netns %q: %w", r, h.netns, err)
	}
	return nil
}

// Rules returns the IPv4 and IPv6 rules segchain's domain owns (protocol
// nodestate.Proto, or nodestate.ProtoLegacy with Rule.Proto set),
// decoded from a raw RTM_GETRULE dump (FRA_IP_PROTO is a u8 and
// FRA_PROTOCOL must be read exactly).
func (h *Handle) Rules() ([]nodestate.Rule, error) {
	var out []nodestate.Rule
	ne := nl.NativeEndian()
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		req := h.request(unix.RTM_GETRULE, unix.NLM_F_DUMP)
		req.AddData(&nl.RtMsg{RtMsg: unix.RtMsg{Family: uint8(fam)}})
		msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWRULE)
		if err != nil {
			return nil, fmt.Errorf("dump rules in netns %q: %w", h.netns, err)
		}
		for _, m := range msgs {
			if len(m) < unix.SizeofRtMsg {
				continue
			}
			msg := nl.DeserializeRtMsg(m) // struct fib_rule_hdr has the same layout
			attrs, err := nl.ParseRouteAttr(m[msg.Len():])
			if err != nil {
				return nil, fmt.Errorf("parse rule: %w", err)
			}
			r := nodestate.Rule{Family: 4, Table: int(msg.Table)}
			if msg.Family == unix.AF_INET6 {
				r.Family = 6
			}
			proto := -1
			for _, a := range attrs {
				v := a.Value
				switch a.Attr.Type & nlaTypeMask {
				case unix.FRA_PROTOCOL:
					if len(v) >= 1 {
						proto = int(v[0])
					}
				case unix.FRA_PRIORITY:
					if len(v) >= 4 {
						r.Priority = int(ne.Uint32(v))
					}
				case unix.FRA_TABLE:
					if len(v) >= 4 {
						r.Table = int(ne.Uint32(v))
					}
				case unix.FRA_SRC:
					if ad, ok := netip.AddrFromSlice(v); ok {
						r.Src = netip.PrefixFrom(ad, int(msg.Src_len))
					}
				case unix.FRA_DST:
					if ad, ok := netip.AddrFromSlice(v); ok {
						r.Dst = netip.PrefixFrom(ad, int(msg.Dst_len))
					}
				case unix.FRA_IP_PROTO:
					if len(v) >= 1 {
						r.IPProto = int(v[0])
					}
				case unix.FRA_SPORT_RANGE:
					if len(v) >= 4 {
						r.Sport = nodestate.PortRange{From: ne.Uint16(v), To: ne.Uint16(v[2:])}
					}
				case unix.FRA_DPORT_RANGE:
					if len(v) >= 4 {
						r.Dport = nodestate.PortRange{From: ne.Uint16(v), To: ne.Uint16(v[2:])}
					}
				case unix.FRA_IIFNAME:
					r.Iif = nl.BytesToString(v)
				}
			}
			if !nodestate.Owned(proto) {
				continue
			}
			if proto != nodestate.Proto {
				r.Proto = proto
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// AddMarkRule adds r narrowed to packets whose mark is mark (fwmark
// mark/0xffffffff), stamped with protocol r.Protocol(): the rule of a
// table a tc program steers to by skb->mark (O-flag sampling).
func (h *Handle) AddMarkRule(r nodestate.Rule, mark uint32) error {
	return h.markRule("add", h.nh.RuleAdd, r, mark)
}

// DeleteMarkRule removes the rule AddMarkRule added.
func (h *Handle) DeleteMarkRule(r nodestate.Rule, mark uint32) error {
	return h.markRule("delete", h.nh.RuleDel, r, mark)
}

// markRule applies op (RuleAdd, RuleDel) to r with fwmark mark/0xffffffff.
func (h *Handle) markRule(verb string, op func(*netlink.Rule) error, r nodestate.Rule, mark uint32) error {
	nr, err := NetlinkRule(r, mark)
	if err == nil {
		err = op(nr)
	}
	if err != nil {
		return fmt.Errorf("%s rule %q fwmark %#x in netns %q: %w", verb, r, mark, h.netns, err)
	}
	return nil
}

// DeleteProto deletes every IPv4 and IPv6 rule and route (any table) of
// rtnetlink protocol proto: the state of one owner that is not the
// domain's (O-flag sampling's tables).
func (h *Handle) DeleteProto(proto int) error {
	var errs []error
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rules, err := h.nh.RuleList(fam)
		if err != nil {
			return fmt.Errorf("list rules in netns %q: %w", h.netns, err)
		}
		for _, r := range rules {
			if int(r.Protocol) != proto {
				continue
			}
			r.Family = fam
			if err := h.nh.RuleDel(&r); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("delete rule %s in netns %q: %w", r, h.netns, err))
			}
		}
		raws, err := h.dumpRoutes(fam) // ours: vishvananda/netlink fails on an HMAC TLV
		if err != nil {
			return err
		}
		for _, raw := range raws {
			if raw.protocol != proto || raw.flags&unix.RTM_F_CLONED != 0 {
				continue
			}
			dst := raw.dst
			if !dst.IsValid() { // a default route carries no RTA_DST
				dst = netip.IPv6Unspecified()
				if fam == unix.AF_INET {
					dst = netip.IPv4Unspecified()
				}
			}
			r := nodestate.Route{Dst: netip.PrefixFrom(dst, raw.dstLen), Table: raw.table, Metric: raw.metric}
			if err := h.DeleteRouteAs(r, proto); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
