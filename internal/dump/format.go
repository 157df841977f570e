package dump

import (
	"errors"
	"net/netip"
	"strconv"
	"time"

	"github.com/segchain/segchain/internal/srh"
)

// Format selects the output.
type Format int

// Output formats.
const (
	FormatLine Format = iota // one line per packet
	FormatTree               // -v: detailed tree
	FormatJSON               // one JSON object per line
)

// Printer renders Records. It appends to a caller-owned buffer so the hot
// path does not allocate.
type Printer struct {
	Format   Format
	Resolver SIDResolver // may be nil
}

// Append appends r's rendering (ending in a newline) to b.
func (p *Printer) Append(b []byte, r *Record) []byte {
	switch p.Format {
	case FormatJSON:
		return p.appendJSON(b, r)
	case FormatTree:
		return p.appendTree(b, r)
	}
	return p.appendLine(b, r)
}

func appendClock(b []byte, t time.Time) []byte {
	t = t.UTC()
	h, m, s := t.Clock()
	b = append2(b, h)
	b = append(b, ':')
	b = append2(b, m)
	b = append(b, ':')
	b = append2(b, s)
	b = append(b, '.')
	us := t.Nanosecond() / 1000
	for d := 100000; d > 0; d /= 10 {
		b = append(b, byte('0'+us/d%10))
	}
	return b
}

func append2(b []byte, v int) []byte { return append(b, byte('0'+v/10%10), byte('0'+v%10)) }

func appendU(b []byte, v uint64) []byte { return strconv.AppendUint(b, v, 10) }

const hexdig = "0123456789abcdef"

// appendHexN appends v as 0x followed by n hex digits.
func appendHexN(b []byte, v uint64, n int) []byte {
	b = append(b, '0', 'x')
	for i := n - 1; i >= 0; i-- {
		b = append(b, hexdig[v>>(4*uint(i))&0xf])
	}
	return b
}

func appendHexBytes(b []byte, v []byte) []byte {
	for _, c := range v {
		b = append(b, hexdig[c>>4], hexdig[c&0xf])
	}
	return b
}

func appendMAC(b []byte, m [6]byte) []byte {
	for i, c := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hexdig[c>>4], hexdig[c&0xf])
	}
	return b
}

func appendProto(b []byte, p uint8) []byte {
	if n := protoName(p); n != "" {
		return append(b, n...)
	}
	b = append(b, "proto "...)
	return appendU(b, uint64(p))
}

var tcpFlagChars = [8]struct {
	bit uint8
	c   byte
}{{0x02, 'S'}, {0x01, 'F'}, {0x04, 'R'}, {0x08, 'P'}, {0x20, 'U'}, {0x40, 'E'}, {0x80, 'W'}, {0x10, '.'}}

func appendTCPFlags(b []byte, f uint8) []byte {
	for _, x := range tcpFlagChars {
		if f&x.bit != 0 {
			b = append(b, x.c)
		}
	}
	if f == 0 {
		b = append(b, "none"...)
	}
	return b
}

var icmp6Names = map[uint8]string{1: "unreachable", 2: "packet-too-big", 3: "time-exceeded", 4: "parameter-problem",
	128: "echo-request", 129: "echo-reply", 133: "router-solicitation", 134: "router-advertisement",
	135: "neighbor-solicitation", 136: "neighbor-advertisement", 137: "redirect"}
var icmp4Names = map[uint8]string{0: "echo-reply", 3: "unreachable", 8: "echo-request", 11: "time-exceeded"}

func icmpName(proto, typ uint8) string {
	if proto == srh.ProtoICMPv6 {
		return icmp6Names[typ]
	}
	return icmp4Names[typ]
}

// segState is the processing state of segment list index i.
func segState(s *srh.SRH, i int) string {
	switch {
	case i > int(s.SegmentsLeft):
		return "visited"
	case i == int(s.SegmentsLeft):
		return "active"
	}
	return "remaining"
}

