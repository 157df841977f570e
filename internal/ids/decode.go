package ids

import (
	"encoding/binary"
	"net/netip"
)

// IP protocol numbers the decoder knows.
const (
	ipprotoHopOpts  = 0
	ipprotoICMP     = 1
	ipprotoTCP      = 6
	ipprotoUDP      = 17
	ipprotoRouting  = 43
	ipprotoFragment = 44
	ipprotoAH       = 51
	ipprotoICMPv6   = 58
	ipprotoDstOpts  = 60
)

// maxExtHeaders bounds the IPv6 extension-header walk of an inner packet.
const maxExtHeaders = 8

// DecodeError says why an inner packet could not be inspected.
type DecodeError uint8

const (
	decodeOK        DecodeError = iota
	DecodeNotIP                 // the inner packet is neither IPv4 nor IPv6
	DecodeTruncated             // a header runs past the end of the bytes
	DecodeBadHeader             // a header field is inconsistent
	numDecodeErrors
)

func (d DecodeError) String() string {
	switch d {
	case decodeOK:
		return "ok"
	case DecodeNotIP:
		return "not-ip"
	case DecodeTruncated:
		return "truncated"
	case DecodeBadHeader:
		return "bad-header"
	}
	return "unknown"
}

// flow is the decoded view of an inner packet; slices alias the packet.
type flow struct {
	v6               bool
	src, dst         netip.Addr
	proto            uint8 // final protocol (TCP, UDP, ICMP, ...)
	hasL4            bool  // the transport header was decoded (not a later fragment)
	sport, dport     uint16
	icmpType, icmpCd uint8
	payload          []byte
}

// decode parses an inner IPv4 or IPv6 packet without allocating.
func (f *flow) decode(b []byte) DecodeError {
	*f = flow{}
	if len(b) < 1 {
		return DecodeNotIP // nothing (an L2 frame a service left out, No Next Header)
	}
	var rest []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return DecodeTruncated
		}
		ihl := int(b[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(b[2:4]))
		if ihl < 20 || total < ihl {
			return DecodeBadHeader
		}
		if total > len(b) {
			return DecodeTruncated
		}
		f.src = netip.AddrFrom4([4]byte(b[12:16]))
		f.dst = netip.AddrFrom4([4]byte(b[16:20]))
		f.proto = b[9]
		rest = b[ihl:total]
		fragOff := binary.BigEndian.Uint16(b[6:8]) & 0x1fff
		if fragOff != 0 {
			f.payload = rest
			return decodeOK
		}
	case 6:
		if len(b) < 40 {
			return DecodeTruncated
		}
		plen := int(binary.BigEndian.Uint16(b[4:6]))
		if 40+plen > len(b) {
			return DecodeTruncated
		}
		f.v6 = true
		f.src = netip.AddrFrom16([16]byte(b[8:24]))
		f.dst = netip.AddrFrom16([16]byte(b[24:40]))
		nh := b[6]
		rest = b[40 : 40+plen]
		for i := 0; ; i++ {
			if i == maxExtHeaders {
				return DecodeBadHeader
			}
			var hlen int
			switch nh {
			case ipprotoHopOpts, ipprotoRouting, ipprotoDstOpts:
				if len(rest) < 2 {
					return DecodeTruncated
				}
				hlen = (int(rest[1]) + 1) * 8
			case ipprotoAH:
				if len(rest) < 2 {
					return DecodeTruncated
				}
				hlen = (int(rest[1]) + 2) * 4
			case ipprotoFragment:
				if len(rest) < 8 {
					return DecodeTruncated
				}
				if binary.BigEndian.Uint16(rest[2:4])&0xfff8 != 0 {
					f.proto = rest[0]
					f.payload = rest[8:]
					return decodeOK // a later fragment: no transport header
				}
				hlen = 8
			default:
				hlen = -1
			}
			if hlen < 0 {
				break
			}
			if hlen > len(rest) {
				return DecodeTruncated
			}
			nh, rest = rest[0], rest[hlen:]
		}
		f.proto = nh
	default:
		return DecodeNotIP
	}
	switch f.proto {
	case ipprotoTCP:
		if len(rest) < 20 {
			return DecodeTruncated
		}
		off := int(rest[12]>>4) * 4
		if off < 20 {
			return DecodeBadHeader
		}
		if off > len(rest) {
			return DecodeTruncated
		}
		f.sport = binary.BigEndian.Uint16(rest[0:2])
		f.dport = binary.BigEndian.Uint16(rest[2:4])
		f.payload = rest[off:]
	case ipprotoUDP:
		if len(rest) < 8 {
			return DecodeTruncated
		}
		f.sport = binary.BigEndian.Uint16(rest[0:2])
		f.dport = binary.BigEndian.Uint16(rest[2:4])
		f.payload = rest[8:]
	case ipprotoICMP, ipprotoICMPv6:
		if (f.proto == ipprotoICMP) == f.v6 {
			return decodeOK // ICMP in IPv6 or ICMPv6 in IPv4: another protocol
		}
		if len(rest) < 8 {
			return DecodeTruncated
		}
		f.icmpType, f.icmpCd = rest[0], rest[1]
		f.payload = rest[8:]
	default:
		// Another protocol: no payload to inspect (content and pcre never
		// match, dsize sees 0), as in Suricata, which inspects the payload
		// of TCP, UDP and ICMP only.
		return decodeOK
	}
	f.hasL4 = true
	return decodeOK
}

// protoClass buckets packets for the header-only rule index.
type protoClass uint8

const (
	classTCP protoClass = iota
	classUDP
	classICMP4
	classICMP6
	classOther
	numClasses
)

func (f *flow) class() protoClass {
	switch {
	case f.proto == ipprotoTCP && f.hasL4:
		return classTCP
	case f.proto == ipprotoUDP && f.hasL4:
		return classUDP
	case f.proto == ipprotoICMP && f.hasL4 && !f.v6:
		return classICMP4
	case f.proto == ipprotoICMPv6 && f.hasL4 && f.v6:
		return classICMP6
	}
	return classOther
}

// classes returns the packet classes a rule protocol can match.
func (p Proto) classes() []protoClass {
	switch p {
	case ProtoTCP:
		return []protoClass{classTCP}
	case ProtoUDP:
		return []protoClass{classUDP}
	case ProtoICMP:
		return []protoClass{classICMP4, classICMP6}
	case ProtoICMPv4:
		return []protoClass{classICMP4}
	case ProtoICMPv6:
		return []protoClass{classICMP6}
	}
	return []protoClass{classTCP, classUDP, classICMP4, classICMP6, classOther}
}

// matchProto reports whether a packet of flow f is of rule protocol p.
func (p Proto) match(f *flow) bool {
	switch p {
	case ProtoIP:
		return true
	case ProtoIPv4:
		return !f.v6
	case ProtoIPv6:
		return f.v6
	case ProtoTCP:
		return f.class() == classTCP
	case ProtoUDP:
		return f.class() == classUDP
	case ProtoICMP:
		c := f.class()
		return c == classICMP4 || c == classICMP6
	case ProtoICMPv4:
		return f.class() == classICMP4
	case ProtoICMPv6:
		return f.class() == classICMP6
	}
	return false
}
