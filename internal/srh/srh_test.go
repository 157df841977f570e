package srh

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var cmpAddr = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// unhex decodes a hex string where spaces and '|' are separators.
func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

const (
	seg1 = "fc00000000000000000000000000000a" // fc00::a
	seg2 = "fc00000000000000000000000000000b" // fc00::b
	seg3 = "fc00000000000000000000000000000c" // fc00::c
)

func TestNewPath(t *testing.T) {
	s := NewPath(addrs("fc00::a", "fc00::b", "fc00::c")...)
	s.Tag = 0x1234
	if diff := cmp.Diff(addrs("fc00::c", "fc00::b", "fc00::a"), s.Segments, cmpAddr); diff != "" {
		t.Errorf("wire order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(addrs("fc00::a", "fc00::b", "fc00::c"), s.Path(), cmpAddr); diff != "" {
		t.Errorf("Path (-want +got):\n%s", diff)
	}
	if got, want := s.Active(), netip.MustParseAddr("fc00::a"); got != want {
		t.Errorf("Active = %v, want %v", got, want)
	}
	if s.SegmentsLeft != 2 || s.LastEntry != 2 || s.RoutingType != 4 {
		t.Errorf("sl/le/type = %d/%d/%d, want 2/2/4", s.SegmentsLeft, s.LastEntry, s.RoutingType)
	}
	if s.Len() != 56 {
		t.Errorf("Len = %d, want 56", s.Len())
	}
	got, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, "00 06 04 02 02 00 1234"+seg3+seg2+seg1)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bytes (-want +got):\n%s", diff)
	}
}

func TestMarshalTLVs(t *testing.T) {
	mac := bytes.Repeat([]byte{0xab}, 32)
	tests := []struct {
		name string
		tlvs []TLV
		want string // TLV area in hex
	}{
		{"none", nil, ""},
		{"hmac32", []TLV{NewHMACTLV(true, 0x01020304, mac)}, "05 26 8000 01020304" + strings.Repeat("ab", 32)},
		{"hmac8-no-d", []TLV{NewHMACTLV(false, 7, mac[:8])}, "05 0e 0000 00000007" + strings.Repeat("ab", 8)},
		{"pad1-added", []TLV{{Type: 9, Value: []byte{1, 2, 3, 4, 5}}}, "09 05 0102030405 00"},
		{"padn-added", []TLV{{Type: 9, Value: []byte{1}}}, "09 01 01 04 03 000000"},
		{"explicit-padn-clamped", []TLV{NewPadN(8)}, "04 05 0000000000 00"},
		{"aligned-unknown", []TLV{{Type: 200, Value: []byte{1, 2, 3, 4, 5, 6}}}, "c8 06 010203040506"},
		{"pad1-explicit", []TLV{NewPad1(), {Type: 7, Value: []byte{9, 9, 9, 9, 9}}}, "00 07 05 0909090909"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewPath(addrs("fc00::a")...)
			s.NextHeader = 41
			s.TLVs = tt.tlvs
			got, err := s.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			area := unhex(t, tt.want)
			hel := uint8((8+16+len(area))/8 - 1)
			want := append(unhex(t, "29"), hel)
			want = append(want, unhex(t, "04 00 00 00 0000"+seg1)...)
			want = append(want, area...)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("bytes (-want +got):\n%s", diff)
			}
			if s.Len() != len(got) {
				t.Errorf("Len = %d, encoded %d", s.Len(), len(got))
			}
			// decode then encode is byte-exact
			d, err := ParseSRH(got)
			if err != nil {
				t.Fatalf("ParseSRH: %v", err)
			}
			again, err := d.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("re-encode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSRH(t *testing.T) {
	b := unhex(t, "3a 0a 04 01 02 a0 beef"+seg3+seg2+seg1+
		"05 0e 8000 0000002a 1122334455667788"+"00"+"04 00"+"63 02 abcd"+"04 01 ff"+"04 04 00000000")
	s, err := ParseSRH(append(b, 0xde, 0xad)) // trailing payload ignored
	if err != nil {
		t.Fatal(err)
	}
	want := &SRH{
		NextHeader: 58, HdrExtLen: 10, RoutingType: 4, SegmentsLeft: 1, LastEntry: 2, Flags: 0xa0, Tag: 0xbeef,
		Segments: addrs("fc00::c", "fc00::b", "fc00::a"),
		TLVs: []TLV{
			{Type: 5, Value: unhex(t, "8000 0000002a 1122334455667788")},
			{Type: 0},
			{Type: 4, Value: []byte{}},
			{Type: 0x63, Value: unhex(t, "abcd")},
			{Type: 4, Value: []byte{0xff}}, // non-zero padding is ignored on receipt, kept on re-encode
			{Type: 4, Value: []byte{0, 0, 0, 0}},
		},
	}
	if diff := cmp.Diff(want, s, cmpAddr, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("ParseSRH (-want +got):\n%s", diff)
	}
	if got := s.Active(); got != netip.MustParseAddr("fc00::b") {
		t.Errorf("Active = %v", got)
	}
	h, ok := s.TLVs[0].HMAC()
	if !ok {
		t.Fatal("HMAC view not ok")
	}
	if diff := cmp.Diff(HMACTLV{D: true, KeyID: 42, HMAC: unhex(t, "1122334455667788")}, h); diff != "" {
		t.Errorf("HMAC view (-want +got):\n%s", diff)
	}
	if _, ok := s.TLVs[3].HMAC(); ok {
		t.Error("HMAC view of an unknown TLV is ok")
	}
	again, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, again); diff != "" {
		t.Errorf("re-encode (-want +got):\n%s", diff)
	}
}

func TestParseSRHErrors(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		err    error
		offset int
	}{
		{"empty", "", ErrTruncated, 0},
		{"short-fixed", "29 02 04 00 00", ErrTruncated, 5},
		{"routing-type-0", "29 02 00 00 00 00 0000" + seg1, ErrRoutingType, 2},
		{"routing-type-3", "29 02 03 00 00 00 0000" + seg1, ErrRoutingType, 2},
		{"hdrlen-zero", "29 00 04 00 00 00 0000", ErrHdrLen, 1},
		{"hdrlen-odd", "29 01 04 00 00 00 0000 0000000000000000", ErrHdrLen, 1},
		{"last-entry-too-big", "29 02 04 00 01 00 0000" + seg1, ErrHdrLen, 1},
		{"segleft-gt-le+1", "29 02 04 02 00 00 0000" + seg1, ErrSegmentsLeft, 3},
		{"truncated-segments", "29 04 04 01 01 00 0000" + seg1, ErrTruncated, 24},
		{"tlv-header-overflow", "29 03 04 00 00 00 0000" + seg1 + "0000000000000004", ErrTLVOverflow, 31},
		{"tlv-value-overflow", "29 03 04 00 00 00 0000" + seg1 + "0507000000000000", ErrTLVOverflow, 24},
		{"padn-too-long", "29 03 04 00 00 00 0000" + seg1 + "0406000000000000", ErrPadding, 24},
		{"hmac-bad-len", "29 03 04 00 00 00 0000" + seg1 + "0504000000000000", ErrHMAC, 24},
		{"hmac-too-long", "29 08 04 00 00 00 0000" + seg1 + "052e" + strings.Repeat("00", 46), ErrHMAC, 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSRH(unhex(t, tt.in))
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err %T is not a *ParseError", err)
			}
			if pe.Offset != tt.offset {
				t.Errorf("offset = %d, want %d (%v)", pe.Offset, tt.offset, err)
			}
			if Reason(err) != tt.err.Error() {
				t.Errorf("Reason = %q, want %q", Reason(err), tt.err.Error())
			}
		})
	}
}