func (p *Printer) lookup(a netip.Addr) (SIDInfo, bool) {
	if p.Resolver == nil {
		return SIDInfo{}, false
	}
	return p.Resolver.Lookup(a)
}

// ---- one line ----

func (p *Printer) appendLine(b []byte, r *Record) []byte {
	b = appendClock(b, r.Time)
	b = append(b, ' ')
	if !r.IPv6 {
		if r.EtherType == etherIPv4 {
			b = append(b, "ipv4 "...)
			b = appendInnerL3L4(b, &r.Inner)
		} else if r.Err != nil {
			b = append(b, "malformed: "...)
			b = append(b, r.Err.Error()...)
		} else {
			b = append(b, "ethertype "...)
			b = appendHexN(b, uint64(r.EtherType), 4)
			b = append(b, " len "...)
			b = appendU(b, uint64(r.OrigLen))
		}
		return append(b, '\n')
	}
	pk := &r.Pkt
	if r.Err != nil && !pk.Src.IsValid() {
		b = append(b, "malformed: "...)
		b = append(b, r.Err.Error()...)
		return append(b, '\n')
	}
	b = pk.Src.AppendTo(b)
	b = append(b, " > "...)
	b = pk.Dst.AppendTo(b)
	if r.Err != nil {
		return p.appendMalformedLine(b, pk, r.Err)
	}
	if s := pk.SRH; s != nil {
		b = appendSRHFixedLine(b, s)
		b = append(b, " ["...)
		// path order: highest wire index first; a reduced SRH's active SID is the DA
		first := true
		if s.Reduced() {
			b = pk.Dst.AppendTo(b)
			b = append(b, '*')
			b = p.appendAnnotation(b, pk.Dst)
			first = false
		}
		for i := len(s.Segments) - 1; i >= 0; i-- {
			if !first {
				b = append(b, ", "...)
			}
			first = false
			b = s.Segments[i].AppendTo(b)
			if i == int(s.SegmentsLeft) {
				b = append(b, '*')
			}
			b = p.appendAnnotation(b, s.Segments[i])
		}
		b = append(b, ']')
		b = appendTLVsLine(b, s.TLVs)
	} else {
		b = append(b, " no-srh"...)
		b = p.appendNoSRHContainer(b, pk.Dst)
	}
	b = append(b, " | "...)
	b = appendInnerSummary(b, &r.Inner, pk)
	return append(b, '\n')
}

func (p *Printer) appendAnnotation(b []byte, a netip.Addr) []byte {
	info, ok := p.lookup(a)
	if !ok {
		return b
	}
	b = append(b, '(')
	b = append(b, info.Node...)
	if info.Service != "" {
		b = append(b, '/')
		b = append(b, info.Service...)
	}
	if info.Behavior != "" {
		b = append(b, ' ')
		b = append(b, info.Behavior...)
	}
	if info.isContainer() {
		return append(p.appendUSIDs(b, a, info), ')')
	}
	if info.ArgsBits > 0 {
		_, args := info.Structure(a)
		b = append(b, " args "...)
		b = appendU(b, args)
	}
	return append(b, ')')
}

func appendTLVShort(b []byte, t srh.TLV) []byte {
	switch t.Type {
	case srh.TLVPad1:
		return append(b, "pad1"...)
	case srh.TLVPadN:
		b = append(b, "padn "...)
		return appendU(b, uint64(len(t.Value)))
	case srh.TLVHMAC:
		if h, ok := t.HMAC(); ok {
			b = append(b, "hmac key "...)
			b = appendU(b, uint64(h.KeyID))
			if h.D {
				b = append(b, " D"...)
			}
			return b
		}
	}
	b = append(b, "type "...)
	b = appendU(b, uint64(t.Type))
	b = append(b, " len "...)
	return appendU(b, uint64(len(t.Value)))
}

