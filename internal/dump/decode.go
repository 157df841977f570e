package dump

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/segchain/segchain/internal/srh"
)

// Link-layer header types (pcap LINKTYPE_*) the decoder understands.
const (
	LinkNull     = 0
	LinkEthernet = 1
	LinkRaw      = 101
	LinkLoop     = 108
	LinkLinuxSLL = 113
	LinkIPv4     = 228
	LinkIPv6     = 229
	LinkSLL2     = 276
)

// EtherType values.
const (
	etherIPv4 = 0x0800
	etherIPv6 = 0x86dd
	etherVLAN = 0x8100
	etherQinQ = 0x88a8
)

// Checksum states of the inner transport header.
const (
	CsumNone = iota // not checked (unknown protocol, fragment, truncated)
	CsumOK
	CsumBad
	CsumZero // UDP checksum 0: "none" over IPv4, allowed for tunnels over IPv6 (RFC 6935)
)

var csumNames = [...]string{"n/a", "ok", "bad", "zero"}

// Transport is a decoded inner transport header.
type Transport struct {
	Proto            uint8
	SrcPort, DstPort uint16
	TCPFlags         uint8
	Seq, Ack         uint32
	Window           uint16
	ICMPType         uint8
	ICMPCode         uint8
	ICMPID, ICMPSeq  uint16
	Len              int // length of the transport segment (header + data)
	DataLen          int // length of the data after the transport header
	Checksum         uint16
	CsumState        int
	Err              string // malformed transport header
}

// Inner is the decoded inner packet (or, for insert mode and plain packets,
// the transport part with the addresses its checksum is computed over).
type Inner struct {
	Kind srh.InnerKind
	// Ethernet header (Kind == InnerEthernet).
	EthSrc, EthDst [6]byte
	EthType        uint16
	// Network layer: 4, 6, or 0 when there is none.
	Family    int
	Src, Dst  netip.Addr
	HopLimit  uint8 // TTL for IPv4
	IPLen     int   // inner IP total length
	IPID      uint16
	IPCsumBad bool // IPv4 header checksum wrong
	Frag      bool // a fragment (no transport header to check)
	L4        Transport
	HasL4     bool
	Err       string // malformed inner packet
}

// Record is one captured frame and what was decoded from it. Run reuses
// one Record for every packet: slices alias the capture buffer.
type Record struct {
	Time    time.Time
	CapLen  int
	OrigLen int
	Link    uint32
	Data    []byte

	EtherType uint16 // of the outer frame (0x86dd for raw IPv6 captures)
	IPv6      bool   // the frame carries an IPv6 packet (Pkt is meaningful)
	IPv6Off   int    // offset of the IPv6 header in Data
	Pkt       srh.Packet
	Err       error // outer decode error (malformed IPv6/SRH)
	Inner     Inner // valid when IPv6 && Err == nil, or for outer IPv4 frames
}

// Decode decodes data (a frame of link type link) into r.
func (r *Record) Decode(link uint32, data []byte) {
	r.Link, r.Data, r.IPv6, r.IPv6Off, r.Err, r.EtherType = link, data, false, 0, nil, 0
	r.Inner = Inner{}
	off, et, err := linkPayload(link, data)
	if err != nil {
		r.Err = err
		return
	}
	r.EtherType = et
	switch et {
	case etherIPv6:
		r.IPv6, r.IPv6Off = true, off
		if r.Err = r.Pkt.DecodeInto(data[off:]); r.Err != nil {
			return
		}
		decodeInner(&r.Inner, &r.Pkt)
	case etherIPv4:
		decodeIPv4(&r.Inner, data[off:])
	}
}

// linkPayload returns the offset of the network header and its EtherType.
func linkPayload(link uint32, b []byte) (int, uint16, error) {
	switch link {
	case LinkEthernet:
		if len(b) < 14 {
			return 0, 0, fmt.Errorf("ethernet header truncated (%d octets)", len(b))
		}
		off, et := 14, binary.BigEndian.Uint16(b[12:14])
		for (et == etherVLAN || et == etherQinQ) && len(b) >= off+4 {
			et = binary.BigEndian.Uint16(b[off+2 : off+4])
			off += 4
		}
		return off, et, nil
	case LinkRaw, LinkIPv4, LinkIPv6:
		if len(b) < 1 {
			return 0, 0, fmt.Errorf("empty packet")
		}
		switch b[0] >> 4 {
		case 6:
			return 0, etherIPv6, nil
		case 4:
			return 0, etherIPv4, nil
		}
		return 0, 0, nil
	case LinkLinuxSLL:
		if len(b) < 16 {
			return 0, 0, fmt.Errorf("linux sll header truncated")
		}
		return 16, binary.BigEndian.Uint16(b[14:16]), nil
	case LinkSLL2:
		if len(b) < 20 {
			return 0, 0, fmt.Errorf("linux sll2 header truncated")
		}
		return 20, binary.BigEndian.Uint16(b[0:2]), nil
	case LinkNull, LinkLoop:
		if len(b) < 4 {
			return 0, 0, fmt.Errorf("loopback header truncated")
		}
		fam := binary.LittleEndian.Uint32(b[0:4])
		if link == LinkLoop || fam > 0xffff {
			fam = binary.BigEndian.Uint32(b[0:4])
		}
		switch fam {
		case 2:
			return 4, etherIPv4, nil
		case 10, 24, 28, 30:
			return 4, etherIPv6, nil
		}
		return 4, 0, nil
	}
	return 0, 0, fmt.Errorf("unsupported link type %d", link)
}

