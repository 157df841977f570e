package fwrule

import "net/netip"

// Matches reports whether rule r matches packet p. This is the reference
// semantics the eBPF data path is tested against.
//
//   - Basic rule (no -m srh): the rule's family must be the original
//     packet's; -s/-d match the original source/destination.
//   - Advanced rule (-m srh): never matches a packet without an SRH; -s/-d
//     match the outer IPv6 header as received; --inner-src/--inner-dst match
//     the original addresses and only match an original of the prefix's
//     family (even negated); the rule family is not compared, so an
//     advanced rule also applies to encapsulated IPv4.
//   - -p, ports and ICMP always match the original's upper-layer header. A
//     port match (negated or not) never matches a packet without ports (a
//     non-first fragment), as iptables' tcp/udp matches; an ICMP match needs
//     ICMPv6 in an IPv6 original (ICMP in an IPv4 original).
//   - --srh-psid/--srh-nsid never match when that segment does not exist
//     (SL = Last Entry for psid, SL = 0 for nsid), negated or not — as the
//     kernel's ip6t_srh (srh1_mt6 returns false before comparing).
//   - Every other negation is the plain complement of the positive match.
func Matches(r Rule, p Packet) bool {
	if r.SRH {
		if !p.HasSRH {
			return false
		}
		if !matchAddr(r.Src, p.OuterSrc) || !matchAddr(r.Dst, p.OuterDst) {
			return false
		}
		if !matchInner(r.InnerSrc, p.OrigSrc) || !matchInner(r.InnerDst, p.OrigDst) {
			return false
		}
		if !matchValue(r.NextHdr, p.NextHdr) ||
			!matchCompare(r.HdrLen, p.HdrLen) ||
			!matchCompare(r.SegsLeft, p.SegsLeft) ||
			!matchCompare(r.LastEntry, p.LastEntry) {
			return false
		}
		if r.Tag != nil && (p.Tag == r.Tag.Value) == r.Tag.Neg {
			return false
		}
		if !matchSID(r.PSID, p.PSID) || !matchSID(r.NSID, p.NSID) || !matchSID(r.LSID, p.LSID) {
			return false
		}
	} else {
		if r.Family != p.Family {
			return false
		}
		if !matchAddr(r.Src, p.OrigSrc) || !matchAddr(r.Dst, p.OrigDst) {
			return false
		}
	}
	if !matchValue(r.Proto, p.Proto) {
		return false
	}
	if r.SPort != nil || r.DPort != nil {
		if !p.HasPorts || !matchPorts(r.SPort, p.SPort) || !matchPorts(r.DPort, p.DPort) {
			return false
		}
	}
	if r.ICMP != nil {
		want := uint8(ProtoICMPv6)
		if r.Family == IPv4 {
			want = ProtoICMP
		}
		if !p.HasICMP || p.Proto != want || p.Family != r.Family {
			return false
		}
		lo, hi := r.ICMP.Range()
		v := uint16(p.ICMPType)<<8 | uint16(p.ICMPCode)
		m := v >= lo && v <= hi
		if m == r.ICMP.Neg {
			return false
		}
	}
	return true
}

// Classify returns the index of the first rule that matches p (first match
// wins, as in an iptables chain); ok is false when none does and the
// instance's policy applies.
func Classify(rules []Rule, p Packet) (int, bool) {
	for i, r := range rules {
		if Matches(r, p) {
			return i, true
		}
	}
	return -1, false
}

func matchAddr(m *Prefix, a netip.Addr) bool {
	if m == nil {
		return true
	}
	return m.Prefix.Contains(a) != m.Neg
}

func matchInner(m *Prefix, a netip.Addr) bool {
	if m == nil {
		return true
	}
	if !a.IsValid() || a.Is4() != m.Prefix.Addr().Is4() {
		return false
	}
	return m.Prefix.Contains(a) != m.Neg
}

func matchSID(m *Prefix, a netip.Addr) bool {
	if m == nil {
		return true
	}
	if !a.IsValid() {
		return false
	}
	return m.Prefix.Contains(a) != m.Neg
}

func matchValue(m *Value8, v uint8) bool {
	if m == nil {
		return true
	}
	return (m.Value == v) != m.Neg
}

func matchCompare(m *Compare8, v uint8) bool {
	if m == nil {
		return true
	}
	var ok bool
	switch m.Op {
	case Eq:
		ok = v == m.Value
	case Gt:
		ok = v > m.Value
	case Lt:
		ok = v < m.Value
	}
	return ok != m.Neg
}

func matchPorts(m *PortRange, v uint16) bool {
	if m == nil {
		return true
	}
	return (v >= m.Lo && v <= m.Hi) != m.Neg
}