func appendInnerSummary(b []byte, in *Inner, pk *srh.Packet) []byte {
	switch in.Kind {
	case srh.InnerNone:
		return append(b, "no payload"...)
	case srh.InnerEthernet:
		b = append(b, "ether "...)
		b = appendMAC(b, in.EthSrc)
		b = append(b, " > "...)
		b = appendMAC(b, in.EthDst)
		if in.Family == 0 {
			if in.Err != "" {
				b = append(b, " malformed: "...)
				return append(b, in.Err...)
			}
			b = append(b, " ethertype "...)
			b = appendHexN(b, uint64(in.EthType), 4)
			b = append(b, " len "...)
			return appendU(b, uint64(len(pk.Inner)))
		}
		b = append(b, ' ')
		fallthrough
	case srh.InnerIPv6, srh.InnerIPv4:
		if in.Family == 4 {
			b = append(b, "ipv4 "...)
		} else {
			b = append(b, "ipv6 "...)
		}
		return appendInnerL3L4(b, in)
	case srh.InnerTransport:
		return appendL4(b, in, true)
	}
	return b
}

// appendInnerL3L4 renders "SRC[.port] > DST[.port] <l4>".
func appendInnerL3L4(b []byte, in *Inner) []byte {
	if in.Err != "" && !in.Src.IsValid() {
		b = append(b, "malformed: "...)
		return append(b, in.Err...)
	}
	ports := in.HasL4 && in.L4.Err == "" && (in.L4.Proto == srh.ProtoTCP || in.L4.Proto == srh.ProtoUDP)
	b = in.Src.AppendTo(b)
	if ports {
		b = append(b, '.')
		b = appendU(b, uint64(in.L4.SrcPort))
	}
	b = append(b, " > "...)
	b = in.Dst.AppendTo(b)
	if ports {
		b = append(b, '.')
		b = appendU(b, uint64(in.L4.DstPort))
	}
	if in.Err != "" {
		b = append(b, " malformed: "...)
		return append(b, in.Err...)
	}
	if in.IPCsumBad {
		b = append(b, " ip-cksum bad"...)
	}
	b = append(b, ' ')
	if !in.HasL4 && !in.Frag {
		return appendProto(b, in.L4.Proto) // no transport: "none" (59)
	}
	return appendL4(b, in, false)
}

func appendL4(b []byte, in *Inner, withPorts bool) []byte {
	t := &in.L4
	if in.Frag {
		b = append(b, "fragment "...)
		return appendProto(b, t.Proto)
	}
	b = appendProto(b, t.Proto)
	if t.Err != "" {
		b = append(b, " malformed: "...)
		return append(b, t.Err...)
	}
	switch t.Proto {
	case srh.ProtoTCP, srh.ProtoUDP:
		if withPorts {
			b = append(b, ' ')
			b = appendU(b, uint64(t.SrcPort))
			b = append(b, " > "...)
			b = appendU(b, uint64(t.DstPort))
		}
		if t.Proto == srh.ProtoTCP {
			b = append(b, " ["...)
			b = appendTCPFlags(b, t.TCPFlags)
			b = append(b, "] seq "...)
			b = appendU(b, uint64(t.Seq))
			if t.TCPFlags&0x10 != 0 {
				b = append(b, " ack "...)
				b = appendU(b, uint64(t.Ack))
			}
			b = append(b, " win "...)
			b = appendU(b, uint64(t.Window))
		}
		b = append(b, " len "...)
		b = appendU(b, uint64(t.DataLen))
	case srh.ProtoICMPv6, protoICMP:
		b = append(b, ' ')
		if n := icmpName(t.Proto, t.ICMPType); n != "" {
			b = append(b, n...)
		} else {
			b = append(b, "type "...)
			b = appendU(b, uint64(t.ICMPType))
			b = append(b, " code "...)
			b = appendU(b, uint64(t.ICMPCode))
		}
		if isEcho(t) {
			b = append(b, " id "...)
			b = appendU(b, uint64(t.ICMPID))
			b = append(b, " seq "...)
			b = appendU(b, uint64(t.ICMPSeq))
		}
	default:
		b = append(b, " len "...)
		return appendU(b, uint64(t.Len))
	}
	b = append(b, " cksum "...)
	return append(b, csumNames[t.CsumState]...)
}

