package ids

import (
	"fmt"
	"net/netip"
	"regexp"
)

// Action is what a rule does when it matches.
type Action uint8

const (
	ActionAlert Action = iota // log an alert; the packet passes
	ActionDrop                // IPS: drop the packet and log; IDS: alert only
	ActionPass                // stop inspecting: no alert, the packet passes
)

func (a Action) String() string {
	switch a {
	case ActionAlert:
		return "alert"
	case ActionDrop:
		return "drop"
	case ActionPass:
		return "pass"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Proto is the protocol field of a rule header.
type Proto uint8

const (
	ProtoIP     Proto = iota // any IP packet (Suricata "ip")
	ProtoIPv4                // IPv4 only ("ipv4", "ip4")
	ProtoIPv6                // IPv6 only ("ipv6", "ip6")
	ProtoTCP                 // TCP over IPv4 or IPv6
	ProtoUDP                 // UDP over IPv4 or IPv6
	ProtoICMP                // ICMP or ICMPv6 ("icmp")
	ProtoICMPv4              // ICMP over IPv4 only ("icmpv4")
	ProtoICMPv6              // ICMPv6 only ("icmpv6")
)

var protoNames = map[string]Proto{
	"ip": ProtoIP, "pkthdr": ProtoIP,
	"ipv4": ProtoIPv4, "ip4": ProtoIPv4,
	"ipv6": ProtoIPv6, "ip6": ProtoIPv6,
	"tcp": ProtoTCP, "udp": ProtoUDP,
	"icmp": ProtoICMP, "icmpv4": ProtoICMPv4, "icmpv6": ProtoICMPv6,
}

func (p Proto) String() string {
	for n, v := range protoNames {
		if v == p && n != "pkthdr" && n != "ip4" && n != "ip6" {
			return n
		}
	}
	return fmt.Sprintf("proto(%d)", uint8(p))
}

// hasPorts reports whether packets of p carry ports.
func (p Proto) hasPorts() bool { return p == ProtoTCP || p == ProtoUDP }

// Content is one content match of a rule, with its modifiers, or a pcre
// (Regex set, Pattern nil).
type Content struct {
	Pattern []byte
	Regex   *regexp.Regexp // pcre: matched in the same place of the sequence
	Negated bool           // content:!"..."
	NoCase  bool

	// Offset and Depth bound an absolute match: the pattern starts at
	// Offset or later and ends at Offset+Depth or earlier (Depth 0: no
	// bound). Distance and Within bound a match relative to the end of
	// the previous content's match; Relative says one of them was given.
	Offset, Depth    int
	Distance, Within int
	HasDepth         bool
	HasWithin        bool
	Relative         bool
	EndsWith         bool // endswith: the match ends at the end of the payload
	FastPattern      bool // fast_pattern given explicitly

	// anchored: the pcre only matches at the start of its search ("^"),
	// so a failed relative successor has no later match to retry with.
	anchored bool
	// retry finds, in group 1, the pcre's leftmost match that starts after
	// the first byte of the text (see parsePCRE).
	retry *regexp.Regexp
}

// Rule is one parsed rule.
type Rule struct {
	Action  Action
	Proto   Proto
	Src     AddrSet
	SrcPort PortSet
	Dst     AddrSet
	DstPort PortSet
	Bidir   bool // "<>": the header also matches with source and destination swapped

	Msg       string
	SID       uint32
	GID       uint32
	Rev       uint32
	Priority  int // 1 (high) .. 255; 3 when not given
	Classtype string
	Contents  []Content

	// Dsize compares the payload length; IType and ICode the ICMP/ICMPv6
	// type and code (a rule with them matches only ICMP packets).
	Dsize, IType, ICode *UintCond

	SR SRMatch

	// Text is the rule as written (continuation lines joined); File and
	// Line locate its first line.
	Text string
	File string
	Line int
}

// SRMatch holds the srv6.* conditions of a rule; zero fields are absent.
type SRMatch struct {
	Segment  *PrefixCond // srv6.segment: any segment of the list
	Active   *PrefixCond // srv6.active: Segments[SL]
	Last     *PrefixCond // srv6.last: Segments[0], the final segment
	OuterSrc *PrefixCond // srv6.src: outer IPv6 source address
	SL       *UintCond   // srv6.sl: Segments Left
	Args     *UintCond   // srv6.args: ARGS of the active SID
	NumSegs  *UintCond   // srv6.segments: number of segments
	Tag      *UintCond   // srv6.tag: the SRH's Tag
	Present  *bool       // srv6.present / srv6.absent: packet has an SRH
}

func (m *SRMatch) any() bool {
	return m.Segment != nil || m.Active != nil || m.Last != nil || m.OuterSrc != nil ||
		m.SL != nil || m.Args != nil || m.NumSegs != nil || m.Tag != nil || m.Present != nil
}

// PrefixCond matches an address against a set of prefixes, possibly
// negated ("!" before the value).
type PrefixCond struct {
	Prefixes []netip.Prefix
	Negated  bool
}

func (c *PrefixCond) contains(a netip.Addr) bool {
	for _, p := range c.Prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// UintCond is a Suricata integer comparison: N, =N, !N, !=N, <N, <=N,
// >N, >=N, N-M (exclusive), !N-M, &MASK=V, &MASK!=V.
type UintCond struct {
	Op     uintOp
	A, B   uint64
	Negate bool
}

type uintOp uint8

const (
	opEq uintOp = iota
	opLt
	opLe
	opGt
	opGe
	opRange // A < v < B
	opMask  // v&A == B
)

func (c *UintCond) match(v uint64) bool {
	var r bool
	switch c.Op {
	case opEq:
		r = v == c.A
	case opLt:
		r = v < c.A
	case opLe:
		r = v <= c.A
	case opGt:
		r = v > c.A
	case opGe:
		r = v >= c.A
	case opRange:
		r = v > c.A && v < c.B
	case opMask:
		r = v&c.A == c.B
	}
	return r != c.Negate
}
