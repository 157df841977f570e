package srv6svc

import (
	"crypto/hmac"
	"crypto/sha256"
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

// SRH holds the fixed fields of the Segment Routing Header (RFC 8754), as
// Packet.SRH returns them: a copy, read-only by construction (assigning to
// a field of p.SRH() does not compile). Change the header with Packet's
// setters (SetTag, SetFlags, SetSegmentsLeft, SetSegment,
// SetNextSegments, AddTLV, RemoveTLVs, SignHMAC, RemoveHMAC), which write
// to the frame. Segments are read with Packet.Segment / Packet.Segments.
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

// TLV types of RFC 8754.
const (
	TLVPad1 = 0
	TLVPadN = 4
	TLVHMAC = 5
)

// Packet is one received packet whose active segment is a bound SID. Its
// byte slices are views into the shared UMEM frame: they are valid only
// until the handler returns (copy what you keep). Its headers are read
// with Outer and SRH (copies) and changed with the setters, which write to
// the frame.
type Packet struct {
	// Bound is the SID (prefix) of the binding that matched the
	// destination.
	Bound netip.Prefix
	// Queue is the receive queue (worker) that got the packet.
	Queue int

	outer     IPv6Header
	srh       SRH
	mem       []byte // the memory holding the frame's chunk (the UMEM)
	buf       []byte // ethernet frame, capacity to the end of its chunk
	chunk     uint64 // offset of the chunk in mem
	addr      uint64 // offset of buf[0] in mem
	srhOff    int    // offset of the SRH in buf
	innerOff  int
	modified  bool
	segs      bool       // the segment list was changed
	hmacStale bool       // a field the HMAC covers changed since it was computed
	opaque    bool       // SetPayload: the library leaves the payload alone
	csid      CSIDFormat // the binding's C-SID format (Config.CSID)
	csidMore  bool       // a uSID container with uSIDs after the active one
	noSRH     bool       // no SRH (a container with more uSIDs needs none)
	nhOff     int        // offset of the Next Header byte naming the inner packet
}

// Outer returns the outer IPv6 header as received (a copy; Dst is the
// active SID).
func (p *Packet) Outer() IPv6Header { return p.outer }

// SRH returns the SRH's fixed part as it is now (a copy: see SRH).
func (p *Packet) SRH() SRH { return p.srh }

// SRHOffset is the offset of the SRH in Frame().
func (p *Packet) SRHOffset() int { return p.srhOff }

// InnerOffset is the offset of the inner packet in Frame().
func (p *Packet) InnerOffset() int { return p.innerOff }

// Errors a handler may get from Packet's mutators, and the errors Listen
// returns for a bad configuration or a binding that conflicts with
// another: test them with errors.Is (and errors.As for *ConfigError).
var (
	ErrTooLong      = errors.New("packet would not fit its frame")
	ErrNotEncap     = errors.New("inner packet is not IPv4 or IPv6 (encapsulation mode required)")
	ErrBadInner     = errors.New("inner packet malformed")
	ErrNotSupported = errors.New("not supported by this kernel or interface")
	ErrBadSRH       = errors.New("SRH edit out of range")
	ErrConfig       = errors.New("srv6svc config")
	ErrConflict     = errors.New("binding conflict")
)

// ConfigError is Listen's error for a bad Config: every problem, each
// naming its field. errors.Is(err, ErrConfig) holds.
type ConfigError struct {
	Problems []error
}

func (e *ConfigError) Error() string { return "srv6svc config: " + errors.Join(e.Problems...).Error() }

// Is makes errors.Is(err, ErrConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// Unwrap returns the problems.
func (e *ConfigError) Unwrap() []error { return e.Problems }

// errNoSRH is the SRH edits' error on a packet that has none.
var errNoSRH = fmt.Errorf("the packet has no SRH (its uSID container holds the rest of the chain): %w", ErrBadSRH)

// HasSRH reports whether the packet carries an SRH. Only a uSID binding
// (Config.CSID) gets packets without one: a container that holds the
// rest of the chain. Then SRH() is zero but for NextHeader, Segments is
// empty and the SRH setters return ErrBadSRH.
func (p *Packet) HasSRH() bool { return !p.noSRH }

// CSIDFollows reports whether the destination is a uSID container with
// uSIDs after the active one (a uSID binding only): Forward shifts it
// (RFC 9800 NEXT-C-SID) instead of moving to the next segment.
func (p *Packet) CSIDFollows() bool { return p.csidMore }

// parse fills p from buf; f is the binding's C-SID format (zero for full
// SIDs). It reports why a packet is malformed.
func (p *Packet) parse(buf []byte, f CSIDFormat) error {
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
	p.outer = IPv6Header{
		TrafficClass: ip[0]<<4 | ip[1]>>4,
		FlowLabel:    binary.BigEndian.Uint32(ip[0:]) & 0xfffff,
		PayloadLen:   uint16(plen),
		NextHeader:   ip[6],
		HopLimit:     ip[7],
		Src:          netip.AddrFrom16([16]byte(ip[8:24])),
		Dst:          netip.AddrFrom16([16]byte(ip[24:40])),
	}
	p.csid, p.csidMore, p.noSRH = f, false, false
	if f.ok() {
		// The steering program dropped these already (CSIDPadding); the
		// check here covers the harness and a program of another version.
		if !CSIDPaddingOK(p.outer.Dst, f) {
			return errors.New("uSID container with invalid padding (a C-SID after its end)")
		}
		_, p.csidMore = AdvanceContainer(p.outer.Dst, f)
	}
	off, nh := ethLen+ipv6Len, ip[6]
	p.nhOff = ethLen + 6
	// Options headers before the SRH, as many as the steering program's
	// walk allows (the SRH within maxExtHeaders extension headers).
	for i := 0; nh == protoHopOpts || nh == protoDstOpts; i++ {
		if i >= maxExtHeaders-1 || off+2 > len(buf) {
			return errors.New("extension headers")
		}
		p.nhOff = off
		nh, off = buf[off], off+(int(buf[off+1])+1)*8
	}
	if nh != protoRouting && p.csidMore {
		// The rest of the chain is in the container: the inner packet
		// follows the outer headers.
		p.srh = SRH{NextHeader: nh}
		p.srhOff, p.innerOff, p.noSRH = off, off, true
		p.modified, p.segs, p.hmacStale, p.opaque = false, false, false, false
		completePartial(nh, buf[off:])
		return nil
	}
	if nh != protoRouting || off+srhFixedLen > len(buf) {
		return errors.New("no SRH")
	}
	s := buf[off:]
	p.srh = SRH{NextHeader: s[0], HdrExtLen: s[1], RoutingType: s[2], SegmentsLeft: s[3],
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
	case s[3] == 0 && !p.csidMore: // a container with more uSIDs may be the last segment
		return errors.New("segments left is 0")
	}
	p.srhOff, p.innerOff, p.nhOff = off, off+l, off
	p.modified, p.segs, p.hmacStale, p.opaque = false, false, false, false
	// Before the handler: it sees (and may encrypt or copy) the inner
	// packet as its destination will.
	completePartial(s[0], buf[p.innerOff:])
	return nil
}

// Segment returns Segment List[i] (Segment List[0] is the last segment).
func (p *Packet) Segment(i int) netip.Addr {
	if i < 0 || i > int(p.srh.LastEntry) || p.noSRH {
		return netip.Addr{}
	}
	o := p.srhOff + srhFixedLen + 16*i
	return netip.AddrFrom16([16]byte(p.buf[o : o+16]))
}

// Segments returns the segment list in wire order (Segments()[0] is the
// last segment, Segments()[SegmentsLeft] the active one).
func (p *Packet) Segments() []netip.Addr {
	return p.AppendSegments(make([]netip.Addr, 0, int(p.srh.LastEntry)+1))
}

// AppendSegments appends the segment list (wire order) to dst: with a
// buffer reused per worker, reading the list allocates nothing.
func (p *Packet) AppendSegments(dst []netip.Addr) []netip.Addr {
	if p.noSRH {
		return dst
	}
	for i := 0; i <= int(p.srh.LastEntry); i++ {
		dst = append(dst, p.Segment(i))
	}
	return dst
}

// TLVs returns the SRH's TLVs (after the segment list), padding included.
// A malformed TLV area ends the list.
func (p *Packet) TLVs() []TLV {
	if p.noSRH {
		return nil
	}
	b := p.buf[p.srhOff+srhFixedLen+16*(int(p.srh.LastEntry)+1) : p.innerOff]
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
	if bits <= 0 || p.csid.ok() { // a uSID has no ARGS: the next uSIDs follow it

		return 0
	}
	a := p.outer.Dst.As16()
	v := binary.BigEndian.Uint64(a[8:])
	if bits < 64 {
		v &= 1<<bits - 1
	}
	return v
}

// Inner returns the inner packet: everything after the SRH. It is a view
// into the shared frame; a handler may edit it in place (then call
// MarkInnerModified) or replace it with SetInner.
func (p *Packet) Inner() []byte { return p.buf[p.innerOff:] }

// InnerProto is the protocol of the inner packet: the SRH's Next Header
// (4 IPv4, 41 IPv6, 143 Ethernet; a transport protocol in insert mode).
func (p *Packet) InnerProto() uint8 { return p.srh.NextHeader }

// Frame returns the whole received frame (Ethernet header first).
func (p *Packet) Frame() []byte { return p.buf }

// MarkInnerModified tells the library the handler edited Inner in place:
// it fixes the inner packet's lengths and IPv4 header, TCP, UDP and ICMPv6
// checksums before the packet leaves. (Without it, the library only
// completes a TCP/UDP checksum the sending host left partial.)
func (p *Packet) MarkInnerModified() { p.modified = true }

// InnerModified is MarkInnerModified.
//
// Deprecated: the name reads like a question; use MarkInnerModified.
func (p *Packet) InnerModified() { p.MarkInnerModified() }

// SetInner replaces the inner packet by b (any length that fits the frame:
// 4096 bytes minus the headers). The outer payload length is adjusted; the
// inner lengths and checksums are fixed as for MarkInnerModified. Only
// encapsulated IPv4/IPv6 inner packets can be replaced.
func (p *Packet) SetInner(b []byte) error {
	if nh := p.srh.NextHeader; nh != protoIPv4 && nh != protoIPv6 {
		return ErrNotEncap
	}
	end := p.innerOff + len(b)
	if end > cap(p.buf) {
		return ErrTooLong
	}
	p.buf = p.buf[:end]
	copy(p.buf[p.innerOff:], b)
	p.modified, p.opaque = true, false
	return nil
}

// SetPayload replaces everything after the SRH by b and sets the SRH's
// Next Header to nh (without an SRH: the header before the payload): an opaque payload the library neither parses nor
// fixes (no lengths, no checksums), e.g. ciphertext under the RFC 3692
// experimental protocol 253, or the plaintext packet restored from it
// (nh 4 or 41). The outer payload length is adjusted.
func (p *Packet) SetPayload(nh uint8, b []byte) error {
	end := p.innerOff + len(b)
	if end > cap(p.buf) {
		return ErrTooLong
	}
	p.buf = p.buf[:end]
	copy(p.buf[p.innerOff:], b)
	p.buf[p.nhOff] = nh
	p.srh.NextHeader = nh
	p.modified, p.opaque = true, true
	return nil
}

// SetNextSegments replaces the segments still to visit after the active
// one: the packet will go to next[0], then next[1], ... The visited and
// active segments stay; TLVs are kept. The verdict then applies to the new
// list (Forward: destination ← next[0]). An HMAC TLV no longer matches:
// SignHMAC or RemoveHMAC before the verdict (see SignHMAC).
func (p *Packet) SetNextSegments(next ...netip.Addr) error {
	if len(next) == 0 {
		return errors.New("no next segment")
	}
	if p.noSRH {
		return errNoSRH
	}
	sl, last := int(p.srh.SegmentsLeft), int(p.srh.LastEntry)
	keep := last - sl + 1 // active and visited segments
	if len(next)+keep > 128 {
		return ErrTooLong
	}
	oldSegs := p.srhOff + srhFixedLen
	n := srhFixedLen + 16*(len(next)+keep) + (p.innerOff - oldSegs - 16*(last+1))
	srh := make([]byte, 0, n)
	srh = append(srh, p.buf[p.srhOff:oldSegs]...)
	for i := len(next) - 1; i >= 0; i-- {
		a := next[i].As16()
		srh = append(srh, a[:]...)
	}
	srh = append(srh, p.buf[oldSegs+16*sl:p.innerOff]...)
	srh[3] = uint8(len(next)) // active segment index in the new list
	srh[4] = uint8(len(next) + keep - 1)
	if err := p.replaceSRH(srh); err != nil {
		return err
	}
	p.segs = true
	p.coveredChanged()
	return nil
}

// replaceSRH puts srh (a whole SRH, its length a multiple of 8) in place
// of the packet's: the headers before it move so that it ends where the
// inner packet starts (a longer SRH takes the frame's headroom).
func (p *Packet) replaceSRH(srh []byte) error {
	if len(srh)%8 != 0 || len(srh)/8-1 > 255 || len(srh) < srhFixedLen {
		return ErrTooLong
	}
	srh[1] = uint8(len(srh)/8 - 1)
	hdr := make([]byte, 0, p.srhOff+len(srh))
	hdr = append(hdr, p.buf[:p.srhOff]...)
	hdr = append(hdr, srh...)
	start := int(p.addr-p.chunk) + p.innerOff - len(hdr) // offset in the chunk
	if start < 0 {
		return ErrTooLong
	}
	abs := p.chunk + uint64(start)
	inner := len(p.buf) - p.innerOff
	nb := p.mem[abs : abs+uint64(len(hdr)+inner) : p.chunk+frameSize]
	copy(nb, hdr) // does not overlap the inner packet
	p.buf, p.addr = nb, abs
	p.innerOff = len(hdr)
	s := nb[p.srhOff:]
	p.srh.HdrExtLen, p.srh.SegmentsLeft, p.srh.LastEntry, p.srh.Flags = s[1], s[3], s[4], s[5]
	binary.BigEndian.PutUint16(p.buf[ethLen+4:], uint16(len(p.buf)-ethLen-ipv6Len))
	return nil
}

// coveredChanged notes that a field the HMAC covers changed.
func (p *Packet) coveredChanged() {
	if _, ok := p.hmacTLV(); ok {
		p.hmacStale = true
	}
}

// SetTag writes the SRH's Tag (not covered by the HMAC).
func (p *Packet) SetTag(tag uint16) {
	if p.noSRH {
		return
	}
	binary.BigEndian.PutUint16(p.buf[p.srhOff+6:], tag)
	p.srh.Tag = tag
}

// SetFlags writes the SRH's Flags (covered by the HMAC: see SignHMAC).
func (p *Packet) SetFlags(flags uint8) {
	if p.noSRH {
		return
	}
	if p.buf[p.srhOff+5] != flags {
		p.coveredChanged()
	}
	p.buf[p.srhOff+5] = flags
	p.srh.Flags = flags
}

// SetSegmentsLeft makes Segment List[sl] the active segment: the verdict
// then applies from there (Forward: destination ← Segment List[sl−1]).
// sl must be in 1..LastEntry (ErrBadSRH). Segments Left is not covered by
// the HMAC.
func (p *Packet) SetSegmentsLeft(sl uint8) error {
	if p.noSRH {
		return errNoSRH
	}
	if sl == 0 || sl > p.srh.LastEntry {
		return fmt.Errorf("segments left %d: want 1..%d: %w", sl, p.srh.LastEntry, ErrBadSRH)
	}
	p.buf[p.srhOff+3] = sl
	p.srh.SegmentsLeft = sl
	return nil
}

// SetSegment rewrites Segment List[i] in place (i in 0..LastEntry,
// ErrBadSRH otherwise; covered by the HMAC: see SignHMAC).
func (p *Packet) SetSegment(i int, a netip.Addr) error {
	if p.noSRH {
		return errNoSRH
	}
	if i < 0 || i > int(p.srh.LastEntry) || !a.Is6() {
		return fmt.Errorf("segment %d (%s): want an IPv6 address at 0..%d: %w", i, a, p.srh.LastEntry, ErrBadSRH)
	}
	b := a.As16()
	copy(p.buf[p.srhOff+srhFixedLen+16*i:], b[:])
	p.segs = true
	p.coveredChanged()
	return nil
}

// tlvArea is the TLV bytes after the segment list.
func (p *Packet) tlvArea() (start, end int) {
	return p.srhOff + srhFixedLen + 16*(int(p.srh.LastEntry)+1), p.innerOff
}

// AddTLV appends a TLV (type, value up to 255 bytes) to the SRH, padding
// the header to a multiple of 8 octets with PadN/Pad1 (the padding it had
// at the end is replaced). TLVs are not covered by the HMAC. An HMAC TLV
// is added with SignHMAC, not here.
func (p *Packet) AddTLV(typ uint8, value []byte) error {
	if typ == TLVPad1 || typ == TLVPadN || typ == TLVHMAC || len(value) > 255 {
		return fmt.Errorf("TLV type %d, %d bytes: padding and HMAC are the library's, values at most 255 bytes: %w", typ, len(value), ErrBadSRH)
	}
	tlvs := p.TLVs()
	return p.rebuildTLVs(append(tlvs, TLV{Type: typ, Value: value}))
}

// RemoveTLVs removes every TLV of type typ and reports how many there
// were (removing the HMAC TLV is RemoveHMAC).
func (p *Packet) RemoveTLVs(typ uint8) (int, error) {
	var keep []TLV
	n := 0
	for _, t := range p.TLVs() {
		if t.Type == typ {
			n++
			continue
		}
		keep = append(keep, t)
	}
	if n == 0 {
		return 0, nil
	}
	if typ == TLVHMAC {
		p.hmacStale = false
	}
	return n, p.rebuildTLVs(keep)
}

// rebuildTLVs writes the SRH with tlvs: padding dropped and added again
// to a multiple of 8 octets, the HMAC TLV last (where Linux looks for it:
// the SRH's last 40 octets).
func (p *Packet) rebuildTLVs(tlvs []TLV) error {
	if p.noSRH {
		return errNoSRH
	}
	start, _ := p.tlvArea()
	srh := append([]byte(nil), p.buf[p.srhOff:start]...)
	var mac *TLV
	for i, t := range tlvs {
		switch t.Type {
		case TLVPad1, TLVPadN:
			continue
		case TLVHMAC:
			mac = &tlvs[i]
			continue
		}
		srh = append(srh, t.Type, uint8(len(t.Value)))
		srh = append(srh, t.Value...)
	}
	switch pad := (8 - len(srh)%8) % 8; {
	case pad == 1:
		srh = append(srh, TLVPad1)
	case pad > 1:
		srh = append(srh, TLVPadN, uint8(pad-2))
		srh = append(srh, make([]byte, pad-2)...)
	}
	if mac != nil {
		srh = append(srh, TLVHMAC, uint8(len(mac.Value)))
		srh = append(srh, mac.Value...)
		if len(srh)%8 != 0 {
			return fmt.Errorf("HMAC TLV of %d bytes: %w", len(mac.Value), ErrBadSRH)
		}
	}
	return p.replaceSRH(srh)
}

// hmacTLV finds the HMAC TLV: its offset in buf.
func (p *Packet) hmacTLV() (int, bool) {
	if p.noSRH {
		return 0, false
	}
	start, end := p.tlvArea()
	for o := start; o < end; {
		if p.buf[o] == TLVPad1 {
			o++
			continue
		}
		if o+2 > end || o+2+int(p.buf[o+1]) > end {
			return 0, false
		}
		if p.buf[o] == TLVHMAC && p.buf[o+1] >= 6 {
			return o, true
		}
		o += 2 + int(p.buf[o+1])
	}
	return 0, false
}

// SignHMAC writes the SRH's HMAC TLV (RFC 8754 §2.1.2, HMAC-SHA256 as
// Linux computes and checks it: over the outer source address, Last Entry,
// Flags, the key ID and the segment list; the TLV last in the SRH and the
// H flag, 0x08, set) with keyID and key, adding the TLV if the SRH has
// none. Edits of a field the HMAC covers (Flags, segments: SetFlags,
// SetSegment, SetNextSegments) on a packet that carries an HMAC TLV must
// be followed by SignHMAC (the key given: HMAC kept valid) or RemoveHMAC
// (explicitly invalidated: the TLV goes): otherwise the packet is dropped
// at the verdict and counted as a bad verdict, never sent with an HMAC
// that no longer matches.
func (p *Packet) SignHMAC(keyID uint32, key []byte) error {
	if p.noSRH {
		return errNoSRH
	}
	if _, err := p.RemoveTLVs(TLVHMAC); err != nil {
		return err
	}
	p.setFlagsRaw(p.srh.Flags | flagHMAC)
	v := make([]byte, 6+sha256.Size)
	binary.BigEndian.PutUint32(v[2:], keyID)
	tlvs := append(p.TLVs(), TLV{Type: TLVHMAC, Value: v})
	if err := p.rebuildTLVs(tlvs); err != nil {
		return err
	}
	o, _ := p.hmacTLV()
	copy(p.buf[o+8:o+8+sha256.Size], p.computeHMAC(keyID, key))
	p.hmacStale = false
	return nil
}

// RemoveHMAC removes the HMAC TLV (and the H flag): the packet then
// carries none (a node requiring one drops it).
func (p *Packet) RemoveHMAC() error {
	if p.noSRH {
		return nil // nothing to remove
	}
	_, err := p.RemoveTLVs(TLVHMAC)
	p.setFlagsRaw(p.srh.Flags &^ flagHMAC)
	return err
}

// flagHMAC is the SRH flag Linux wants with an HMAC TLV (SR6_FLAG1_HMAC,
// the H flag of the drafts before RFC 8754): it ignores the TLV without it.
const flagHMAC = 0x08

func (p *Packet) setFlagsRaw(f uint8) {
	p.buf[p.srhOff+5] = f
	p.srh.Flags = f
}

// VerifyHMAC reports whether the packet's HMAC TLV matches key (false
// without one).
func (p *Packet) VerifyHMAC(key []byte) bool {
	o, ok := p.hmacTLV()
	if !ok || p.buf[o+1] != 6+sha256.Size {
		return false
	}
	id := binary.BigEndian.Uint32(p.buf[o+4:])
	return hmac.Equal(p.buf[o+8:o+8+sha256.Size], p.computeHMAC(id, key))
}

func (p *Packet) computeHMAC(keyID uint32, key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(p.buf[ethLen+8 : ethLen+24]) // source address
	s := p.buf[p.srhOff:]
	var fixed [6]byte
	fixed[0], fixed[1] = s[4], s[5]
	binary.BigEndian.PutUint32(fixed[2:], keyID)
	m.Write(fixed[:])
	m.Write(s[srhFixedLen : srhFixedLen+16*(int(s[4])+1)])
	return m.Sum(nil)
}

// apply carries out the verdict on the frame: advances the SRH, writes the
// new destination and the outer payload length, fixes the inner packet if
// it was changed. It returns false when the verdict cannot be applied.
func (p *Packet) apply(v Verdict) bool {
	if p.csidMore {
		return p.applyCSID(v)
	}
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
	if sl < 0 || p.hmacStale {
		return false
	}
	s[3] = uint8(sl)
	o := p.srhOff + srhFixedLen + 16*sl
	copy(p.buf[ethLen+24:ethLen+40], p.buf[o:o+16])
	return p.fixLengths()
}

// applyCSID carries out the verdict on a container with uSIDs after the
// active one: Forward is RFC 9800's End with NEXT-C-SID (the next uSID
// becomes active, the address zero filled; Segments Left and the SRH, if
// any, unchanged). SkipNext and GoLast move by SRH entries, which would
// skip the rest of the container: not applicable (a bad verdict).
func (p *Packet) applyCSID(v Verdict) bool {
	if v != Forward || p.hmacStale {
		return false
	}
	da, ok := AdvanceContainer(p.outer.Dst, p.csid)
	if !ok {
		return false
	}
	b := da.As16()
	copy(p.buf[ethLen+24:ethLen+40], b[:])
	return p.fixLengths()
}

// fixLengths writes the outer payload length and fixes the inner packet
// if the handler changed it.
func (p *Packet) fixLengths() bool {
	binary.BigEndian.PutUint16(p.buf[ethLen+4:], uint16(len(p.buf)-ethLen-ipv6Len))
	if p.modified && !p.opaque {
		if err := fixInner(p.srh.NextHeader, p.buf[p.innerOff:]); err != nil {
			return false
		}
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