func isEcho(t *Transport) bool {
	if t.Proto == srh.ProtoICMPv6 {
		return t.ICMPType == 128 || t.ICMPType == 129
	}
	return t.ICMPType == 8 || t.ICMPType == 0
}

// ---- tree (-v) ----

func (p *Printer) appendTree(b []byte, r *Record) []byte {
	b = appendClock(b, r.Time)
	b = append(b, " frame len "...)
	b = appendU(b, uint64(r.OrigLen))
	b = append(b, " caplen "...)
	b = appendU(b, uint64(r.CapLen))
	b = append(b, '\n')
	if !r.IPv6 {
		if r.EtherType == etherIPv4 {
			b = append(b, "  ipv4 "...)
			b = appendInnerL3L4(b, &r.Inner)
		} else if r.Err != nil {
			b = append(b, "  malformed: "...)
			b = append(b, r.Err.Error()...)
		} else {
			b = append(b, "  ethertype "...)
			b = appendHexN(b, uint64(r.EtherType), 4)
		}
		return append(b, '\n')
	}
	pk := &r.Pkt
	if r.Err != nil && !pk.Src.IsValid() {
		b = append(b, "  malformed: "...)
		b = append(b, r.Err.Error()...)
		return append(b, '\n')
	}
	b = append(b, "  ipv6 "...)
	b = pk.Src.AppendTo(b)
	b = append(b, " > "...)
	b = pk.Dst.AppendTo(b)
	b = append(b, "\n    traffic-class "...)
	b = appendHexN(b, uint64(pk.TrafficClass), 2)
	b = append(b, " flow-label "...)
	b = appendHexN(b, uint64(pk.FlowLabel), 5)
	b = append(b, " payload-length "...)
	b = appendU(b, uint64(pk.PayloadLen))
	b = append(b, " next-header "...)
	b = appendNH(b, pk.NextHeader)
	b = append(b, " hop-limit "...)
	b = appendU(b, uint64(pk.HopLimit))
	b = append(b, '\n')
	for _, h := range pk.ExtHeaders {
		b = appendExt(b, h)
	}
	if r.Err != nil {
		return p.appendMalformedTree(b, pk, r.Err)
	}
	if s := pk.SRH; s != nil {
		b = append(b, "  srh"...)
		b = appendSRHFixedTree(b, s)
		b = append(b, "\n    segments (first visited first):\n"...)
		if s.Reduced() {
			b = append(b, "      ["...)
			b = appendU(b, uint64(s.LastEntry)+1)
			b = append(b, "] "...)
			b = pk.Dst.AppendTo(b)
			b = append(b, " active (destination address only: reduced srh)"...)
			b = p.appendAnnotationTree(b, pk.Dst)
			b = append(b, '\n')
		}
		for i := len(s.Segments) - 1; i >= 0; i-- {
			b = append(b, "      ["...)
			b = appendU(b, uint64(i))
			b = append(b, "] "...)
			b = s.Segments[i].AppendTo(b)
			b = append(b, ' ')
			b = append(b, segState(s, i)...)
			if i == 0 {
				b = append(b, " (final)"...)
			}
			b = p.appendAnnotationTree(b, s.Segments[i])
			b = append(b, '\n')
		}
		b = appendTLVsTree(b, "    tlvs:\n", s.TLVs)
		for _, h := range pk.PostExtHeaders {
			b = appendExt(b, h)
		}
	}
	b = p.appendInnerTree(b, &r.Inner, pk)
	return b
}