func decodeInner(in *Inner, p *srh.Packet) {
	in.Kind = p.InnerKind
	switch p.InnerKind {
	case srh.InnerIPv6:
		decodeIPv6(in, p.Inner)
	case srh.InnerIPv4:
		decodeIPv4(in, p.Inner)
	case srh.InnerEthernet:
		b := p.Inner
		if len(b) < 14 {
			in.Err = fmt.Sprintf("inner ethernet truncated (%d octets)", len(b))
			return
		}
		copy(in.EthDst[:], b[0:6])
		copy(in.EthSrc[:], b[6:12])
		off, et := 14, binary.BigEndian.Uint16(b[12:14])
		for (et == etherVLAN || et == etherQinQ) && len(b) >= off+4 {
			et = binary.BigEndian.Uint16(b[off+2 : off+4])
			off += 4
		}
		in.EthType = et
		switch et {
		case etherIPv6:
			decodeIPv6(in, b[off:])
		case etherIPv4:
			decodeIPv4(in, b[off:])
		}
	case srh.InnerTransport:
		// Insert mode (or a plain packet): the transport checksum covers the
		// source and the FINAL destination (Segment List[0]).
		in.Family, in.Src, in.Dst = 6, p.Src, p.FinalDestination()
		in.HopLimit, in.IPLen = p.HopLimit, 40+int(p.PayloadLen)
		decodeL4(in, p.InnerProto, p.Inner)
	}
}

func decodeIPv6(in *Inner, b []byte) {
	in.Family = 6
	if len(b) < 40 {
		in.Err = fmt.Sprintf("inner ipv6 header truncated (%d octets)", len(b))
		return
	}
	if b[0]>>4 != 6 {
		in.Err = fmt.Sprintf("inner ip version %d, want 6", b[0]>>4)
		return
	}
	in.Src = netip.AddrFrom16([16]byte(b[8:24]))
	in.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	in.HopLimit = b[7]
	plen := int(binary.BigEndian.Uint16(b[4:6]))
	in.IPLen = 40 + plen
	if 40+plen > len(b) {
		in.Err = fmt.Sprintf("inner ipv6 payload length %d, have %d", plen, len(b)-40)
		return
	}
	b = b[:40+plen]
	nh, off := b[6], 40
	for i := 0; i < 8; i++ { // bounded walk over extension headers
		switch nh {
		case srh.ProtoHopByHop, srh.ProtoDstOpts, srh.ProtoRouting:
			if off+2 > len(b) || off+(int(b[off+1])+1)*8 > len(b) {
				in.Err = "inner ipv6 extension header truncated"
				return
			}
			nh, off = b[off], off+(int(b[off+1])+1)*8
			continue
		case srh.ProtoFragment:
			in.Frag = true
			in.L4.Proto = nh
			return
		case srh.ProtoNoNext:
			in.L4.Proto = nh
			return
		}
		break
	}
	decodeL4(in, nh, b[off:])
}

func decodeIPv4(in *Inner, b []byte) {
	in.Family = 4
	if len(b) < 20 {
		in.Err = fmt.Sprintf("ipv4 header truncated (%d octets)", len(b))
		return
	}
	if b[0]>>4 != 4 {
		in.Err = fmt.Sprintf("ip version %d, want 4", b[0]>>4)
		return
	}
	ihl := int(b[0]&0x0f) * 4
	tot := int(binary.BigEndian.Uint16(b[2:4]))
	in.Src = netip.AddrFrom4([4]byte(b[12:16]))
	in.Dst = netip.AddrFrom4([4]byte(b[16:20]))
	in.HopLimit, in.IPLen, in.IPID = b[8], tot, binary.BigEndian.Uint16(b[4:6])
	if ihl < 20 || tot < ihl || tot > len(b) {
		in.Err = fmt.Sprintf("ipv4 ihl %d total length %d, have %d", ihl, tot, len(b))
		return
	}
	in.IPCsumBad = fold(sum(0, b[:ihl])) != 0xffff
	if fo := binary.BigEndian.Uint16(b[6:8]); fo&0x3fff != 0 {
		in.Frag = true
		in.L4.Proto = b[9]
		return
	}
	decodeL4(in, b[9], b[ihl:tot])
}

