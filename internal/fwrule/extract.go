package fwrule

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Reasons Extract rejects a packet; errors.Is(err, ErrTruncated) etc.
// tells them apart. The data path drops such packets and counts them by
// the same reason.
var (
	ErrTruncated  = errors.New("truncated")
	ErrNotIPv6    = errors.New("not-ipv6")
	ErrBadSRH     = errors.New("bad-srh")
	ErrBadInner   = errors.New("bad-inner")
	ErrBadExtHdr  = errors.New("bad-ext-hdr")
	ErrTooManyExt = errors.New("too-many-ext-hdrs")
)

// PacketError is a malformed packet: Reason is one of the Err* values,
// Offset the byte offset of the offending header.
type PacketError struct {
	Reason error
	Offset int
	Detail string
}

func (e *PacketError) Error() string {
	return fmt.Sprintf("%v at offset %d: %s", e.Reason, e.Offset, e.Detail)
}

func (e *PacketError) Unwrap() error { return e.Reason }

func bad(reason error, off int, format string, a ...any) error {
	return &PacketError{Reason: reason, Offset: off, Detail: fmt.Sprintf(format, a...)}
}

// MaxExtHeaders, the bound of the extension-header walk, is the eBPF
// parser's (generated from bpf/lib/ipv6.h into ipv6_bpfconst.go).

const (
	nhHopByHop = 0
	nhRouting  = 43
	nhFragment = 44
	nhAH       = 51
	nhDestOpts = 60
	srhType    = 4
)

// Extract reads what the classifier needs from pkt, an IPv6 packet starting
// at the IPv6 header. It walks hop-by-hop, destination options, routing,
// fragment and AH headers (at most MaxExtHeaders in each of the outer and
// inner packet). The first routing header must be an SRH (type 4, SL ≤
// Last Entry, segment list within the header, header within the packet).
// After the SRH: next header 41 or 4 is encap mode (the original is the
// inner IPv6/IPv4 packet); anything else is insert mode (the original is
// the IPv6 source, Segment List[0] and the upper-layer header after the
// SRH, found by walking any further extension headers). A packet whose
// payload length exceeds the buffer is truncated; bytes past it are
// ignored. Upper-layer headers must hold their ports (4 bytes for TCP,
// UDP, SCTP, UDP-Lite) or type and code (4 bytes for ICMP/ICMPv6); a
// non-first fragment has neither.
func Extract(pkt []byte) (Packet, error) {
	var p Packet
	if len(pkt) < 40 {
		return p, bad(ErrTruncated, 0, "IPv6 header needs 40 bytes, have %d", len(pkt))
	}
	if pkt[0]>>4 != 6 {
		return p, bad(ErrNotIPv6, 0, "version %d", pkt[0]>>4)
	}
	plen := int(binary.BigEndian.Uint16(pkt[4:6]))
	if plen != 0 { // 0: jumbogram, the buffer is the packet
		if 40+plen > len(pkt) {
			return p, bad(ErrTruncated, 4, "payload length %d exceeds the %d bytes present", plen, len(pkt)-40)
		}
		pkt = pkt[:40+plen]
	}
	p.OuterSrc = addr16(pkt[8:24])
	p.OuterDst = addr16(pkt[24:40])
	p.Family = IPv6
	p.OrigSrc, p.OrigDst = p.OuterSrc, p.OuterDst

	nh, off := pkt[6], 40
	for n := 0; ; n++ {
		if !isExt(nh) {
			break
		}
		if n >= MaxExtHeaders {
			return p, bad(ErrTooManyExt, off, "more than %d extension headers", MaxExtHeaders)
		}
		if nh == nhRouting && !p.HasSRH {
			next, end, err := srh(pkt, off, &p)
			if err != nil {
				return p, err
			}
			off = end
			if next == ProtoIPv6 || next == ProtoIPv4 {
				return p, inner(pkt, off, next, &p)
			}
			p.OrigDst = p.LSID
			nh = next
			continue
		}
		next, end, frag, err := ext(pkt, off, nh)
		if err != nil {
			return p, err
		}
		if frag {
			p.Proto = next
			return p, nil
		}
		nh, off = next, end
	}
	return p, upper(pkt, off, nh, &p)
}

func addr16(b []byte) netip.Addr { return netip.AddrFrom16([16]byte(b)) }

func isExt(nh uint8) bool {
	switch nh {
	case nhHopByHop, nhRouting, nhFragment, nhAH, nhDestOpts:
		return true
	}
	return false
}

// ext skips one generic extension header at off. frag is true for a
// non-first fragment (the rest of the packet is not parseable).
func ext(pkt []byte, off int, nh uint8) (next uint8, end int, frag bool, err error) {
	if off+8 > len(pkt) {
		return 0, 0, false, bad(ErrTruncated, off, "extension header %d needs 8 bytes", nh)
	}
	next = pkt[off]
	switch nh {
	case nhFragment:
		if binary.BigEndian.Uint16(pkt[off+2:off+4])&^7 != 0 {
			return next, 0, true, nil
		}
		end = off + 8
	case nhAH:
		end = off + (int(pkt[off+1])+2)*4
	default:
		end = off + (int(pkt[off+1])+1)*8
	}
	if end > len(pkt) {
		return 0, 0, false, bad(ErrTruncated, off, "extension header %d of %d bytes, have %d", nh, end-off, len(pkt)-off)
	}
	return next, end, false, nil
}

