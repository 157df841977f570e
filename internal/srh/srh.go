package srh

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Protocol numbers and constants used on the wire.
const (
	ProtoHopByHop  = 0   // IPv6 Hop-by-Hop Options
	ProtoIPv4      = 4   // IPv4 in IPv6
	ProtoTCP       = 6   // TCP
	ProtoUDP       = 17  // UDP
	ProtoIPv6      = 41  // IPv6 in IPv6
	ProtoRouting   = 43  // IPv6 Routing header
	ProtoFragment  = 44  // IPv6 Fragment header
	ProtoICMPv6    = 58  // ICMPv6
	ProtoNoNext    = 59  // No Next Header
	ProtoDstOpts   = 60  // IPv6 Destination Options
	ProtoEthernet  = 143 // Ethernet (RFC 8986 H.Encaps.L2)
	RoutingTypeSRH = 4   // routing type of the SRH

	// MaxSegments is the largest segment list an SRH can carry
	// (Last Entry is 8 bits).
	MaxSegments = 256
	// MaxLen is the largest SRH in octets ((255+1)*8).
	MaxLen = 2048
	// HMACTLVLen is the octets of the HMAC TLV the kernel signs with
	// (type, length, D and reserved, key id, a 32-octet HMAC field).
	HMACTLVLen = 40
)

// MaxPath is the longest segment list (Segment List[0] included) an SRH
// with tlvLen octets of TLVs can carry: the header is at most MaxLen
// octets (8 fixed, 16 a segment) and Last Entry is 8 bits. 127 segments
// without TLVs, 125 with an HMAC TLV. Apply (dataplane.EncodeSRH) and
// validate (config) both hold a segment list to it.
func MaxPath(tlvLen int) int { return min(MaxSegments, (MaxLen-8-tlvLen)/16) }

// TLV types of RFC 8754 §2.1.
const (
	TLVPad1 = 0
	TLVPadN = 4
	TLVHMAC = 5
)

// SRH is a Segment Routing Header. Segments is in WIRE order:
// Segments[0] is the LAST segment of the path (the final destination) and
// Segments[LastEntry] the first one visited.
//
// On encoding HdrExtLen and LastEntry are computed from Segments and TLVs;
// the values stored here are what was decoded (or what NewPath set).
type SRH struct {
	NextHeader   uint8
	HdrExtLen    uint8
	RoutingType  uint8
	SegmentsLeft uint8
	LastEntry    uint8
	Flags        uint8
	Tag          uint16
	Segments     []netip.Addr
	TLVs         []TLV
}

// NewPath builds an SRH from a path in visiting order (path[0] is visited
// first): the segments are stored reversed (wire order), SegmentsLeft and
// LastEntry are len(path)-1 and RoutingType is 4. NextHeader is left 0
// (the builders set it). It does not validate the addresses; MarshalBinary
// does.
func NewPath(path ...netip.Addr) *SRH {
	segs := make([]netip.Addr, len(path))
	for i, a := range path {
		segs[len(path)-1-i] = a
	}
	s := &SRH{RoutingType: RoutingTypeSRH, Segments: segs}
	if n := len(path); n > 0 && n <= MaxSegments {
		s.SegmentsLeft = uint8(n - 1)
		s.LastEntry = uint8(n - 1)
		s.HdrExtLen = uint8(min(2*n, 255))
	}
	return s
}

// Path returns the segments in visiting order (the reverse of Segments).
// For a reduced SRH the first segment of the policy is not in the list (it
// is only in the destination address); see Packet.Path.
func (s *SRH) Path() []netip.Addr {
	p := make([]netip.Addr, len(s.Segments))
	for i, a := range s.Segments {
		p[len(s.Segments)-1-i] = a
	}
	return p
}

// Active returns Segments[SegmentsLeft], the active segment, or the zero
// Addr when SegmentsLeft points outside the list (a reduced SRH at its
// headend, where the active segment is only in the destination address).
func (s *SRH) Active() netip.Addr {
	if int(s.SegmentsLeft) < len(s.Segments) {
		return s.Segments[s.SegmentsLeft]
	}
	return netip.Addr{}
}

// Reduced reports whether SegmentsLeft is LastEntry+1: the active segment
// is not in the list, as written by H.Encaps.Red / H.Insert.Red.
func (s *SRH) Reduced() bool { return int(s.SegmentsLeft) == int(s.LastEntry)+1 }

// Len returns the size of the encoded SRH in octets, including the padding
// MarshalBinary adds to reach a multiple of 8.
func (s *SRH) Len() int {
	n := 8 + 16*len(s.Segments) + tlvsLen(s.TLVs)
	return (n + 7) &^ 7
}

func tlvsLen(tlvs []TLV) int {
	n := 0
	for _, t := range tlvs {
		n += t.Len()
	}
	return n
}