func appendNH(b []byte, nh uint8) []byte {
	b = appendU(b, uint64(nh))
	if n := protoName(nh); n != "" {
		b = append(b, '(')
		b = append(b, n...)
		b = append(b, ')')
	}
	return b
}

func appendExt(b []byte, h srh.ExtHeader) []byte {
	b = append(b, "  ext "...)
	b = appendNH(b, h.Proto)
	b = append(b, " len "...)
	b = appendU(b, uint64(len(h.Raw)))
	return append(b, '\n')
}

func (p *Printer) appendAnnotationTree(b []byte, a netip.Addr) []byte {
	info, ok := p.lookup(a)
	if !ok {
		return b
	}
	b = append(b, "  node "...)
	b = append(b, info.Node...)
	if info.Service != "" {
		b = append(b, " service "...)
		b = append(b, info.Service...)
	}
	if info.Behavior != "" {
		b = append(b, " behavior "...)
		b = append(b, info.Behavior...)
	}
	if info.isContainer() {
		return p.appendUSIDs(b, a, info)
	}
	if info.LocatorBits > 0 {
		funct, args := info.Structure(a)
		b = append(b, " loc "...)
		b = netip.PrefixFrom(a, info.LocatorBits).Masked().AppendTo(b)
		b = append(b, " funct "...)
		b = appendHexN(b, funct, (info.FunctionBits+3)/4)
		b = append(b, " args "...)
		b = appendU(b, args)
	}
	return b
}

func appendTLVLong(b []byte, t srh.TLV) []byte {
	switch t.Type {
	case srh.TLVPad1:
		return append(b, "pad1 type 0 (1 octet)"...)
	case srh.TLVPadN:
		b = append(b, "padn type 4 len "...)
		b = appendU(b, uint64(len(t.Value)))
		if len(t.Value) > 0 {
			b = append(b, " padding "...)
			b = appendHexBytes(b, t.Value)
		}
		return b
	case srh.TLVHMAC:
		if h, ok := t.HMAC(); ok {
			b = append(b, "hmac type 5 len "...)
			b = appendU(b, uint64(len(t.Value)))
			b = append(b, " D "...)
			if h.D {
				b = append(b, '1')
			} else {
				b = append(b, '0')
			}
			if h.Reserved != 0 {
				b = append(b, " reserved "...)
				b = appendHexN(b, uint64(h.Reserved), 4)
			}
			b = append(b, " key-id "...)
			b = appendU(b, uint64(h.KeyID))
			b = append(b, " hmac "...)
			return appendHexBytes(b, h.HMAC)
		}
	}
	b = append(b, "unknown type "...)
	b = appendU(b, uint64(t.Type))
	b = append(b, " len "...)
	b = appendU(b, uint64(len(t.Value)))
	if len(t.Value) > 0 {
		b = append(b, " value "...)
		b = appendHexBytes(b, t.Value)
	}
	return b
}

