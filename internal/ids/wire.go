package ids

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/segchain/segchain/internal/srh"
)

// ErrNotInspectable is returned by FromWire for packets whose inner part is
// not an IP packet (an Ethernet frame of End.DX2, or no payload).
var ErrNotInspectable = errors.New("inner part is not an IP packet")

// FromWire fills p from a packet as it reaches the SID on the wire, from
// its IP header: an IPv6 packet with an SRH and an inner IPv4/IPv6 packet
// (encap mode), an IPv6 packet with an SRH and a transport payload (insert
// mode: the inspected packet is rebuilt without the SRH, destined to the
// last segment), or a plain IPv4/IPv6 packet (inspected as it is, no SR
// metadata). argsBits is the length of the SID's ARGS field (the low bits
// of the active segment; 0 for none, at most 64). Offline (pcap) readers
// use it; a SID-bound service gets these fields from its library instead.
// p's slices alias b, except in insert mode.
func FromWire(b []byte, p *Packet, argsBits int) error {
	*p = Packet{Time: p.Time}
	if argsBits < 0 || argsBits > 64 {
		return fmt.Errorf("args bits %d out of [0, 64]", argsBits)
	}
	if len(b) > 0 && b[0]>>4 == 4 {
		p.Inner = b
		return nil
	}
	d, err := srh.DecodePacket(b)
	if err != nil {
		return err
	}
	if d.SRH == nil {
		p.Inner = b[:40+int(d.PayloadLen)]
		return nil
	}
	p.OuterSrc, p.OuterDst = d.Src, d.Dst
	p.Segments = d.SRH.Segments
	p.SL = int(d.SRH.SegmentsLeft)
	p.Tag = d.SRH.Tag
	if argsBits > 0 {
		a := d.Dst.As16()
		v := binary.BigEndian.Uint64(a[8:])
		if argsBits < 64 {
			v &= 1<<argsBits - 1
		}
		p.Args = v
	}
	switch d.InnerKind {
	case srh.InnerIPv6, srh.InnerIPv4:
		p.Inner = d.Inner
	case srh.InnerTransport:
		if len(p.Segments) == 0 {
			return ErrNotInspectable
		}
		p.Inner = AppendInsertInner(nil, b[:40], p.Segments[0], d.InnerProto, d.Inner)
	default:
		return fmt.Errorf("%w (%s)", ErrNotInspectable, d.InnerKind)
	}
	return nil
}

// AppendInsertInner appends to dst the packet an insert-mode SRv6 packet
// carries: its outer IPv6 header hdr (40 bytes) with the SRH removed —
// next header proto, payload length len(payload), destination the last
// segment final — followed by payload (the transport header and data
// after the SRH). A service reusing dst across packets allocates nothing.
func AppendInsertInner(dst, hdr []byte, final netip.Addr, proto uint8, payload []byte) []byte {
	start := len(dst)
	dst = append(dst, hdr[:40]...)
	h := dst[start:]
	binary.BigEndian.PutUint16(h[4:6], uint16(len(payload)))
	h[6] = proto
	f := final.As16()
	copy(h[24:40], f[:])
	return append(dst, payload...)
}
