package srv6svc

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

func frame(t testing.TB, segs []netip.Addr, sl uint8, inner []byte) []byte {
	t.Helper()
	srh := testutil.SRH(protoIPv6, segs, sl, 0, nil, inner)
	ip := testutil.IPv6(netip.MustParseAddr("fc00:a::1"), segs[sl], protoRouting, 64, srh)
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	return testutil.Eth(mac, mac, 0x86dd, ip)
}

func innerUDP() []byte {
	udp := []byte{0, 1, 0, 2, 0, 12, 0, 0, 'a', 'b', 'c', 'd'}
	return testutil.IPv6(netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), protoUDP, 64, udp)
}

var (
	a1 = netip.MustParseAddr("fc00:9::1")
	a2 = netip.MustParseAddr("fc00:9::2")
	s1 = netip.MustParseAddr("fc00:5::100")
)

func TestParseAndApply(t *testing.T) {
	b := frame(t, []netip.Addr{a2, a1, s1}, 2, innerUDP())
	var p Packet
	if err := p.parse(b, CSIDFormat{}); err != nil {
		t.Fatal(err)
	}
	p.Bound = netip.MustParsePrefix("fc00:5::/112")
	if p.Outer().Dst != s1 || p.SRH().SegmentsLeft != 2 || p.SRH().LastEntry != 2 || p.Segment(0) != a2 || p.Args() != 0x100 {
		t.Fatalf("parsed %+v args %#x", p, p.Args())
	}
	if !p.apply(Forward) {
		t.Fatal("apply Forward failed")
	}
	if err := p.parse(p.buf, CSIDFormat{}); err != nil || p.Outer().Dst != a1 || p.SRH().SegmentsLeft != 1 {
		t.Fatalf("after End: %v %+v", err, p)
	}
	if p.apply(SkipNext) {
		t.Fatal("skip-next with SL 1 must fail")
	}
}

func TestParseRejects(t *testing.T) {
	good := frame(t, []netip.Addr{a2, a1, s1}, 2, innerUDP())
	cases := map[string]func([]byte) []byte{
		"short":          func(b []byte) []byte { return b[:30] },
		"not ipv6":       func(b []byte) []byte { b[12] = 8; b[13] = 0; return b },
		"payload length": func(b []byte) []byte { return b[:len(b)-1] },
		"routing type":   func(b []byte) []byte { b[ethLen+ipv6Len+2] = 3; return b },
		"sl > last":      func(b []byte) []byte { b[ethLen+ipv6Len+3] = 5; return b },
		"sl 0":           func(b []byte) []byte { b[ethLen+ipv6Len+3] = 0; return b },
		"hdr len":        func(b []byte) []byte { b[ethLen+ipv6Len+1] = 2; return b },
		"no srh":         func(b []byte) []byte { b[ethLen+6] = protoUDP; return b },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			var p Packet
			if err := p.parse(mut(append([]byte(nil), good...)), CSIDFormat{}); err == nil {
				t.Error("parse accepted a malformed packet")
			}
		})
	}
}

// FuzzPacket: any bytes either fail to parse or parse, read and apply
// every verdict without panicking.
func FuzzPacket(f *testing.F) {
	f.Add(frame(f, []netip.Addr{a2, a1, s1}, 2, innerUDP()), uint8(0))
	f.Add(frame(f, []netip.Addr{a2, s1}, 1, innerUDP()), uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, v uint8) {
		var p Packet
		if p.parse(b, CSIDFormat{}) != nil {
			return
		}
		p.Bound = netip.MustParsePrefix("fc00:5::/64")
		_ = p.Segments()
		_ = p.TLVs()
		_ = p.Args()
		p.modified = v&8 != 0
		p.apply(Verdict(v & 3))
	})
}