func (p *Printer) appendInnerTree(b []byte, in *Inner, pk *srh.Packet) []byte {
	b = append(b, "  inner "...)
	b = append(b, in.Kind.String()...)
	switch in.Kind {
	case srh.InnerNone:
		return append(b, '\n')
	case srh.InnerTransport:
		b = append(b, " (checksum over "...)
		b = in.Src.AppendTo(b)
		b = append(b, " > "...)
		b = in.Dst.AppendTo(b)
		b = append(b, ")\n"...)
		return appendL4Tree(b, in)
	case srh.InnerEthernet:
		b = append(b, ' ')
		b = appendMAC(b, in.EthSrc)
		b = append(b, " > "...)
		b = appendMAC(b, in.EthDst)
		b = append(b, " ethertype "...)
		b = appendHexN(b, uint64(in.EthType), 4)
		b = append(b, '\n')
		if in.Family == 0 {
			if in.Err != "" {
				b = append(b, "    malformed: "...)
				b = append(b, in.Err...)
				b = append(b, '\n')
			}
			return b
		}
		if in.Family == 4 {
			b = append(b, "  inner ipv4"...)
		} else {
			b = append(b, "  inner ipv6"...)
		}
	}
	if in.Err != "" && !in.Src.IsValid() {
		b = append(b, "\n    malformed: "...)
		b = append(b, in.Err...)
		return append(b, '\n')
	}
	b = append(b, ' ')
	b = in.Src.AppendTo(b)
	b = append(b, " > "...)
	b = in.Dst.AppendTo(b)
	if in.Family == 4 {
		b = append(b, " ttl "...)
	} else {
		b = append(b, " hop-limit "...)
	}
	b = appendU(b, uint64(in.HopLimit))
	b = append(b, " length "...)
	b = appendU(b, uint64(in.IPLen))
	if in.Family == 4 {
		b = append(b, " id "...)
		b = appendU(b, uint64(in.IPID))
		b = append(b, " ip-cksum "...)
		if in.IPCsumBad {
			b = append(b, "bad"...)
		} else {
			b = append(b, "ok"...)
		}
	}
	b = append(b, '\n')
	if in.Err != "" {
		b = append(b, "    malformed: "...)
		b = append(b, in.Err...)
		return append(b, '\n')
	}
	return appendL4Tree(b, in)
}

func appendL4Tree(b []byte, in *Inner) []byte {
	if !in.HasL4 && !in.Frag {
		return b
	}
	t := &in.L4
	b = append(b, "    "...)
	if in.Frag {
		b = append(b, "fragment of "...)
		b = appendProto(b, t.Proto)
		return append(b, '\n')
	}
	b = appendProto(b, t.Proto)
	if t.Err != "" {
		b = append(b, " malformed: "...)
		b = append(b, t.Err...)
		return append(b, '\n')
	}
	switch t.Proto {
	case srh.ProtoTCP, srh.ProtoUDP:
		b = append(b, " sport "...)
		b = appendU(b, uint64(t.SrcPort))
		b = append(b, " dport "...)
		b = appendU(b, uint64(t.DstPort))
		if t.Proto == srh.ProtoTCP {
			b = append(b, " flags ["...)
			b = appendTCPFlags(b, t.TCPFlags)
			b = append(b, "] seq "...)
			b = appendU(b, uint64(t.Seq))
			b = append(b, " ack "...)
			b = appendU(b, uint64(t.Ack))
			b = append(b, " win "...)
			b = appendU(b, uint64(t.Window))
		}
		b = append(b, " data "...)
		b = appendU(b, uint64(t.DataLen))
	case srh.ProtoICMPv6, protoICMP:
		b = append(b, " type "...)
		b = appendU(b, uint64(t.ICMPType))
		if n := icmpName(t.Proto, t.ICMPType); n != "" {
			b = append(b, '(')
			b = append(b, n...)
			b = append(b, ')')
		}
		b = append(b, " code "...)
		b = appendU(b, uint64(t.ICMPCode))
		if isEcho(t) {
			b = append(b, " id "...)
			b = appendU(b, uint64(t.ICMPID))
			b = append(b, " seq "...)
			b = appendU(b, uint64(t.ICMPSeq))
		}
	default:
		b = append(b, " len "...)
		b = appendU(b, uint64(t.Len))
		return append(b, '\n')
	}
	b = append(b, " cksum "...)
	b = appendHexN(b, uint64(t.Checksum), 4)
	b = append(b, ' ')
	b = append(b, csumNames[t.CsumState]...)
	return append(b, '\n')
}

// errReason returns the srh reason name and offset of err, if any.
func errReason(err error) (string, int, bool) {
	var pe *srh.ParseError
	if errors.As(err, &pe) {
		return pe.Reason(), pe.Offset, true
	}
	return "", 0, false
}
