package srv6svc

import (
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
	if err := p.parse(b); err != nil {
		t.Fatal(err)
	}
	p.Bound = netip.MustParsePrefix("fc00:5::/112")
	if p.Outer.Dst != s1 || p.SRH.SegmentsLeft != 2 || p.SRH.LastEntry != 2 || p.Segment(0) != a2 || p.Args() != 0x100 {
		t.Fatalf("parsed %+v args %#x", p, p.Args())
	}
	if !p.apply(Forward) {
		t.Fatal("apply Forward failed")
	}
	if err := p.parse(p.buf); err != nil || p.Outer.Dst != a1 || p.SRH.SegmentsLeft != 1 {
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
			if err := p.parse(mut(append([]byte(nil), good...))); err == nil {
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
		if p.parse(b) != nil {
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
