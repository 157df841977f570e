package perf

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/segchain/segchain/internal/srh"
)

// Protocol numbers and EtherTypes used by the templates.
const (
	protoIPv4     = 4
	protoUDP      = 17
	protoIPv6     = 41
	protoEthernet = 143 // RFC 8986: Ethernet as next header
	etherIPv4     = 0x0800
	etherIPv6     = 0x86dd
	udpSport      = 4000
	udpDport      = 5000
)

// udp builds a UDP header + zero payload; the checksum is filled in by the
// IP layer builder.
func udp(payload int) []byte {
	b := make([]byte, 8+payload)
	binary.BigEndian.PutUint16(b[0:], udpSport)
	binary.BigEndian.PutUint16(b[2:], udpDport)
	binary.BigEndian.PutUint16(b[4:], uint16(8+payload))
	for i := 8; i < len(b); i++ {
		b[i] = byte(i)
	}
	return b
}

func csumFold(sum uint32) uint16 {
	for sum > 0xffff {
		sum = (sum >> 16) + (sum & 0xffff)
	}
	return ^uint16(sum)
}

func csumAdd(sum uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	return sum
}

// UDPChecksum6 sets the UDP checksum for the pseudo header (src, final dst).
func UDPChecksum6(u []byte, src, dst netip.Addr) {
	u[6], u[7] = 0, 0
	s, d := src.As16(), dst.As16()
	var ph [40]byte
	copy(ph[0:], s[:])
	copy(ph[16:], d[:])
	binary.BigEndian.PutUint32(ph[32:], uint32(len(u)))
	ph[39] = protoUDP
	c := csumFold(csumAdd(csumAdd(0, ph[:]), u))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
}

// ipv6 builds an IPv6 header in front of payload.
func ipv6(src, dst netip.Addr, next byte, payload []byte) []byte {
	b := make([]byte, 40+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6] = next
	b[7] = 64
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	copy(b[40:], payload)
	return b
}

// ipv4 builds an IPv4 header (with checksum) in front of payload.
func ipv4(src, dst netip.Addr, proto byte, payload []byte) []byte {
	b := make([]byte, 20+len(payload))
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	b[6] = 0x40 // DF
	b[8] = 64
	b[9] = proto
	s, d := src.As4(), dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint16(b[10:], csumFold(csumAdd(0, b[:20])))
	copy(b[20:], payload)
	return b
}

// ether prepends an Ethernet header.
func ether(dst, src net.HardwareAddr, typ uint16, payload []byte) []byte {
	b := make([]byte, 14+len(payload))
	copy(b[0:], dst)
	copy(b[6:], src)
	binary.BigEndian.PutUint16(b[12:], typ)
	copy(b[14:], payload)
	return b
}

// Inner packet sizes: Size is the size of the innermost IP packet, as in
// the thesis (64 B = IPv6 40 + UDP 8 + 16 B payload).
func plain6(src, dst netip.Addr, size int) ([]byte, error) {
	if size < 48 {
		return nil, fmt.Errorf("IPv6 packet size %d < 48", size)
	}
	u := udp(size - 48)
	UDPChecksum6(u, src, dst)
	return ipv6(src, dst, protoUDP, u), nil
}

func plain4(src, dst netip.Addr, size int) ([]byte, error) {
	if size < 28 {
		return nil, fmt.Errorf("IPv4 packet size %d < 28", size)
	}
	// A zero UDP checksum is legal over IPv4.
	return ipv4(src, dst, protoUDP, udp(size-28)), nil
}

// encap6 wraps inner (next header nh) in an outer IPv6 header and an SRH
// carrying path (visiting order) with Segments Left sl: the destination is
// the active segment path[len(path)-1-sl]. Built by internal/srh.
func encap6(src netip.Addr, path []netip.Addr, sl int, nh byte, inner []byte) ([]byte, error) {
	if sl < 0 || sl >= len(path) {
		return nil, fmt.Errorf("segments left %d outside a %d-segment path", sl, len(path))
	}
	h := srh.NewPath(path...)
	h.SegmentsLeft = uint8(sl)
	p := &srh.Packet{
		HopLimit: 64, Src: src, Dst: path[len(path)-1-sl], SRH: h,
		InnerKind: srh.KindOf(nh), InnerProto: nh, Inner: inner,
	}
	b, err := p.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("build srv6 template: %w", err)
	}
	return b, nil
}

func netipToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
