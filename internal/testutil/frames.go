package testutil

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Frame builders for eBPF fixture tests: every byte written out by hand, so
// the expected packets do not come from the codec under test (internal/srh).

// Eth is an Ethernet frame.
func Eth(dst, src net.HardwareAddr, etherType uint16, payload []byte) []byte {
	b := append(append([]byte{}, dst...), src...)
	b = binary.BigEndian.AppendUint16(b, etherType)
	return append(b, payload...)
}

// IPv6 is an IPv6 header (next header nh, hop limit hlim) + payload.
func IPv6(src, dst netip.Addr, nh, hlim uint8, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6], b[7] = nh, hlim
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, payload...)
}

// SRH is a segment routing header (list = Segment List[0..n-1], list[0]
// the last segment) with optional TLVs (a multiple of 8 bytes with the
// list), then payload.
func SRH(nh uint8, list []netip.Addr, sl uint8, tag uint16, tlv, payload []byte) []byte {
	b := make([]byte, 8)
	b[0] = nh
	b[1] = uint8((16*len(list) + len(tlv)) / 8)
	b[2], b[3], b[4] = 4, sl, uint8(len(list)-1)
	binary.BigEndian.PutUint16(b[6:], tag)
	for _, a := range list {
		x := a.As16()
		b = append(b, x[:]...)
	}
	b = append(b, tlv...)
	return append(b, payload...)
}

// IPv4 is an IPv4 header (TTL 64, DF when df) with its checksum + payload.
func IPv4(src, dst string, proto uint8, df bool, payload []byte) []byte {
	b := make([]byte, 20)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(20+len(payload)))
	if df {
		b[6] = 0x40
	}
	b[8], b[9] = 64, proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint16(b[10:], Checksum(b))
	return append(b, payload...)
}

// Checksum is the Internet checksum (RFC 1071) of the concatenated parts;
// an odd-length total is padded with a zero byte.
func Checksum(parts ...[]byte) uint16 {
	var s uint64
	var odd bool
	var hi byte
	for _, p := range parts {
		for _, c := range p {
			if odd {
				s += uint64(hi)<<8 | uint64(c)
			} else {
				hi = c
			}
			odd = !odd
		}
	}
	if odd {
		s += uint64(hi) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// ICMP6Error is the ICMPv6 error (RFC 4443) that from owes the source of
// pkt (an IPv6 packet): type, code, the 32-bit info word, and as much of
// pkt as fits in the minimum MTU (1232 bytes).
func ICMP6Error(from netip.Addr, pkt []byte, typ, code uint8, info uint32) []byte {
	q := min(len(pkt), 1280-40-8)
	to := netip.AddrFrom16([16]byte(pkt[8:24]))
	msg := []byte{typ, code, 0, 0}
	msg = binary.BigEndian.AppendUint32(msg, info)
	msg = append(msg, pkt[:q]...)
	s, d := from.As16(), to.As16()
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, 0, byte(len(msg)>>8), byte(len(msg)), 0, 0, 0, 58)
	binary.BigEndian.PutUint16(msg[2:], Checksum(pseudo, msg))
	return IPv6(from, to, 58, 64, msg)
}