// MarshalBinary encodes the SRH. HdrExtLen and LastEntry are computed from
// Segments and TLVs. TLVs are written in order and byte-exact; if their
// total is not a multiple of 8 octets a Pad1 (1 octet) or a PadN (2 to 7
// octets) is appended so that the header ends on an 8-octet boundary. A
// decoded SRH is always aligned, so decode then encode is byte-exact.
func (s *SRH) MarshalBinary() ([]byte, error) {
	return s.AppendBinary(make([]byte, 0, s.Len()))
}

// AppendBinary appends the encoded SRH to b (see MarshalBinary).
func (s *SRH) AppendBinary(b []byte) ([]byte, error) {
	if s.RoutingType != RoutingTypeSRH {
		return b, fmt.Errorf("srh: marshal: routing type %d: %w", s.RoutingType, ErrRoutingType)
	}
	n := len(s.Segments)
	if n == 0 || n > MaxSegments {
		return b, fmt.Errorf("srh: marshal: %d segments (want 1..%d): %w", n, MaxSegments, ErrInvalid)
	}
	if int(s.SegmentsLeft) > n {
		return b, fmt.Errorf("srh: marshal: segments left %d > last entry %d + 1: %w", s.SegmentsLeft, n-1, ErrSegmentsLeft)
	}
	for _, t := range s.TLVs {
		if t.Type != TLVPad1 && len(t.Value) > 255 {
			return b, fmt.Errorf("srh: marshal: tlv type %d value of %d octets: %w", t.Type, len(t.Value), ErrInvalid)
		}
	}
	total := s.Len()
	if total > MaxLen {
		return b, fmt.Errorf("srh: marshal: %d octets > %d: %w", total, MaxLen, ErrHdrLen)
	}
	b = append(b, s.NextHeader, uint8(total/8-1), RoutingTypeSRH, s.SegmentsLeft, uint8(n-1), s.Flags, 0, 0)
	binary.BigEndian.PutUint16(b[len(b)-2:], s.Tag)
	for i, a := range s.Segments {
		if !a.Is6() {
			return b, fmt.Errorf("srh: marshal: segment %d %v is not an IPv6 address: %w", i, a, ErrInvalid)
		}
		a16 := a.As16()
		b = append(b, a16[:]...)
	}
	for _, t := range s.TLVs {
		b = t.appendTo(b)
	}
	if pad := total - 8 - 16*n - tlvsLen(s.TLVs); pad > 0 {
		b = appendPadding(b, pad)
	}
	return b, nil
}

func appendPadding(b []byte, n int) []byte {
	if n == 1 {
		return append(b, TLVPad1)
	}
	b = append(b, TLVPadN, uint8(n-2))
	for range n - 2 {
		b = append(b, 0)
	}
	return b
}

// ParseSRH decodes the SRH at the start of b strictly; bytes after the
// header (Len() octets) are ignored. TLV values alias b.
func ParseSRH(b []byte) (*SRH, error) {
	s := &SRH{}
	if err := s.decode(b, 0); err != nil {
		return nil, err
	}
	return s, nil
}

// decode parses b into s, reusing s's slices; base is b's offset in the
// enclosing buffer, used in errors. On error s holds every field that could
// be read (the fixed header, the segments and TLVs present before the
// fault), for a dissector to show, as tcpdump and tshark do.
func (s *SRH) decode(b []byte, base int) error {
	if len(b) < 8 {
		return perr(base+len(b), ErrTruncated, "srh fixed header needs 8 octets, have %d", len(b))
	}
	s.NextHeader, s.HdrExtLen, s.RoutingType, s.SegmentsLeft = b[0], b[1], b[2], b[3]
	s.LastEntry, s.Flags, s.Tag = b[4], b[5], binary.BigEndian.Uint16(b[6:8])
	if s.RoutingType != RoutingTypeSRH {
		return perr(base+2, ErrRoutingType, "routing type %d, want %d", s.RoutingType, RoutingTypeSRH)
	}
	total := (int(s.HdrExtLen) + 1) * 8
	nseg := int(s.LastEntry) + 1
	var fault error
	switch {
	case 16*nseg > total-8:
		fault = perr(base+1, ErrHdrLen, "hdr ext len %d (%d octets) cannot hold last entry %d (%d segments)",
			s.HdrExtLen, total, s.LastEntry, nseg)
	case int(s.SegmentsLeft) > nseg:
		fault = perr(base+3, ErrSegmentsLeft, "segments left %d > last entry %d + 1", s.SegmentsLeft, s.LastEntry)
	case len(b) < total:
		fault = perr(base+len(b), ErrTruncated, "srh of %d octets, have %d", total, len(b))
	}
	// The segments present in both the header and the buffer; after a
	// fault, they are what a dissector can still show.
	s.Segments = s.Segments[:0]
	for i := range min(nseg, (min(total, len(b))-8)/16) {
		s.Segments = append(s.Segments, netip.AddrFrom16([16]byte(b[8+16*i:24+16*i])))
	}
	s.TLVs = s.TLVs[:0]
	if fault != nil {
		return fault
	}
	off := 8 + 16*nseg
	for off < total {
		t := b[off]
		if t == TLVPad1 {
			s.TLVs = append(s.TLVs, TLV{Type: TLVPad1})
			off++
			continue
		}
		if off+2 > total {
			return perr(base+off, ErrTLVOverflow, "tlv type %d header crosses the end of the srh (%d octets)", t, total)
		}
		l := int(b[off+1])
		if off+2+l > total {
			return perr(base+off, ErrTLVOverflow, "tlv type %d length %d crosses the end of the srh (%d octets)", t, l, total)
		}
		switch t {
		case TLVPadN:
			if l > 5 {
				return perr(base+off, ErrPadding, "padn length %d > 5", l)
			}
		case TLVHMAC:
			if l < 6 || (l-6)%8 != 0 || l-6 > 32 {
				return perr(base+off, ErrHMAC, "hmac tlv length %d: want 6 + 8n with n <= 4", l)
			}
		}
		s.TLVs = append(s.TLVs, TLV{Type: t, Value: b[off+2 : off+2+l : off+2+l]})
		off += 2 + l
	}
	return nil
}

