package srv6svc

import (
	"encoding/binary"
	"net/netip"
)

// Flow is the 5-tuple of an inner packet.
type Flow struct {
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16 // 0 for protocols without ports
}

// InnerFlow returns the 5-tuple of the inner IPv4 or IPv6 packet; ports are
// read for TCP, UDP and SCTP (not from non-first fragments). An IPv6 inner
// packet's hop-by-hop, routing and destination options headers are walked.
// ok is false for anything else (Ethernet inner frames, insert mode,
// truncated headers).
func (p *Packet) InnerFlow() (f Flow, ok bool) {
	return innerFlow(p.InnerProto(), p.Inner())
}

func innerFlow(proto uint8, b []byte) (f Flow, ok bool) {
	var l4 []byte
	switch proto {
	case protoIPv4:
		if len(b) < 20 || b[0]>>4 != 4 {
			return f, false
		}
		ihl := int(b[0]&0xf) * 4
		if ihl < 20 || ihl > len(b) {
			return f, false
		}
		f.Src = netip.AddrFrom4([4]byte(b[12:16]))
		f.Dst = netip.AddrFrom4([4]byte(b[16:20]))
		f.Proto = b[9]
		if binary.BigEndian.Uint16(b[6:])&0x1fff == 0 {
			l4 = b[ihl:]
		}
	case protoIPv6:
		if len(b) < ipv6Len || b[0]>>4 != 6 {
			return f, false
		}
		f.Src = netip.AddrFrom16([16]byte(b[8:24]))
		f.Dst = netip.AddrFrom16([16]byte(b[24:40]))
		nh, off := b[6], ipv6Len
		for i := 0; i < 8 && (nh == protoHopOpts || nh == protoRouting || nh == protoDstOpts); i++ {
			if off+2 > len(b) {
				return f, false
			}
			nh, off = b[off], off+(int(b[off+1])+1)*8
		}
		f.Proto = nh
		if off <= len(b) {
			l4 = b[off:]
		}
	default:
		return f, false
	}
	switch f.Proto {
	case protoTCP, protoUDP, 132:
		if len(l4) >= 4 {
			f.SrcPort = binary.BigEndian.Uint16(l4)
			f.DstPort = binary.BigEndian.Uint16(l4[2:])
		}
	}
	return f, true
}