// srh validates the SRH at off and fills p's SRH fields.
func srh(pkt []byte, off int, p *Packet) (next uint8, end int, err error) {
	if off+8 > len(pkt) {
		return 0, 0, bad(ErrTruncated, off, "SRH needs 8 bytes")
	}
	h := pkt[off:]
	end = off + (int(h[1])+1)*8
	if end > len(pkt) {
		return 0, 0, bad(ErrTruncated, off, "SRH of %d bytes, have %d", end-off, len(pkt)-off)
	}
	if h[2] != srhType {
		return 0, 0, bad(ErrBadSRH, off, "routing type %d, want 4", h[2])
	}
	sl, last := h[3], h[4]
	if (int(last)+1)*16 > int(h[1])*8 {
		return 0, 0, bad(ErrBadSRH, off, "segment list of %d entries longer than the header (hdr ext len %d)", int(last)+1, h[1])
	}
	if sl > last {
		return 0, 0, bad(ErrBadSRH, off, "segments left %d > last entry %d", sl, last)
	}
	seg := func(i int) netip.Addr { return addr16(h[8+16*i : 24+16*i]) }
	p.HasSRH = true
	p.NextHdr, p.HdrLen, p.SegsLeft, p.LastEntry = h[0], h[1], sl, last
	p.Tag = binary.BigEndian.Uint16(h[6:8])
	p.LSID = seg(0)
	if sl < last {
		p.PSID = seg(int(sl) + 1)
	}
	if sl > 0 {
		p.NSID = seg(int(sl) - 1)
	}
	return h[0], end, nil
}

// inner reads the encapsulated original packet.
func inner(pkt []byte, off int, proto uint8, p *Packet) error {
	b := pkt[off:]
	wantVer := uint8(6)
	if proto == ProtoIPv4 {
		wantVer = 4
	}
	if len(b) > 0 && b[0]>>4 != wantVer {
		return bad(ErrBadInner, off, "next header %d but IP version %d", proto, b[0]>>4)
	}
	if proto == ProtoIPv4 {
		if len(b) < 20 {
			return bad(ErrTruncated, off, "inner IPv4 header needs 20 bytes, have %d", len(b))
		}
		ihl := int(b[0]&0xf) * 4
		if ihl < 20 {
			return bad(ErrBadInner, off, "IPv4 header length %d", ihl)
		}
		tot := int(binary.BigEndian.Uint16(b[2:4]))
		if tot < ihl || tot > len(b) {
			return bad(ErrTruncated, off, "inner IPv4 total length %d, header %d, have %d", tot, ihl, len(b))
		}
		p.Family = IPv4
		p.OrigSrc = netip.AddrFrom4([4]byte(b[12:16]))
		p.OrigDst = netip.AddrFrom4([4]byte(b[16:20]))
		p.Proto = b[9]
		if binary.BigEndian.Uint16(b[6:8])&0x1fff != 0 { // non-first fragment
			return nil
		}
		return upper(pkt[:off+tot], off+ihl, b[9], p)
	}
	if len(b) < 40 {
		return bad(ErrTruncated, off, "inner IPv6 header needs 40 bytes, have %d", len(b))
	}
	plen := int(binary.BigEndian.Uint16(b[4:6]))
	if 40+plen > len(b) {
		return bad(ErrTruncated, off+4, "inner payload length %d exceeds the %d bytes present", plen, len(b)-40)
	}
	if plen != 0 {
		pkt = pkt[:off+40+plen]
	}
	p.Family = IPv6
	p.OrigSrc = addr16(b[8:24])
	p.OrigDst = addr16(b[24:40])
	nh, o := b[6], off+40
	for n := 0; isExt(nh); n++ {
		if n >= MaxExtHeaders {
			return bad(ErrTooManyExt, o, "more than %d inner extension headers", MaxExtHeaders)
		}
		next, end, frag, err := ext(pkt, o, nh)
		if err != nil {
			return err
		}
		if frag {
			p.Proto = next
			return nil
		}
		nh, o = next, end
	}
	return upper(pkt, o, nh, p)
}

// upper reads the upper-layer header of protocol proto at off.
func upper(pkt []byte, off int, proto uint8, p *Packet) error {
	p.Proto = proto
	icmp := (p.Family == IPv6 && proto == ProtoICMPv6) || (p.Family == IPv4 && proto == ProtoICMP)
	if !hasPorts(proto) && !icmp {
		return nil
	}
	if off+4 > len(pkt) {
		return bad(ErrTruncated, off, "protocol %d header needs 4 bytes, have %d", proto, len(pkt)-off)
	}
	if icmp {
		p.HasICMP, p.ICMPType, p.ICMPCode = true, pkt[off], pkt[off+1]
		return nil
	}
	p.HasPorts = true
	p.SPort = binary.BigEndian.Uint16(pkt[off : off+2])
	p.DPort = binary.BigEndian.Uint16(pkt[off+2 : off+4])
	return nil
}