// TLV is one SRH TLV. Pad1 (Type 0) is a single octet with no length and
// its Value is ignored; every other type is encoded type, length, value.
type TLV struct {
	Type  uint8
	Value []byte
}

// Len returns the TLV's size on the wire.
func (t TLV) Len() int {
	if t.Type == TLVPad1 {
		return 1
	}
	return 2 + len(t.Value)
}

func (t TLV) appendTo(b []byte) []byte {
	if t.Type == TLVPad1 {
		return append(b, TLVPad1)
	}
	b = append(b, t.Type, uint8(len(t.Value)))
	return append(b, t.Value...)
}

// IsPadding reports whether t is a Pad1 or PadN TLV.
func (t TLV) IsPadding() bool { return t.Type == TLVPad1 || t.Type == TLVPadN }

// NewPad1 returns a Pad1 TLV (one octet).
func NewPad1() TLV { return TLV{Type: TLVPad1} }

// NewPadN returns a PadN TLV occupying n octets on the wire (2 <= n <= 7),
// with zero padding.
func NewPadN(n int) TLV {
	n = max(2, min(n, 7))
	return TLV{Type: TLVPadN, Value: make([]byte, n-2)}
}

// HMACTLV is the typed view of an HMAC TLV (RFC 8754 §2.1.2): after type and
// length, 16 bits with the D flag as the most significant bit and 15
// reserved bits, the 32-bit HMAC Key ID, then the HMAC (a multiple of 8
// octets, at most 32).
type HMACTLV struct {
	D        bool
	Reserved uint16 // the 15 reserved bits, kept for byte-exact re-encoding
	KeyID    uint32
	HMAC     []byte
}

// HMAC returns the HMAC view of t, false if t is not a well-formed HMAC TLV.
func (t TLV) HMAC() (HMACTLV, bool) {
	l := len(t.Value)
	if t.Type != TLVHMAC || l < 6 || (l-6)%8 != 0 || l-6 > 32 {
		return HMACTLV{}, false
	}
	w := binary.BigEndian.Uint16(t.Value[0:2])
	return HMACTLV{
		D:        w&0x8000 != 0,
		Reserved: w & 0x7fff,
		KeyID:    binary.BigEndian.Uint32(t.Value[2:6]),
		HMAC:     t.Value[6:],
	}, true
}

// TLV encodes h as a TLV.
func (h HMACTLV) TLV() TLV {
	v := make([]byte, 6+len(h.HMAC))
	w := h.Reserved & 0x7fff
	if h.D {
		w |= 0x8000
	}
	binary.BigEndian.PutUint16(v[0:2], w)
	binary.BigEndian.PutUint32(v[2:6], h.KeyID)
	copy(v[6:], h.HMAC)
	return TLV{Type: TLVHMAC, Value: v}
}

// NewHMACTLV builds an HMAC TLV. mac should be a multiple of 8 octets, at
// most 32 (the kernel writes 32); other sizes produce a TLV that ParseSRH
// rejects with ErrHMAC.
func NewHMACTLV(d bool, keyID uint32, mac []byte) TLV {
	return HMACTLV{D: d, KeyID: keyID, HMAC: mac}.TLV()
}

// PadN returns the padding octets of a PadN TLV, false if t is not one.
func (t TLV) PadN() ([]byte, bool) {
	if t.Type != TLVPadN {
		return nil, false
	}
	return t.Value, true
}