const protoICMP = 1

func decodeL4(in *Inner, proto uint8, b []byte) {
	t := &in.L4
	*t = Transport{Proto: proto, Len: len(b)}
	in.HasL4 = true
	need := 0
	switch proto {
	case srh.ProtoTCP:
		need = 20
	case srh.ProtoUDP, srh.ProtoICMPv6, protoICMP:
		need = 8
	default:
		return
	}
	if len(b) < need {
		t.Err = fmt.Sprintf("%s header truncated (%d octets)", protoName(proto), len(b))
		return
	}
	switch proto {
	case srh.ProtoTCP:
		t.SrcPort, t.DstPort = binary.BigEndian.Uint16(b[0:2]), binary.BigEndian.Uint16(b[2:4])
		t.Seq, t.Ack = binary.BigEndian.Uint32(b[4:8]), binary.BigEndian.Uint32(b[8:12])
		t.TCPFlags, t.Window = b[13], binary.BigEndian.Uint16(b[14:16])
		t.Checksum = binary.BigEndian.Uint16(b[16:18])
		if doff := int(b[12]>>4) * 4; doff < 20 || doff > len(b) {
			t.Err = fmt.Sprintf("tcp data offset %d", doff)
		} else {
			t.DataLen = len(b) - doff
		}
	case srh.ProtoUDP:
		t.SrcPort, t.DstPort = binary.BigEndian.Uint16(b[0:2]), binary.BigEndian.Uint16(b[2:4])
		t.Checksum = binary.BigEndian.Uint16(b[6:8])
		t.DataLen = len(b) - 8
		if ul := int(binary.BigEndian.Uint16(b[4:6])); ul != len(b) {
			t.Err = fmt.Sprintf("udp length %d, have %d", ul, len(b))
		}
	case srh.ProtoICMPv6, protoICMP:
		t.ICMPType, t.ICMPCode = b[0], b[1]
		t.Checksum = binary.BigEndian.Uint16(b[2:4])
		t.ICMPID, t.ICMPSeq = binary.BigEndian.Uint16(b[4:6]), binary.BigEndian.Uint16(b[6:8])
		t.DataLen = len(b) - 8
	}
	if proto == srh.ProtoUDP && t.Checksum == 0 {
		t.CsumState = CsumZero
		return
	}
	var s uint32
	switch {
	case proto == protoICMP:
		if in.Family != 4 {
			return
		}
	case in.Family == 6:
		a, d := in.Src.As16(), in.Dst.As16()
		s = sum(sum(0, a[:]), d[:]) + uint32(len(b)) + uint32(proto)
	case in.Family == 4:
		a, d := in.Src.As4(), in.Dst.As4()
		s = sum(sum(0, a[:]), d[:]) + uint32(len(b)) + uint32(proto)
	default:
		return
	}
	if fold(sum(s, b)) == 0xffff {
		t.CsumState = CsumOK
	} else {
		t.CsumState = CsumBad
	}
}

// sum adds b as big-endian 16-bit words to s (one's complement, unfolded).
func sum(s uint32, b []byte) uint32 {
	var s64 uint64 = uint64(s)
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		s64 += v>>48 + v>>32&0xffff + v>>16&0xffff + v&0xffff
		b = b[8:]
	}
	for len(b) >= 2 {
		s64 += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s64 += uint64(b[0]) << 8
	}
	for s64>>32 != 0 {
		s64 = s64&0xffffffff + s64>>32
	}
	return uint32(s64)
}

func fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func protoName(p uint8) string {
	switch p {
	case srh.ProtoTCP:
		return "tcp"
	case srh.ProtoUDP:
		return "udp"
	case srh.ProtoICMPv6:
		return "icmp6"
	case protoICMP:
		return "icmp"
	case srh.ProtoIPv6:
		return "ipv6"
	case srh.ProtoIPv4:
		return "ipv4"
	case srh.ProtoEthernet:
		return "ethernet"
	case srh.ProtoRouting:
		return "routing"
	case srh.ProtoHopByHop:
		return "hop-by-hop"
	case srh.ProtoDstOpts:
		return "dstopts"
	case srh.ProtoFragment:
		return "fragment"
	case srh.ProtoNoNext:
		return "none"
	case 50:
		return "esp"
	case 51:
		return "ah"
	}
	return ""
}
