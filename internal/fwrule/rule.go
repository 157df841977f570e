package fwrule

import "net/netip"

// Family is the address family of the *original* packet a rule applies to:
// rules written for ip6tables match IPv6 originals, iptables rules IPv4.
type Family uint8

const (
	IPv6 Family = 6
	IPv4 Family = 4
)

// Prefix is an address match (-s, -d, --inner-src, --srh-psid ...). An IPv4
// prefix is only used in IPv4 rules for original-packet fields.
type Prefix struct {
	Prefix netip.Prefix
	Neg    bool
}

// Value8 matches one byte exactly (-p, --srh-next-hdr).
type Value8 struct {
	Value uint8
	Neg   bool
}

// Cmp is a comparison operator of the srh match (--srh-len-eq/gt/lt ...).
type Cmp uint8

const (
	Eq Cmp = iota
	Gt
	Lt
)

// Compare8 matches a byte against a value with eq/gt/lt.
type Compare8 struct {
	Op    Cmp
	Value uint8
	Neg   bool
}

// PortRange matches an inclusive port range (--sport 80, --dport 1000:2000).
type PortRange struct {
	Lo, Hi uint16
	Neg    bool
}

// ICMP matches an ICMP/ICMPv6 type and a code or a range of codes
// (--icmpv6-type 1/4, --icmp-type 3/0:5, --icmp-type echo-request).
// AnyCode: the code is not compared. CodeHi > Code: codes Code..CodeHi.
// AnyType: every ICMP packet (iptables' IPv4 --icmp-type any, type 255).
type ICMP struct {
	Type    uint8
	Code    uint8
	CodeHi  uint8
	AnyCode bool
	AnyType bool
	Neg     bool
}

// Range is what the match covers as TYPE<<8|CODE, both ends included: the
// one definition of the ICMP match shared by the reference classifier and
// the data path's range tables.
func (ic ICMP) Range() (lo, hi uint16) {
	switch {
	case ic.AnyType:
		return 0, 0xffff
	case ic.AnyCode:
		return uint16(ic.Type) << 8, uint16(ic.Type)<<8 | 0xff
	}
	lo = uint16(ic.Type)<<8 | uint16(ic.Code)
	return lo, lo + uint16(max(ic.CodeHi, ic.Code)-ic.Code)
}

// TargetKind is what a matching rule does.
type TargetKind uint8

const (
	Accept   TargetKind = iota // -j ACCEPT; on an SRv6 packet = go-next (End)
	Drop                       // -j DROP
	Reject                     // -j REJECT (ICMP error to the source, then drop)
	SkipNext                   // -j SEG6 --seg6-action skip-next
	GoLast                     // -j SEG6 --seg6-action go-last
	EvalArgs                   // -j SEG6 --seg6-action eval-args
	GoNext                     // -j SEG6 --seg6-action go-next (same effect as Accept)
)

// Rule is one firewall rule. nil fields are wildcards.
//
// A rule with SRH set (it had `-m srh`) is an *advanced* rule: Src/Dst then
// match the outer IPv6 header as received and the SRH fields apply; such a
// rule never matches a packet without an SRH. A rule without SRH is a
// *basic* (legacy) rule: Src/Dst match the original packet (see Packet).
// Proto, ports and ICMP always match the original packet's transport header.
type Rule struct {
	Family Family

	Src, Dst *Prefix
	Proto    *Value8
	SPort    *PortRange
	DPort    *PortRange
	ICMP     *ICMP

	SRH       bool      // -m srh present: advanced rule
	InnerSrc  *Prefix   // --inner-src: the original source
	InnerDst  *Prefix   // --inner-dst: the original destination
	NextHdr   *Value8   // --srh-next-hdr
	HdrLen    *Compare8 // --srh-len-eq|gt|lt
	SegsLeft  *Compare8 // --srh-segs-eq|gt|lt
	LastEntry *Compare8 // --srh-last-eq|gt|lt
	Tag       *Tag      // --srh-tag
	PSID      *Prefix   // --srh-psid: Segment List[SL+1]
	NSID      *Prefix   // --srh-nsid: Segment List[SL-1]
	LSID      *Prefix   // --srh-lsid: Segment List[0]

	// Comment is the text of `-m comment --comment X`; no semantics.
	Comment string

	Target Target
}

// Tag matches the 16-bit SRH tag.
type Tag struct {
	Value uint16
	Neg   bool
}

// Target is the rule's action.
type Target struct {
	Kind TargetKind
	// RejectWith is the ICMP error of a REJECT, iptables spelling
	// (icmp6-port-unreachable by default for IPv6, icmp-port-unreachable
	// for IPv4).
	RejectWith string
}

// Packet is what the classifier sees of one packet, extracted once per
// packet (the research's SR pre-processor ran once per rule; this runs once).
//
// Original packet: encap mode (SRH next header 41 or 4) — the inner IPv6 or
// IPv4 header and its transport header; insert mode (any other SRH next
// header) — the IPv6 source, Segment List[0] as destination and the
// transport header after the SRH; no SRH — the packet itself.
type Packet struct {
	Family           Family     // of the original packet
	OrigSrc, OrigDst netip.Addr // the original packet's addresses
	Proto            uint8      // the original packet's upper-layer protocol
	HasPorts         bool       // TCP/UDP/SCTP/UDPLite with ports present (not a non-first fragment)
	SPort, DPort     uint16
	HasICMP          bool // ICMP (IPv4 original) or ICMPv6 (IPv6 original) with type/code present
	ICMPType         uint8
	ICMPCode         uint8

	HasSRH             bool
	OuterSrc, OuterDst netip.Addr // the IPv6 header as received
	NextHdr            uint8      // SRH fields, valid when HasSRH
	HdrLen             uint8
	SegsLeft           uint8
	LastEntry          uint8
	Tag                uint16
	PSID, NSID, LSID   netip.Addr // invalid (zero) when that segment does not exist
}