func TestInnerFlow(t *testing.T) {
	f, ok := innerFlow(protoIPv6, innerUDP())
	want := Flow{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2"), protoUDP, 1, 2}
	if !ok || f != want {
		t.Errorf("IPv6/UDP: %+v %v, want %+v", f, ok, want)
	}
	v4 := testutil.IPv4("192.0.2.1", "198.51.100.2", protoTCP, false, make([]byte, 20))
	v4[20], v4[21], v4[22], v4[23] = 0, 80, 1, 0
	f, ok = innerFlow(protoIPv4, v4)
	if !ok || f.Src.String() != "192.0.2.1" || f.Proto != protoTCP || f.SrcPort != 80 || f.DstPort != 256 {
		t.Errorf("IPv4/TCP: %+v %v", f, ok)
	}
	if _, ok := innerFlow(protoIPv6, innerUDP()[:30]); ok {
		t.Error("truncated IPv6 accepted")
	}
}

func TestConfigCheck(t *testing.T) {
	c := Config{Name: "", SIDs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fc00::1/64")}, Queues: 99, BatchSize: -1}
	err := c.check()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"name:", "sids[0]:", "sids[1]:", "interfaces:", "queues:", "batch size:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, err := Listen(Config{Name: "x"}); err == nil || !strings.Contains(err.Error(), "sids:") {
		t.Errorf("Listen with no SID: %v", err)
	}
}

// TestCompletePartial: a TCP/UDP checksum holding only the pseudo-header
// sum (what a host leaves for the device with checksum offload) is
// completed; a complete one, and any other protocol, stays as it is.
func TestCompletePartial(t *testing.T) {
	v4 := func(proto uint8, l4 []byte) []byte {
		b := make([]byte, 20+len(l4))
		b[0], b[8], b[9] = 0x45, 64, proto
		binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
		copy(b[12:], []byte{10, 0, 1, 1, 10, 0, 2, 2})
		copy(b[20:], l4)
		binary.BigEndian.PutUint16(b[10:], ^fold(sum(b[:20], 0)))
		return b
	}
	v6 := func(proto uint8, l4 []byte) []byte {
		b := make([]byte, 40+len(l4))
		b[0], b[6], b[7] = 0x60, proto, 64
		binary.BigEndian.PutUint16(b[4:], uint16(len(l4)))
		b[23], b[39] = 1, 2
		copy(b[40:], l4)
		return b
	}
	for _, tc := range []struct {
		name  string
		outer uint8
		pkt   []byte
		at    int // checksum offset in the inner packet
	}{
		{"ipv4-udp", protoIPv4, v4(protoUDP, []byte{0, 1, 0, 2, 0, 11, 0, 0, 'a', 'b', 'c'}), 26},
		{"ipv4-tcp", protoIPv4, v4(protoTCP, append(make([]byte, 20), "hello"...)), 36},
		{"ipv6-udp", protoIPv6, v6(protoUDP, []byte{0, 1, 0, 2, 0, 9, 0, 0, 'z'}), 46},
		{"ipv6-tcp", protoIPv6, v6(protoTCP, append(make([]byte, 20), "hello world"...)), 56},
	} {
		t.Run(tc.name, func(t *testing.T) {
			complete := append([]byte(nil), tc.pkt...)
			if err := fixInner(tc.outer, complete); err != nil {
				t.Fatal(err)
			}
			if completePartial(tc.outer, complete) {
				t.Error("a complete checksum was changed")
			}
			partial := append([]byte(nil), complete...)
			var pseudo uint32
			if tc.outer == protoIPv4 {
				pseudo = sum(partial[12:20], 0) + uint32(partial[9]) + uint32(len(partial)-20)
			} else {
				pseudo = sum(partial[8:40], 0) + uint32(partial[6]) + uint32(len(partial)-40)
			}
			binary.BigEndian.PutUint16(partial[tc.at:], fold(pseudo))
			if !completePartial(tc.outer, partial) {
				t.Fatal("a partial checksum was not completed")
			}
			if !bytes.Equal(partial, complete) {
				t.Errorf("completed %x, want %x", partial, complete)
			}
		})
	}
}
