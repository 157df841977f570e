package srh

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// rawIPv6 builds a plain IPv6 packet for tests (a hand-written layout, not
// the code under test).
func rawIPv6(src, dst string, nh uint8, hlim uint8, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	binary.BigEndian.PutUint32(b[0:4], 6<<28|0x12<<20|0xabcde)
	binary.BigEndian.PutUint16(b[4:6], uint16(len(payload)))
	b[6], b[7] = nh, hlim
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, payload...)
}

var udpPayload = []byte{0x30, 0x39, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, 'a', 'b', 'c', 'd'}

var pktOpts = cmp.Options{cmpAddr, cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(Packet{})}

func TestBuildDecode(t *testing.T) {
	inner6 := rawIPv6("2001:db8::1", "2001:db8::2", ProtoUDP, 63, udpPayload)
	hbh := []byte{ProtoUDP, 0, 1, 4, 0, 0, 0, 0} // HBH with a PadN option
	dsto := []byte{ProtoUDP, 0, 1, 4, 0, 0, 0, 0}
	mac := make([]byte, 32)
	src := netip.MustParseAddr("fd00::1")
	path := addrs("fc00:1::100", "fc00:2::200", "fc00:3::300")
	tests := []struct {
		name  string
		build func() ([]byte, error)
		want  Packet
		path  []netip.Addr
	}{
		{
			name:  "encap-v6",
			build: func() ([]byte, error) { return BuildEncap(src, path, inner6, ProtoIPv6, Options{Tag: 9}) },
			want: Packet{HopLimit: 64, NextHeader: ProtoRouting, PayloadLen: uint16(56 + len(inner6)), Src: src, Dst: path[0],
				SRH: &SRH{NextHeader: ProtoIPv6, HdrExtLen: 6, RoutingType: 4, SegmentsLeft: 2, LastEntry: 2, Tag: 9,
					Segments: addrs("fc00:3::300", "fc00:2::200", "fc00:1::100")},
				SRHOffset: 40, InnerKind: InnerIPv6, InnerProto: ProtoIPv6, InnerOffset: 96, Inner: inner6},
			path: path,
		},
		{
			name: "encap-v4-hmac",
			build: func() ([]byte, error) {
				return BuildEncap(src, path[:1], []byte{0x45, 1, 2, 3}, ProtoIPv4,
					Options{HopLimit: 7, TrafficClass: 0xb8, FlowLabel: 0x12345, TLVs: []TLV{NewHMACTLV(true, 5, mac)}})
			},
			want: Packet{HopLimit: 7, TrafficClass: 0xb8, FlowLabel: 0x12345, NextHeader: ProtoRouting, PayloadLen: 64 + 4, Src: src, Dst: path[0],
				SRH:       &SRH{NextHeader: ProtoIPv4, HdrExtLen: 7, RoutingType: 4, Segments: path[:1], TLVs: []TLV{NewHMACTLV(true, 5, mac)}},
				SRHOffset: 40, InnerKind: InnerIPv4, InnerProto: ProtoIPv4, InnerOffset: 104, Inner: []byte{0x45, 1, 2, 3}},
			path: path[:1],
		},
		{
			name:  "l2-encap",
			build: func() ([]byte, error) { return BuildL2Encap(src, path[:2], []byte{1, 2, 3, 4, 5, 6, 7, 8}, Options{}) },
			want: Packet{HopLimit: 64, NextHeader: ProtoRouting, PayloadLen: 40 + 8, Src: src, Dst: path[0],
				SRH: &SRH{NextHeader: ProtoEthernet, HdrExtLen: 4, RoutingType: 4, SegmentsLeft: 1, LastEntry: 1,
					Segments: addrs("fc00:2::200", "fc00:1::100")},
				SRHOffset: 40, InnerKind: InnerEthernet, InnerProto: ProtoEthernet, InnerOffset: 80, Inner: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
			path: path[:2],
		},
		{
			name:  "encap-red",
			build: func() ([]byte, error) { return BuildEncap(src, path, inner6, ProtoIPv6, Options{Reduced: true}) },
			want: Packet{HopLimit: 64, NextHeader: ProtoRouting, PayloadLen: uint16(40 + len(inner6)), Src: src, Dst: path[0],
				SRH: &SRH{NextHeader: ProtoIPv6, HdrExtLen: 4, RoutingType: 4, SegmentsLeft: 2, LastEntry: 1,
					Segments: addrs("fc00:3::300", "fc00:2::200")},
				SRHOffset: 40, InnerKind: InnerIPv6, InnerProto: ProtoIPv6, InnerOffset: 80, Inner: inner6},
			path: path,
		},
		{
			name:  "encap-red-one-sid",
			build: func() ([]byte, error) { return BuildEncap(src, path[:1], inner6, ProtoIPv6, Options{Reduced: true}) },
			want: Packet{HopLimit: 64, NextHeader: ProtoIPv6, PayloadLen: uint16(len(inner6)), Src: src, Dst: path[0],
				InnerKind: InnerIPv6, InnerProto: ProtoIPv6, InnerOffset: 40, Inner: inner6},
			path: path[:1],
		},
		{
			name:  "insert",
			build: func() ([]byte, error) { return BuildInsert(inner6, path[:2], Options{Tag: 1}) },
			want: Packet{HopLimit: 63, TrafficClass: 0x12, FlowLabel: 0xabcde, NextHeader: ProtoRouting, PayloadLen: uint16(56 + len(udpPayload)),
				Src: netip.MustParseAddr("2001:db8::1"), Dst: path[0],
				SRH: &SRH{NextHeader: ProtoUDP, HdrExtLen: 6, RoutingType: 4, SegmentsLeft: 2, LastEntry: 2, Tag: 1,
					Segments: addrs("2001:db8::2", "fc00:2::200", "fc00:1::100")},
				SRHOffset: 40, InnerKind: InnerTransport, InnerProto: ProtoUDP, InnerOffset: 96, Inner: udpPayload},
			path: addrs("fc00:1::100", "fc00:2::200", "2001:db8::2"),
		},
		{
			name: "insert-hbh-dstopts",
			build: func() ([]byte, error) {
				h := append([]byte{ProtoDstOpts}, hbh[1:]...)
				return BuildInsert(rawIPv6("2001:db8::1", "2001:db8::2", ProtoHopByHop, 63, append(append(h, dsto...), udpPayload...)),
					path[:1], Options{})
			},
			want: Packet{HopLimit: 63, TrafficClass: 0x12, FlowLabel: 0xabcde, NextHeader: ProtoHopByHop, PayloadLen: uint16(16 + 40 + len(udpPayload)),
				Src: netip.MustParseAddr("2001:db8::1"), Dst: path[0],
				ExtHeaders:     []ExtHeader{{Proto: ProtoHopByHop, Raw: append([]byte{ProtoRouting}, hbh[1:]...)}},
				PostExtHeaders: []ExtHeader{{Proto: ProtoDstOpts, Raw: dsto}},
				SRH: &SRH{NextHeader: ProtoDstOpts, HdrExtLen: 4, RoutingType: 4, SegmentsLeft: 1, LastEntry: 1,
					Segments: addrs("2001:db8::2", "fc00:1::100")},
				SRHOffset: 48, InnerKind: InnerTransport, InnerProto: ProtoUDP, InnerOffset: 96, Inner: udpPayload},
			path: addrs("fc00:1::100", "2001:db8::2"),
		},
		{
			name:  "insert-red",
			build: func() ([]byte, error) { return BuildInsert(inner6, path[:2], Options{Reduced: true}) },
			want: Packet{HopLimit: 63, TrafficClass: 0x12, FlowLabel: 0xabcde, NextHeader: ProtoRouting, PayloadLen: uint16(40 + len(udpPayload)),
				Src: netip.MustParseAddr("2001:db8::1"), Dst: path[0],
				SRH: &SRH{NextHeader: ProtoUDP, HdrExtLen: 4, RoutingType: 4, SegmentsLeft: 2, LastEntry: 1,
					Segments: addrs("2001:db8::2", "fc00:2::200")},
				SRHOffset: 40, InnerKind: InnerTransport, InnerProto: ProtoUDP, InnerOffset: 80, Inner: udpPayload},
			path: addrs("fc00:1::100", "fc00:2::200", "2001:db8::2"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.build()
			if err != nil {
				t.Fatal(err)
			}
			p, err := DecodePacket(b)
			if err != nil {
				t.Fatalf("DecodePacket: %v", err)
			}
			if diff := cmp.Diff(&tt.want, p, pktOpts); diff != "" {
				t.Errorf("decode (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.path, p.Path(), cmpAddr); diff != "" {
				t.Errorf("Path (-want +got):\n%s", diff)
			}
			again, err := p.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(b, again); diff != "" {
				t.Errorf("re-encode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	src := netip.MustParseAddr("fd00::1")
	inner := rawIPv6("2001:db8::1", "2001:db8::2", ProtoUDP, 63, udpPayload)
	withSRH, err := BuildInsert(inner, addrs("fc00::1"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		fn   func() error
		want error
	}{
		{"empty-path", func() error { _, err := BuildEncap(src, nil, nil, ProtoIPv6, Options{}); return err }, ErrInvalid},
		{"v4-sid", func() error { _, err := BuildEncap(src, addrs("10.0.0.1"), nil, ProtoIPv6, Options{}); return err }, ErrInvalid},
		{"v4-src", func() error {
			_, err := BuildEncap(netip.MustParseAddr("10.0.0.1"), addrs("fc00::1"), nil, 41, Options{})
			return err
		}, ErrInvalid},
		{"insert-not-ipv6", func() error { _, err := BuildInsert([]byte{0x45}, addrs("fc00::1"), Options{}); return err }, ErrTruncated},
		{"insert-twice", func() error { _, err := BuildInsert(withSRH, addrs("fc00::2"), Options{}); return err }, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.fn(); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDecodePacketErrors(t *testing.T) {
	good, err := BuildEncap(netip.MustParseAddr("fd00::1"), addrs("fc00::1", "fc00::2"), []byte{1, 2, 3, 4}, ProtoIPv6, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name   string
		in     []byte
		want   error
		offset int
	}{
		{"short", good[:39], ErrTruncated, 39},
		{"v4", mod(func(b []byte) []byte { b[0] = 0x45; return b }), ErrVersion, 0},
		{"payload-len-too-big", mod(func(b []byte) []byte { b[5]++; return b }), ErrTruncated, len(good)},
		{"payload-cuts-srh", mod(func(b []byte) []byte { b[5] = 20; return b }), ErrTruncated, 60},
		{"routing-type", mod(func(b []byte) []byte { b[42] = 2; return b }), ErrRoutingType, 42},
		{"segleft", mod(func(b []byte) []byte { b[43] = 3; return b }), ErrSegmentsLeft, 43},
		{"hdrlen", mod(func(b []byte) []byte { b[41] = 2; return b }), ErrHdrLen, 41},
		{"hbh-truncated", rawIPv6("::1", "::2", ProtoHopByHop, 1, []byte{59, 1, 0, 0}), ErrTruncated, 44},
		{"hbh-not-first", rawIPv6("::1", "::2", ProtoDstOpts, 1, []byte{0, 0, 1, 4, 0, 0, 0, 0, 59, 0, 1, 4, 0, 0, 0, 0}), ErrExtHeader, 48},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodePacket(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Offset != tt.offset {
				t.Errorf("err = %v, want offset %d", err, tt.offset)
			}
		})
	}
}

func TestDecodeTrailerAndPlain(t *testing.T) {
	b := append(rawIPv6("::1", "::2", ProtoICMPv6, 1, []byte{128, 0, 0, 0}), 0, 0) // two octets of link padding
	p, err := DecodePacket(b)
	if err != nil {
		t.Fatal(err)
	}
	if p.SRH != nil || p.InnerKind != InnerTransport || len(p.Inner) != 4 || len(p.Trailer) != 2 {
		t.Errorf("got srh=%v kind=%v inner=%d trailer=%d", p.SRH, p.InnerKind, len(p.Inner), len(p.Trailer))
	}
	again, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b[:len(b)-2], again); diff != "" {
		t.Errorf("re-encode (-want +got):\n%s", diff)
	}
}

func TestDecodeIntoReuseAllocs(t *testing.T) {
	b, err := BuildEncap(netip.MustParseAddr("fd00::1"), addrs("fc00::1", "fc00::2", "fc00::3"), []byte{1, 2, 3, 4}, ProtoIPv6,
		Options{TLVs: []TLV{NewHMACTLV(false, 1, make([]byte, 32))}})
	if err != nil {
		t.Fatal(err)
	}
	var p Packet
	if err := p.DecodeInto(b); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.DecodeInto(b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("DecodeInto allocates %v times per packet once warmed up, want 0", allocs)
	}
}
