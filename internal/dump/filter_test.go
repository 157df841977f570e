package dump

import (
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/srh"
)

func a(s string) netip.Addr { return netip.MustParseAddr(s) }

// udp6 builds an IPv6/UDP packet with a correct checksum (computed here
// independently of decode.go's summing loop, byte by byte).
func udp6(src, dst string, sport, dport uint16, data []byte) []byte {
	u := make([]byte, 8+len(data))
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	copy(u[8:], data)
	s, d := a(src).As16(), a(dst).As16()
	var pseudo []byte
	pseudo = append(pseudo, s[:]...)
	pseudo = append(pseudo, d[:]...)
	pseudo = append(pseudo, 0, 0, byte(len(u)>>8), byte(len(u)), 0, 0, 0, 17)
	var sum uint32
	all := append(pseudo, u...)
	for i := 0; i < len(all); i++ {
		if i%2 == 0 {
			sum += uint32(all[i]) << 8
		} else {
			sum += uint32(all[i])
		}
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(u[6:], ^uint16(sum))
	h := make([]byte, 40)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(u)))
	h[6], h[7] = 17, 64
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	return append(h, u...)
}

func TestFilter(t *testing.T) {
	inner := udp6("2001:db8::1", "2001:db8::2", 1000, 53, []byte("q"))
	enc, err := srh.BuildEncap(a("fd00::1"), []netip.Addr{a("fc00:1::1"), a("fc00:2::2")}, inner, srh.ProtoIPv6, srh.Options{Tag: 7})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := srh.BuildInsert(inner, []netip.Addr{a("fc00:3::3")}, srh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rEnc, rIns, rPlain Record
	rEnc.Decode(LinkRaw, enc)
	rIns.Decode(LinkRaw, ins)
	rPlain.Decode(LinkRaw, inner)
	for _, r := range []*Record{&rEnc, &rIns, &rPlain} {
		if r.Err != nil || r.Inner.L4.CsumState != CsumOK {
			t.Fatalf("decode: err %v checksum %s", r.Err, csumNames[r.Inner.L4.CsumState])
		}
	}
	im := func(s string) InnerMatch {
		m, err := ParseInnerMatch(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	f := func(mod func(*Filter)) Filter { x := NewFilter(); mod(&x); return x }
	tests := []struct {
		name            string
		f               Filter
		enc, ins, plain bool
	}{
		{"all", NewFilter(), true, true, true},
		{"sid-in-list", f(func(x *Filter) { x.SID = mustPrefix("fc00:2::2/128") }), true, false, false},
		{"sid-prefix", f(func(x *Filter) { x.SID = mustPrefix("fc00::/16") }), true, true, false},
		{"sid-final-dest", f(func(x *Filter) { x.SID = mustPrefix("2001:db8::2/128") }), false, true, false},
		{"segleft-1", f(func(x *Filter) { x.SegLeft = 1 }), true, true, false},
		{"segleft-0", f(func(x *Filter) { x.SegLeft = 0 }), false, false, false},
		{"tag-7", f(func(x *Filter) { x.Tag = 7 }), true, false, false},
		{"inner-port", f(func(x *Filter) { x.Inner = im("port 53") }), true, true, true},
		{"inner-port-miss", f(func(x *Filter) { x.Inner = im("port 54") }), false, false, false},
		{"inner-proto-src-dst", f(func(x *Filter) { x.Inner = im("proto udp src 2001:db8::1 dst 2001:db8::/64") }), true, true, true},
		{"inner-proto-tcp", f(func(x *Filter) { x.Inner = im("proto tcp") }), false, false, false},
		{"inner-dst-miss", f(func(x *Filter) { x.Inner = im("dst 2001:db8::3") }), false, false, false},
		{"combined", f(func(x *Filter) { x.Tag = 7; x.Inner = im("proto 17 port 1000") }), true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := [3]bool{tt.f.Match(&rEnc), tt.f.Match(&rIns), tt.f.Match(&rPlain)}
			if want := [3]bool{tt.enc, tt.ins, tt.plain}; got != want {
				t.Errorf("match encap/insert/plain = %v, want %v", got, want)
			}
		})
	}
}

func TestParseInnerMatchErrors(t *testing.T) {
	for _, s := range []string{"src", "port 70000", "proto nope", "color red", "src 1.2.3"} {
		t.Run(s, func(t *testing.T) {
			if _, err := ParseInnerMatch(s); err == nil {
				t.Errorf("ParseInnerMatch(%q) accepted", s)
			}
		})
	}
}

func TestStructure(t *testing.T) {
	info := SIDInfo{LocatorBits: 48, FunctionBits: 16, ArgsBits: 16}
	funct, args := info.Structure(a("fc00:1:2:abcd:1234::"))
	if funct != 0xabcd || args != 0x1234 {
		t.Errorf("funct/args = %#x/%#x, want 0xabcd/0x1234", funct, args)
	}
	tab := NewTable([]SIDInfo{{SID: mustPrefix("fc00::/16"), Node: "wide"}, {SID: mustPrefix("fc00:1::/48"), Node: "narrow"}})
	if got, ok := tab.Lookup(a("fc00:1::5")); !ok || got.Node != "narrow" {
		t.Errorf("longest match: %+v %v", got, ok)
	}
	if _, ok := tab.Lookup(a("fd00::1")); ok {
		t.Error("lookup outside every prefix matched")
	}
}

// FuzzDecode feeds arbitrary frames (raw IPv6 and Ethernet) to the decoder
// and every printer: no panic, JSON always valid.
func FuzzDecode(f *testing.F) {
	inner := udp6("2001:db8::1", "2001:db8::2", 1000, 53, []byte("q"))
	enc, _ := srh.BuildEncap(a("fd00::1"), []netip.Addr{a("fc00:1::1"), a("fc00:2::2")}, inner, srh.ProtoIPv6,
		srh.Options{TLVs: []srh.TLV{srh.NewHMACTLV(true, 1, make([]byte, 32))}})
	ins, _ := srh.BuildInsert(inner, []netip.Addr{a("fc00:3::3")}, srh.Options{Reduced: true})
	l2, _ := srh.BuildL2Encap(a("fd00::1"), []netip.Addr{a("fc00:1::1")}, append(make([]byte, 12), append([]byte{0x86, 0xdd}, inner...)...), srh.Options{})
	for _, b := range [][]byte{enc, ins, l2, inner} {
		f.Add(uint8(0), b)
		f.Add(uint8(1), append(append(make([]byte, 12), 0x86, 0xdd), b...))
	}
	res := NewTable([]SIDInfo{{SID: mustPrefix("fc00::/16"), Node: "n", Service: "s\"\x01", Behavior: "End", LocatorBits: 48, FunctionBits: 16, ArgsBits: 64}})
	f.Fuzz(func(t *testing.T, link uint8, b []byte) {
		var r Record
		l := uint32(LinkRaw)
		if link%2 == 1 {
			l = LinkEthernet
		}
		r.Decode(l, b)
		r.CapLen, r.OrigLen = len(b), len(b)
		for _, pr := range []Printer{{Format: FormatLine}, {Format: FormatTree, Resolver: res}, {Format: FormatJSON, Resolver: res}} {
			out := pr.Append(nil, &r)
			if pr.Format == FormatJSON && !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
		}
		f := NewFilter()
		f.SID, f.Inner.Port = mustPrefix("fc00::/16"), 53
		f.Match(&r)
	})
}

func TestHotPathAllocs(t *testing.T) {
	inner := udp6("2001:db8::1", "2001:db8::2", 1000, 53, []byte("q"))
	enc, err := srh.BuildEncap(a("fd00::1"), []netip.Addr{a("fc00:1::1"), a("fc00:2::2")}, inner, srh.ProtoIPv6, srh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var r Record
	buf := make([]byte, 0, 4096)
	for _, pr := range []Printer{{Format: FormatLine}, {Format: FormatJSON}} {
		allocs := testing.AllocsPerRun(200, func() {
			r.Decode(LinkRaw, enc)
			buf = pr.Append(buf[:0], &r)
		})
		if allocs > 0 {
			t.Errorf("format %d: %v allocations per packet, want 0", pr.Format, allocs)
		}
	}
}
