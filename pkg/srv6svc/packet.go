package srv6svc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

const (
	ethLen      = 14
	ipv6Len     = 40
	srhFixedLen = 8

	protoHopOpts  = 0
	protoIPv4     = 4
	protoTCP      = 6
	protoUDP      = 17
	protoIPv6     = 41
	protoRouting  = 43
	protoICMPv6   = 58
	protoDstOpts  = 60
	protoEthernet = 143
)

// Verdict is what a handler answers for a packet.
type Verdict uint8

const (
	// Forward applies End: Segments Left − 1, destination ← the next
	// segment; the packet (with any change the handler made) continues.
	Forward Verdict = iota
	// Drop drops the packet (counted as dropped by verdict).
	Drop
	// SkipNext skips the next segment: Segments Left − 2, destination ←
	// the segment after next. A packet with Segments Left < 2 is dropped
	// (counted as a bad verdict).
	SkipNext
	// GoLast jumps to the last segment: Segments Left ← 0, destination ←
	// Segment List[0].
	GoLast
)

func (v Verdict) String() string {
	switch v {
	case Forward:
		return "forward"
	case Drop:
		return "drop"
	case SkipNext:
		return "skip-next"
	case GoLast:
		return "go-last"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// IPv6Header is the outer IPv6 header of a received packet.
type IPv6Header struct {
	TrafficClass uint8
	FlowLabel    uint32
	PayloadLen   uint16
	NextHeader   uint8
	HopLimit     uint8
	Src, Dst     netip.Addr
}

// SRH holds the fixed fields of the Segment Routing Header (RFC 8754).
// Segments are read with Packet.Segment / Packet.Segments.
type SRH struct {
	NextHeader   uint8
	HdrExtLen    uint8
	RoutingType  uint8
	SegmentsLeft uint8
	LastEntry    uint8
	Flags        uint8
	Tag          uint16
}

// TLV is one SRH TLV (RFC 8754 §2.1), padding included.
type TLV struct {
	Type  uint8
	Value []byte // a view into the packet: copy it to keep it
}

// Packet is one received packet whose active segment is a bound SID. Its
// byte slices are views into the shared UMEM frame: they are valid only
// until the handler returns (copy what you keep).
type Packet struct {
	// Outer is the outer IPv6 header; Outer.Dst is the active SID.
	Outer IPv6Header
	// SRH is the Segment Routing Header's fixed part.
	SRH SRH
	// Bound is the SID (prefix) of the binding that matched Outer.Dst.
	Bound netip.Prefix
	// Queue is the receive queue (worker) that got the packet.
	Queue int

	w        *worker
	buf      []byte // ethernet frame, capacity to the end of its chunk
	chunk    uint64
	addr     uint64 // UMEM offset of buf[0]
	srhOff   int    // offset of the SRH in buf
	innerOff int
	modified bool
	segs     bool // SetNextSegments was used
}

// Errors a handler may get from Packet's mutators.
var (
	ErrTooLong      = errors.New("packet would not fit its frame")
	ErrNotEncap     = errors.New("inner packet is not IPv4 or IPv6 (encapsulation mode required)")
	ErrBadInner     = errors.New("inner packet malformed")
	ErrNotSupported = errors.New("not supported by this kernel or interface")
)

// parse fills p from buf; it reports why a packet is malformed.
func (p *Packet) parse(buf []byte) error {
	if len(buf) < ethLen+ipv6Len || binary.BigEndian.Uint16(buf[12:]) != 0x86dd {
		return errors.New("not IPv6")
	}
	ip := buf[ethLen:]
	if ip[0]>>4 != 6 {
		return errors.New("not IPv6")
	}
	plen := int(binary.BigEndian.Uint16(ip[4:]))
	if ethLen+ipv6Len+plen > len(buf) {
		return errors.New("truncated (payload length)")
	}
	buf = buf[:ethLen+ipv6Len+plen] // drop link-layer padding
	p.buf = buf
	p.Outer = IPv6Header{
		TrafficClass: ip[0]<<4 | ip[1]>>4,
		FlowLabel:    binary.BigEndian.Uint32(ip[0:]) & 0xfffff,
		PayloadLen:   uint16(plen),
		NextHeader:   ip[6],
		HopLimit:     ip[7],
		Src:          netip.AddrFrom16([16]byte(ip[8:24])),
		Dst:          netip.AddrFrom16([16]byte(ip[24:40])),
	}
	off, nh := ethLen+ipv6Len, ip[6]
	for i := 0; nh == protoHopOpts || nh == protoDstOpts; i++ {
		if i >= 2 || off+2 > len(buf) {
			return errors.New("extension headers")
		}
		nh, off = buf[off], off+(int(buf[off+1])+1)*8
	}
	if nh != protoRouting || off+srhFixedLen > len(buf) {
		return errors.New("no SRH")
	}
	s := buf[off:]
	p.SRH = SRH{NextHeader: s[0], HdrExtLen: s[1], RoutingType: s[2], SegmentsLeft: s[3],
		LastEntry: s[4], Flags: s[5], Tag: binary.BigEndian.Uint16(s[6:])}
	l := (int(s[1]) + 1) * 8
	switch {
	case s[2] != 4:
		return errors.New("routing type is not 4")
	case off+l > len(buf):
		return errors.New("SRH truncated")
	case (int(s[4])+1)*16 > l-srhFixedLen:
		return errors.New("segment list exceeds the SRH")
	case s[3] > s[4]:
		return errors.New("segments left > last entry")
	case s[3] == 0:
		return errors.New("segments left is 0")
	}
	p.srhOff, p.innerOff = off, off+l
	p.modified, p.segs = false, false
	return nil
}

// Segment returns Segment List[i] (Segment List[0] is the last segment).
func (p *Packet) Segment(i int) netip.Addr {
	if i < 0 || i > int(p.SRH.LastEntry) {
		return netip.Addr{}
	}
	o := p.srhOff + srhFixedLen + 16*i
	return netip.AddrFrom16([16]byte(p.buf[o : o+16]))
}

// Segments returns the segment list in wire order (Segments()[0] is the
// last segment, Segments()[SegmentsLeft] the active one).
func (p *Packet) Segments() []netip.Addr {
	return p.AppendSegments(make([]netip.Addr, 0, int(p.SRH.LastEntry)+1))
}

// AppendSegments appends the segment list (wire order) to dst: with a
// buffer reused per worker, reading the list allocates nothing.
func (p *Packet) AppendSegments(dst []netip.Addr) []netip.Addr {
	for i := 0; i <= int(p.SRH.LastEntry); i++ {
		dst = append(dst, p.Segment(i))
	}
	return dst
}

// TLVs returns the SRH's TLVs (after the segment list), padding included.
// A malformed TLV area ends the list.
func (p *Packet) TLVs() []TLV {
	b := p.buf[p.srhOff+srhFixedLen+16*(int(p.SRH.LastEntry)+1) : p.innerOff]
	var out []TLV
	for len(b) > 0 {
		if b[0] == 0 { // Pad1
			out = append(out, TLV{Type: 0})
			b = b[1:]
			continue
		}
		if len(b) < 2 || 2+int(b[1]) > len(b) {
			break
		}
		out = append(out, TLV{Type: b[0], Value: b[2 : 2+int(b[1])]})
		b = b[2+int(b[1]):]
	}
	return out
}

// Args returns the ARGS bits of the active SID: the low 128 − Bound.Bits()
// bits of Outer.Dst (the low 64 of them when there are more).
func (p *Packet) Args() uint64 {
	bits := 128 - p.Bound.Bits()
	if bits <= 0 {
		return 0
	}
	a := p.Outer.Dst.As16()
	v := binary.BigEndian.Uint64(a[8:])
	if bits < 64 {
		v &= 1<<bits - 1
	}
	return v
}

// Inner returns the inner packet: everything after the SRH. It is a view
// into the shared frame; a handler may edit it in place (then call
// InnerModified) or replace it with SetInner.
func (p *Packet) Inner() []byte { return p.buf[p.innerOff:] }

// InnerProto is the protocol of the inner packet: the SRH's Next Header
// (4 IPv4, 41 IPv6, 143 Ethernet; a transport protocol in insert mode).
func (p *Packet) InnerProto() uint8 { return p.SRH.NextHeader }

// Frame returns the whole received frame (Ethernet header first).
func (p *Packet) Frame() []byte { return p.buf }

// InnerModified tells the library the handler edited Inner in place: it
// fixes the inner packet's lengths and IPv4 header, TCP, UDP and ICMPv6
// checksums before the packet leaves.
func (p *Packet) InnerModified() { p.modified = true }

// SetInner replaces the inner packet by b (any length that fits the frame:
// 4096 bytes minus the headers). The outer payload length is adjusted; the
// inner lengths and checksums are fixed as for InnerModified. Only
// encapsulated IPv4/IPv6 inner packets can be replaced.
func (p *Packet) SetInner(b []byte) error {
	if nh := p.SRH.NextHeader; nh != protoIPv4 && nh != protoIPv6 {
		return ErrNotEncap
	}
	end := p.innerOff + len(b)
	if end > cap(p.buf) {
		return ErrTooLong
	}
	p.buf = p.buf[:end]
	copy(p.buf[p.innerOff:], b)
	p.modified = true
	return nil
}

// SetNextSegments replaces the segments still to visit after the active
// one: the packet will go to next[0], then next[1], ... The visited and
// active segments stay; TLVs are kept (an HMAC TLV no longer matches). The
// verdict then applies to the new list (Forward: destination ← next[0]).
func (p *Packet) SetNextSegments(next ...netip.Addr) error {
	if len(next) == 0 {
		return errors.New("no next segment")
	}
	sl, last := int(p.SRH.SegmentsLeft), int(p.SRH.LastEntry)
	keep := last - sl + 1 // active and visited segments
	if len(next)+keep > 128 {
		return ErrTooLong
	}
	oldSegs := p.srhOff + srhFixedLen
	tlvs := p.buf[oldSegs+16*(last+1) : p.innerOff]
	newLen := srhFixedLen + 16*(len(next)+keep) + len(tlvs)
	if newLen%8 != 0 || (newLen/8-1) > 255 {
		return ErrTooLong
	}
	// Build the new header block (ethernet .. SRH) in a scratch buffer.
	hdr := make([]byte, 0, p.srhOff+newLen)
	hdr = append(hdr, p.buf[:p.srhOff+srhFixedLen]...)
	for i := len(next) - 1; i >= 0; i-- {
		a := next[i].As16()
		hdr = append(hdr, a[:]...)
	}
	hdr = append(hdr, p.buf[oldSegs+16*sl:oldSegs+16*(last+1)]...)
	hdr = append(hdr, tlvs...)
	s := hdr[p.srhOff:]
	s[1] = uint8(newLen/8 - 1)
	s[3] = uint8(len(next)) // active segment index in the new list
	s[4] = uint8(len(next) + keep - 1)
	// Place it so that it ends where the inner packet starts.
	start := int(p.addr-p.chunk) + p.innerOff - len(hdr) // offset in the chunk
	if start < 0 {
		return ErrTooLong
	}
	abs := p.chunk + uint64(start)
	inner := len(p.buf) - p.innerOff
	nb := p.w.x.umem[abs : abs+uint64(len(hdr)+inner) : p.chunk+frameSize]
	copy(nb, hdr) // does not overlap the inner packet
	p.buf, p.addr = nb, abs
	p.innerOff = len(hdr)
	p.SRH.HdrExtLen, p.SRH.SegmentsLeft, p.SRH.LastEntry = s[1], s[3], s[4]
	p.segs = true
	return nil
}

// apply carries out the verdict on the frame: advances the SRH, writes the
// new destination and the outer payload length, fixes the inner packet if
// it was changed. It returns false when the verdict cannot be applied.
func (p *Packet) apply(v Verdict) bool {
	s := p.buf[p.srhOff:]
	sl := int(s[3])
	switch v {
	case Forward:
		sl--
	case SkipNext:
		sl -= 2
	case GoLast:
		sl = 0
	default:
		return false
	}
	if sl < 0 {
		return false
	}
	s[3] = uint8(sl)
	o := p.srhOff + srhFixedLen + 16*sl
	copy(p.buf[ethLen+24:ethLen+40], p.buf[o:o+16])
	binary.BigEndian.PutUint16(p.buf[ethLen+4:], uint16(len(p.buf)-ethLen-ipv6Len))
	if p.modified {
		if err := fixInner(p.SRH.NextHeader, p.buf[p.innerOff:]); err != nil {
			return false
		}
	} else {
		completePartial(p.SRH.NextHeader, p.buf[p.innerOff:])
	}
	return true
}

// completePartial finishes an inner TCP or UDP checksum left partial by
// the sending host. A host stack hands a veth (checksum offload) a packet
// whose L4 checksum field holds only the folded pseudo-header sum
// (CHECKSUM_PARTIAL: "the device completes it"); the skb carries that state
// through the sender's SRv6 encapsulation and across veths, but a frame
// that reaches an AF_XDP socket (or goes through native XDP) loses it, and
// the packet would reach its destination with an unfinished checksum. So:
// when the field equals the pseudo-header sum and the checksum over the
// packet does not verify, the library completes it. A complete checksum is
// never touched; a corrupted one that happens to equal the pseudo-header
// sum (1 in 65536) gets completed. Cost on every other packet: the
// pseudo-header sum. It reports whether it changed the packet.
func completePartial(proto uint8, b []byte) bool {
	var (
		l4     []byte
		l4p    uint8
		pseudo uint32
	)
	switch proto {
	case protoIPv4:
		if len(b) < 20 || b[0]>>4 != 4 {
			return false
		}
		ihl, tot := int(b[0]&0xf)*4, int(binary.BigEndian.Uint16(b[2:]))
		if ihl < 20 || tot < ihl || tot > len(b) || binary.BigEndian.Uint16(b[6:])&0x3fff != 0 {
			return false // fragments: the checksum covers the whole datagram
		}
		l4, l4p = b[ihl:tot], b[9]
		pseudo = sum(b[12:20], 0) + uint32(l4p) + uint32(len(l4))
	case protoIPv6:
		if len(b) < ipv6Len || b[0]>>4 != 6 {
			return false
		}
		pl := int(binary.BigEndian.Uint16(b[4:]))
		if ipv6Len+pl > len(b) {
			return false
		}
		l4, l4p = b[ipv6Len:ipv6Len+pl], b[6]
		pseudo = sum(b[8:40], 0) + uint32(l4p) + uint32(len(l4))
	default:
		return false
	}
	var at int
	switch {
	case l4p == protoTCP && len(l4) >= 20:
		at = 16
	case l4p == protoUDP && len(l4) >= 8:
		at = 6
	default:
		return false
	}
	if binary.BigEndian.Uint16(l4[at:]) != fold(pseudo) || fold(sum(l4, pseudo)) == 0xffff {
		return false
	}
	l4[at], l4[at+1] = 0, 0
	c := ^fold(sum(l4, pseudo))
	if c == 0 && l4p == protoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[at:], c)
	return true
}

// fixInner sets the lengths and checksums of an inner IPv4 or IPv6 packet
// (IPv4 header checksum; TCP, UDP, ICMPv6 when they follow the IP header
// directly and the packet is not a fragment).
func fixInner(proto uint8, b []byte) error {
	switch proto {
	case protoIPv4:
		if len(b) < 20 || b[0]>>4 != 4 {
			return ErrBadInner
		}
		ihl := int(b[0]&0xf) * 4
		if ihl < 20 || ihl > len(b) {
			return ErrBadInner
		}
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		b[10], b[11] = 0, 0
		binary.BigEndian.PutUint16(b[10:], ^fold(sum(b[:ihl], 0)))
		if frag := binary.BigEndian.Uint16(b[6:]); frag&0x3fff != 0 {
			return nil
		}
		l4 := b[ihl:]
		ph := sum(b[12:20], 0) + uint32(b[9]) + uint32(len(l4))
		return fixL4(b[9], l4, ph)
	case protoIPv6:
		if len(b) < ipv6Len || b[0]>>4 != 6 {
			return ErrBadInner
		}
		binary.BigEndian.PutUint16(b[4:], uint16(len(b)-ipv6Len))
		l4 := b[ipv6Len:]
		ph := sum(b[8:40], 0) + uint32(b[6]) + uint32(len(l4))
		return fixL4(b[6], l4, ph)
	case protoEthernet:
		return nil
	}
	return ErrNotEncap
}

func fixL4(proto uint8, l4 []byte, pseudo uint32) error {
	var at int
	switch proto {
	case protoTCP:
		if len(l4) < 20 {
			return ErrBadInner
		}
		at = 16
	case protoUDP:
		if len(l4) < 8 {
			return ErrBadInner
		}
		binary.BigEndian.PutUint16(l4[4:], uint16(len(l4)))
		at = 6
	case protoICMPv6:
		if len(l4) < 4 {
			return ErrBadInner
		}
		at = 2
	default:
		return nil
	}
	l4[at], l4[at+1] = 0, 0
	c := ^fold(sum(l4, pseudo))
	if c == 0 && proto == protoUDP {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[at:], c)
	return nil
}

func sum(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}
