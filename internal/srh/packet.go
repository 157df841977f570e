package srh

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// InnerKind classifies what follows the SRH (or the outer IPv6 header when
// there is none).
type InnerKind uint8

// Inner kinds.
const (
	InnerNone      InnerKind = iota // no payload (No Next Header or empty)
	InnerIPv6                       // encap mode, next header 41
	InnerIPv4                       // encap mode, next header 4
	InnerEthernet                   // L2 encap, next header 143
	InnerTransport                  // insert mode or plain packet: TCP, UDP, ICMPv6 or any other protocol
)

func (k InnerKind) String() string {
	switch k {
	case InnerNone:
		return "none"
	case InnerIPv6:
		return "ipv6"
	case InnerIPv4:
		return "ipv4"
	case InnerEthernet:
		return "ethernet"
	case InnerTransport:
		return "transport"
	}
	return fmt.Sprintf("inner(%d)", uint8(k))
}

// KindOf maps a next-header value to the inner kind it announces.
func KindOf(proto uint8) InnerKind {
	switch proto {
	case ProtoIPv6:
		return InnerIPv6
	case ProtoIPv4:
		return InnerIPv4
	case ProtoEthernet:
		return InnerEthernet
	case ProtoNoNext:
		return InnerNone
	}
	return InnerTransport
}

// ExtHeader is an IPv6 extension header skipped but kept by the decoder
// (Hop-by-Hop or Destination Options). Raw is the whole header, its first
// octet (the next header) included; the encoder rewrites that octet.
type ExtHeader struct {
	Proto uint8 // this header's own protocol number (0 or 60)
	Raw   []byte
}

// Packet is a decoded IPv6 packet with an optional SRH. Slices alias the
// decoded buffer.
type Packet struct {
	TrafficClass uint8
	FlowLabel    uint32
	PayloadLen   uint16
	NextHeader   uint8 // next header of the fixed IPv6 header
	HopLimit     uint8
	Src, Dst     netip.Addr

	// ExtHeaders are the Hop-by-Hop / Destination Options headers found
	// before the SRH; PostExtHeaders the Destination Options after it.
	ExtHeaders     []ExtHeader
	PostExtHeaders []ExtHeader

	SRH       *SRH // nil when the packet has no routing header
	SRHOffset int  // offset of the SRH from the start of the IPv6 header

	InnerKind   InnerKind
	InnerProto  uint8 // protocol number of the inner part (41, 4, 143, 6, 17, 58...)
	InnerOffset int   // offset of Inner from the start of the IPv6 header
	Inner       []byte

	// Trailer holds octets captured after the IPv6 payload (link padding);
	// it is not part of the packet and is not re-encoded.
	Trailer []byte

	srh SRH // storage reused by DecodeInto
}

// DecodePacket decodes an IPv6 packet starting at its fixed header.
func DecodePacket(b []byte) (*Packet, error) {
	p := &Packet{}
	if err := p.DecodeInto(b); err != nil {
		return nil, err
	}
	return p, nil
}

// DecodeInto decodes b into p, reusing p's storage: a loop decoding many
// packets into one Packet allocates nothing once warmed up. On error p
// holds what was decoded before the error.
func (p *Packet) DecodeInto(b []byte) error {
	p.ExtHeaders = p.ExtHeaders[:0]
	p.PostExtHeaders = p.PostExtHeaders[:0]
	p.SRH, p.SRHOffset = nil, 0
	p.InnerKind, p.InnerProto, p.InnerOffset, p.Inner, p.Trailer = InnerNone, 0, 0, nil, nil
	if len(b) < 40 {
		return perr(len(b), ErrTruncated, "ipv6 header needs 40 octets, have %d", len(b))
	}
	if b[0]>>4 != 6 {
		return perr(0, ErrVersion, "ip version %d", b[0]>>4)
	}
	vtf := binary.BigEndian.Uint32(b[0:4])
	p.TrafficClass = uint8(vtf >> 20)
	p.FlowLabel = vtf & 0xfffff
	p.PayloadLen = binary.BigEndian.Uint16(b[4:6])
	p.NextHeader = b[6]
	p.HopLimit = b[7]
	p.Src = netip.AddrFrom16([16]byte(b[8:24]))
	p.Dst = netip.AddrFrom16([16]byte(b[24:40]))
	end := 40 + int(p.PayloadLen)
	// A payload shorter than announced is reported, but the headers
	// present are still decoded (for dissectors), and that is the error
	// returned whatever else is found.
	var short error
	if end > len(b) {
		short = perr(len(b), ErrTruncated, "payload length %d, have %d octets of payload", p.PayloadLen, len(b)-40)
		end = len(b)
	}
	fail := func(err error) error {
		if short != nil {
			return short
		}
		return err
	}
	p.Trailer = b[end:]
	b = b[:end]

	off, nh := 40, p.NextHeader
	for {
		switch nh {
		case ProtoHopByHop, ProtoDstOpts:
			if nh == ProtoHopByHop && off != 40 {
				return fail(perr(off, ErrExtHeader, "hop-by-hop header not first"))
			}
			if off+2 > len(b) {
				return fail(perr(len(b), ErrTruncated, "extension header %d at %d", nh, off))
			}
			l := (int(b[off+1]) + 1) * 8
			if off+l > len(b) {
				return fail(perr(len(b), ErrTruncated, "extension header %d of %d octets at %d", nh, l, off))
			}
			h := ExtHeader{Proto: nh, Raw: b[off : off+l : off+l]}
			if p.SRH == nil {
				p.ExtHeaders = append(p.ExtHeaders, h)
			} else {
				p.PostExtHeaders = append(p.PostExtHeaders, h)
			}
			nh = b[off]
			off += l
			continue
		case ProtoRouting:
			if p.SRH != nil {
				return fail(perr(off, ErrExtHeader, "second routing header"))
			}
			if len(p.PostExtHeaders) > 0 {
				return fail(perr(off, ErrExtHeader, "routing header after destination options"))
			}
			p.srh.Segments, p.srh.TLVs = p.srh.Segments[:0], p.srh.TLVs[:0]
			if err := p.srh.decode(b[off:], off); err != nil {
				if off+8 <= len(b) {
					// What could be read, for dissectors: SRH is
					// set on error only here, and Segments may be
					// fewer than LastEntry + 1.
					p.SRH, p.SRHOffset = &p.srh, off
				}
				return fail(err)
			}
			p.SRH, p.SRHOffset = &p.srh, off
			nh = p.srh.NextHeader
			off += (int(p.srh.HdrExtLen) + 1) * 8
			continue
		}
		break
	}
	p.InnerProto, p.InnerOffset, p.Inner = nh, off, b[off:]
	p.InnerKind = KindOf(nh)
	if nh == ProtoNoNext && off < len(b) {
		p.InnerKind = InnerTransport // octets after No Next Header: keep them visible
	}
	return short
}