func TestMarshalErrors(t *testing.T) {
	tests := []struct {
		name string
		s    *SRH
		err  error
	}{
		{"no-segments", &SRH{RoutingType: 4}, ErrInvalid},
		{"routing-type", &SRH{Segments: addrs("fc00::1")}, ErrRoutingType},
		{"ipv4-segment", &SRH{RoutingType: 4, Segments: addrs("10.0.0.1")}, ErrInvalid},
		{"segleft", &SRH{RoutingType: 4, SegmentsLeft: 2, Segments: addrs("fc00::1")}, ErrSegmentsLeft},
		{"tlv-too-long", &SRH{RoutingType: 4, Segments: addrs("fc00::1"), TLVs: []TLV{{Type: 9, Value: make([]byte, 256)}}}, ErrInvalid},
		{"too-many", NewPath(make([]netip.Addr, 257)...), ErrInvalid},
		{"too-long", &SRH{RoutingType: 4, Segments: make([]netip.Addr, 128), TLVs: []TLV{{Type: 9, Value: make([]byte, 200)}}}, ErrHdrLen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.s.MarshalBinary(); !errors.Is(err, tt.err) {
				t.Errorf("err = %v, want %v", err, tt.err)
			}
		})
	}
}

func TestMaxSegmentsRoundTrip(t *testing.T) {
	path := make([]netip.Addr, MaxSegments-1) // 255 segments + 8 = 4088 > 2048: too long
	for i := range path {
		path[i] = netip.AddrFrom16([16]byte{0xfc, 15: byte(i)})
	}
	if _, err := NewPath(path...).MarshalBinary(); !errors.Is(err, ErrHdrLen) {
		t.Fatalf("255 segments: err = %v, want ErrHdrLen", err)
	}
	s := NewPath(path[:127]...) // 8 + 127*16 = 2040 octets: the largest list
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseSRH(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, d, cmpAddr, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// MaxPath is exactly the longest list MarshalBinary accepts.
func TestMaxPath(t *testing.T) {
	for _, tlv := range []int{0, HMACTLVLen} {
		seg := netip.MustParseAddr("fc00::1")
		build := func(n int) error {
			path := make([]netip.Addr, n)
			for i := range path {
				path[i] = seg
			}
			h := NewPath(path...)
			if tlv > 0 {
				h.TLVs = []TLV{NewHMACTLV(false, 1, make([]byte, 32))}
			}
			_, err := h.MarshalBinary()
			return err
		}
		n := MaxPath(tlv)
		if err := build(n); err != nil {
			t.Errorf("tlv %d: %d segments refused: %v", tlv, n, err)
		}
		if err := build(n + 1); err == nil {
			t.Errorf("tlv %d: %d segments accepted, MaxPath says %d", tlv, n+1, n)
		}
	}
}