// FinalDestination returns the packet's final destination: Segment List[0]
// when there is an SRH, the destination address otherwise.
func (p *Packet) FinalDestination() netip.Addr {
	if p.SRH != nil && len(p.SRH.Segments) > 0 {
		return p.SRH.Segments[0]
	}
	return p.Dst
}

// Path returns the SR policy in visiting order. For a reduced SRH whose
// active segment is not in the list (SegmentsLeft = LastEntry+1) the
// destination address is prepended; without an SRH it is just [Dst].
func (p *Packet) Path() []netip.Addr {
	if p.SRH == nil {
		return []netip.Addr{p.Dst}
	}
	path := p.SRH.Path()
	if p.SRH.Reduced() {
		path = append([]netip.Addr{p.Dst}, path...)
	}
	return path
}

// Len returns the size of the encoded packet (without Trailer).
func (p *Packet) Len() int {
	n := 40 + len(p.Inner)
	for _, h := range p.ExtHeaders {
		n += len(h.Raw)
	}
	for _, h := range p.PostExtHeaders {
		n += len(h.Raw)
	}
	if p.SRH != nil {
		n += p.SRH.Len()
	}
	return n
}

// MarshalBinary encodes the packet. The next-header chain (fixed header,
// extension headers, SRH) is recomputed from the parts and InnerProto, and
// the payload length from their sizes; every other field is written as
// stored. A decoded packet re-encodes byte-exact (its Trailer excluded).
func (p *Packet) MarshalBinary() ([]byte, error) {
	return p.AppendBinary(make([]byte, 0, p.Len()))
}

// AppendBinary appends the encoded packet to b (see MarshalBinary).
func (p *Packet) AppendBinary(b []byte) ([]byte, error) {
	if !p.Src.Is6() || !p.Dst.Is6() {
		return b, fmt.Errorf("srh: marshal packet: addresses %v > %v must be IPv6: %w", p.Src, p.Dst, ErrInvalid)
	}
	plen := p.Len() - 40
	if plen > 0xffff {
		return b, fmt.Errorf("srh: marshal packet: payload of %d octets: %w", plen, ErrPayloadLen)
	}
	for _, h := range append(p.ExtHeaders[:len(p.ExtHeaders):len(p.ExtHeaders)], p.PostExtHeaders...) {
		if len(h.Raw) < 8 || len(h.Raw) != (int(h.Raw[1])+1)*8 {
			return b, fmt.Errorf("srh: marshal packet: extension header %d of %d octets: %w", h.Proto, len(h.Raw), ErrInvalid)
		}
	}
	if p.SRH == nil && len(p.PostExtHeaders) > 0 {
		return b, fmt.Errorf("srh: marshal packet: destination options after a missing srh: %w", ErrInvalid)
	}
	// Protocol numbers in chain order: ext..., [routing, post ext...], inner.
	chain := make([]uint8, 0, len(p.ExtHeaders)+len(p.PostExtHeaders)+2)
	for _, h := range p.ExtHeaders {
		chain = append(chain, h.Proto)
	}
	if p.SRH != nil {
		chain = append(chain, ProtoRouting)
		for _, h := range p.PostExtHeaders {
			chain = append(chain, h.Proto)
		}
	}
	chain = append(chain, p.InnerProto)

	start := len(b)
	b = append(b, make([]byte, 40)...)
	hdr := b[start:]
	binary.BigEndian.PutUint32(hdr[0:4], 6<<28|uint32(p.TrafficClass)<<20|p.FlowLabel&0xfffff)
	binary.BigEndian.PutUint16(hdr[4:6], uint16(plen))
	hdr[6], hdr[7] = chain[0], p.HopLimit
	a, d := p.Src.As16(), p.Dst.As16()
	copy(hdr[8:24], a[:])
	copy(hdr[24:40], d[:])
	i := 1
	for _, h := range p.ExtHeaders {
		b = append(b, chain[i])
		b = append(b, h.Raw[1:]...)
		i++
	}
	if p.SRH != nil {
		s := *p.SRH
		s.NextHeader = chain[i]
		i++
		var err error
		if b, err = s.AppendBinary(b); err != nil {
			return b, fmt.Errorf("srh: marshal packet: %w", err)
		}
		for _, h := range p.PostExtHeaders {
			b = append(b, chain[i])
			b = append(b, h.Raw[1:]...)
			i++
		}
	}
	return append(b, p.Inner...), nil
}
