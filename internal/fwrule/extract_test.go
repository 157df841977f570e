package fwrule

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// scapyPackets builds the named packets with scapy (an oracle nobody here
// wrote) and returns their bytes.
func scapyPackets(t *testing.T, defs map[string]string) map[string][]byte {
	t.Helper()
	var b strings.Builder
	b.WriteString("pk = {}\n")
	for name, expr := range defs {
		b.WriteString("pk[" + pyQuote(name) + "] = bytes(" + expr + ")\n")
	}
	b.WriteString("for k, v in pk.items():\n    print(k, hexof(v))\n")
	out := testutil.RunScapy(t, b.String())
	res := map[string][]byte{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, h, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("scapy output line %q", line)
		}
		raw, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		res[name] = raw
	}
	return res
}

func pyQuote(s string) string { return "'" + s + "'" }

func a(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestExtractScapy(t *testing.T) {
	const (
		src = "fc00:1::1"
		sid = "fc00:2::f1:0"
		eg  = "fc00:3::d6"
	)
	srh3 := "IPv6ExtHdrSegmentRouting(addresses=['fc00:d2::1','" + eg + "','" + sid + "','fc00:9::1'], segleft=2, tag=77"
	defs := map[string]string{
		"plain-tcp":   "IPv6(src='fc00:1::1', dst='fc00:d1::1')/TCP(sport=1234, dport=80)",
		"plain-icmp6": "IPv6(src='fc00:1::1', dst='fc00:d1::1')/ICMPv6EchoRequest()",
		"plain-6in6":  "IPv6(src='fc00:1::1', dst='fc00:d1::1')/IPv6(src='fc00:5::1', dst='fc00:6::1')/UDP(sport=1, dport=2)",
		"encap-udp": "IPv6(src='fc00:1::1', dst='" + sid + "')/IPv6ExtHdrSegmentRouting(addresses=['" + eg + "','" + sid + "'], segleft=1, tag=5)" +
			"/IPv6(src='fc00:a::1', dst='fc00:d1::1')/UDP(sport=5000, dport=53)",
		"encap-v4-icmp": "IPv6(src='fc00:1::1', dst='" + sid + "')/IPv6ExtHdrSegmentRouting(addresses=['" + eg + "','" + sid + "'], segleft=1)" +
			"/IP(src='10.0.0.1', dst='10.1.0.1')/ICMP(type=3, code=3)",
		"encap-v4-frag": "IPv6(src='fc00:1::1', dst='" + sid + "')/IPv6ExtHdrSegmentRouting(addresses=['" + eg + "','" + sid + "'], segleft=1)" +
			"/IP(src='10.0.0.1', dst='10.1.0.1', frag=100, proto=6)/Raw(b'x'*16)",
		"encap-hbh-inner-dst": "IPv6(src='fc00:1::1', dst='" + sid + "')/IPv6ExtHdrHopByHop()/IPv6ExtHdrSegmentRouting(addresses=['" + eg + "','" + sid + "'], segleft=1)" +
			"/IPv6(src='fc00:a::1', dst='fc00:d1::1')/IPv6ExtHdrDestOpt()/TCP(sport=7, dport=8)",
		"insert-tcp": "IPv6(src='" + src + "', dst='" + sid + "')/" + srh3 + ")/TCP(sport=40000, dport=443)",
		"insert-destopt-udp": "IPv6(src='" + src + "', dst='" + sid + "')/IPv6ExtHdrSegmentRouting(addresses=['fc00:d2::1','" + sid + "'], segleft=1)" +
			"/IPv6ExtHdrDestOpt()/UDP(sport=9, dport=10)",
		"insert-sl0":         "IPv6(src='" + src + "', dst='fc00:d2::1')/IPv6ExtHdrSegmentRouting(addresses=['fc00:d2::1','" + sid + "'], segleft=0)/ICMPv6EchoReply()",
		"nonfirst-frag":      "IPv6(src='fc00:1::1', dst='fc00:d1::1')/IPv6ExtHdrFragment(offset=10, nh=6, m=1)/Raw(b'y'*24)",
		"first-frag":         "IPv6(src='fc00:1::1', dst='fc00:d1::1')/IPv6ExtHdrFragment(offset=0, nh=17, m=1)/UDP(sport=11, dport=12)/Raw(b'z'*8)",
		"err-truncated-tcp":  "(IPv6(src='fc00:1::1', dst='fc00:d1::1', nh=6, plen=2)/Raw(b'ab'))",
		"err-routing-type0":  "IPv6(src='fc00:1::1', dst='fc00:d1::1')/IPv6ExtHdrRouting(addresses=['fc00::1'])/UDP()",
		"err-sl-gt-last":     "IPv6(src='fc00:1::1', dst='" + sid + "')/IPv6ExtHdrSegmentRouting(addresses=['" + eg + "','" + sid + "'], segleft=2)/UDP()",
		"err-list-too-long":  "IPv6(src='fc00:1::1', dst='" + sid + "')/IPv6ExtHdrSegmentRouting(addresses=['" + eg + "','" + sid + "'], segleft=1, lastentry=2)/UDP()",
		"err-inner-version":  "IPv6(src='fc00:1::1', dst='" + sid + "')/IPv6ExtHdrSegmentRouting(addresses=['" + eg + "','" + sid + "'], segleft=1, nh=41)/IP(src='10.0.0.1', dst='10.0.0.2')/UDP()",
		"err-inner-v4-short": "IPv6(src='fc00:1::1', dst='" + sid + "')/IPv6ExtHdrSegmentRouting(addresses=['" + eg + "','" + sid + "'], segleft=1, nh=4)/Raw(b'E'+b'\\x00'*10)",
		"err-v4":             "IP(src='10.0.0.1', dst='10.0.0.2')/Raw(b'x'*40)",
	}
	pk := scapyPackets(t, defs)
	tests := []struct {
		name string
		want Packet
		err  error
	}{
		{name: "plain-tcp", want: Packet{Family: IPv6, OrigSrc: a("fc00:1::1"), OrigDst: a("fc00:d1::1"), Proto: 6, HasPorts: true, SPort: 1234, DPort: 80,
			OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:d1::1")}},
		{name: "plain-icmp6", want: Packet{Family: IPv6, OrigSrc: a("fc00:1::1"), OrigDst: a("fc00:d1::1"), Proto: 58, HasICMP: true, ICMPType: 128,
			OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:d1::1")}},
		{name: "plain-6in6", want: Packet{Family: IPv6, OrigSrc: a("fc00:1::1"), OrigDst: a("fc00:d1::1"), Proto: 41,
			OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:d1::1")}},
		{name: "encap-udp", want: Packet{Family: IPv6, OrigSrc: a("fc00:a::1"), OrigDst: a("fc00:d1::1"), Proto: 17, HasPorts: true, SPort: 5000, DPort: 53,
			HasSRH: true, OuterSrc: a("fc00:1::1"), OuterDst: a(sid), NextHdr: 41, HdrLen: 4, SegsLeft: 1, LastEntry: 1, Tag: 5,
			NSID: a(eg), LSID: a(eg)}},
		{name: "encap-v4-icmp", want: Packet{Family: IPv4, OrigSrc: a("10.0.0.1"), OrigDst: a("10.1.0.1"), Proto: 1, HasICMP: true, ICMPType: 3, ICMPCode: 3,
			HasSRH: true, OuterSrc: a("fc00:1::1"), OuterDst: a(sid), NextHdr: 4, HdrLen: 4, SegsLeft: 1, LastEntry: 1, NSID: a(eg), LSID: a(eg)}},
		{name: "encap-v4-frag", want: Packet{Family: IPv4, OrigSrc: a("10.0.0.1"), OrigDst: a("10.1.0.1"), Proto: 6,
			HasSRH: true, OuterSrc: a("fc00:1::1"), OuterDst: a(sid), NextHdr: 4, HdrLen: 4, SegsLeft: 1, LastEntry: 1, NSID: a(eg), LSID: a(eg)}},
		{name: "encap-hbh-inner-dst", want: Packet{Family: IPv6, OrigSrc: a("fc00:a::1"), OrigDst: a("fc00:d1::1"), Proto: 6, HasPorts: true, SPort: 7, DPort: 8,
			HasSRH: true, OuterSrc: a("fc00:1::1"), OuterDst: a(sid), NextHdr: 41, HdrLen: 4, SegsLeft: 1, LastEntry: 1, NSID: a(eg), LSID: a(eg)}},
		{name: "insert-tcp", want: Packet{Family: IPv6, OrigSrc: a(src), OrigDst: a("fc00:d2::1"), Proto: 6, HasPorts: true, SPort: 40000, DPort: 443,
			HasSRH: true, OuterSrc: a(src), OuterDst: a(sid), NextHdr: 6, HdrLen: 8, SegsLeft: 2, LastEntry: 3, Tag: 77,
			PSID: a("fc00:9::1"), NSID: a(eg), LSID: a("fc00:d2::1")}},
		{name: "insert-destopt-udp", want: Packet{Family: IPv6, OrigSrc: a(src), OrigDst: a("fc00:d2::1"), Proto: 17, HasPorts: true, SPort: 9, DPort: 10,
			HasSRH: true, OuterSrc: a(src), OuterDst: a(sid), NextHdr: 60, HdrLen: 4, SegsLeft: 1, LastEntry: 1, NSID: a("fc00:d2::1"), LSID: a("fc00:d2::1")}},
		{name: "insert-sl0", want: Packet{Family: IPv6, OrigSrc: a(src), OrigDst: a("fc00:d2::1"), Proto: 58, HasICMP: true, ICMPType: 129,
			HasSRH: true, OuterSrc: a(src), OuterDst: a("fc00:d2::1"), NextHdr: 58, HdrLen: 4, SegsLeft: 0, LastEntry: 1, PSID: a(sid), LSID: a("fc00:d2::1")}},
		{name: "nonfirst-frag", want: Packet{Family: IPv6, OrigSrc: a("fc00:1::1"), OrigDst: a("fc00:d1::1"), Proto: 6,
			OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:d1::1")}},
		{name: "first-frag", want: Packet{Family: IPv6, OrigSrc: a("fc00:1::1"), OrigDst: a("fc00:d1::1"), Proto: 17, HasPorts: true, SPort: 11, DPort: 12,
			OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:d1::1")}},
		{name: "err-truncated-tcp", err: ErrTruncated},
		{name: "err-routing-type0", err: ErrBadSRH},
		{name: "err-sl-gt-last", err: ErrBadSRH},
		{name: "err-list-too-long", err: ErrBadSRH},
		{name: "err-inner-version", err: ErrBadInner},
		{name: "err-inner-v4-short", err: ErrTruncated},
		{name: "err-v4", err: ErrNotIPv6},
	}
	if len(tests) != len(defs) {
		t.Fatalf("%d cases for %d packets", len(tests), len(defs))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, ok := pk[tt.name]
			if !ok {
				t.Fatalf("scapy built no packet %s", tt.name)
			}
			got, err := Extract(raw)
			if tt.err != nil {
				var pe *PacketError
				if !errors.Is(err, tt.err) || !errors.As(err, &pe) {
					t.Fatalf("Extract err = %v, want %v (packet %x)", err, tt.err, raw)
				}
				t.Logf("%v", err)
				return
			}
			if err != nil {
				t.Fatalf("Extract: %v (packet %x)", err, raw)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Extract:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestExtractTruncations cuts a valid encapsulated packet at every length:
// each prefix is either an error or (never) a wrong parse; no panics.
func TestExtractTruncations(t *testing.T) {
	pkt := encapUDP()
	full, err := Extract(pkt)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(pkt); n++ {
		cut := append([]byte(nil), pkt[:n]...)
		if _, err := Extract(cut); !errors.Is(err, ErrTruncated) {
			t.Errorf("cut at %d: err = %v, want truncated", n, err)
		}
	}
	// Trailing bytes beyond the payload length (Ethernet padding) are ignored.
	padded := append(append([]byte(nil), pkt...), 0, 0, 0, 0)
	if got, err := Extract(padded); err != nil || !reflect.DeepEqual(got, full) {
		t.Errorf("padded: %+v, %v", got, err)
	}
}

// encapUDP is an encap-mode packet built by hand (no scapy needed):
// outer fc00:1::1 → fc00:2::f1:0, SRH [fc00:3::d6, fc00:2::f1:0] SL 1,
// inner fc00:a::1 → fc00:d1::1 UDP 5000 → 53.
func encapUDP() []byte {
	inner := make([]byte, 40+8)
	inner[0] = 0x60
	inner[5] = 8
	inner[6] = 17
	inner[7] = 64
	copy(inner[8:], a("fc00:a::1").AsSlice())
	copy(inner[24:], a("fc00:d1::1").AsSlice())
	inner[40], inner[41], inner[42], inner[43] = 0x13, 0x88, 0, 53
	inner[45] = 8
	srh := make([]byte, 8+32)
	srh[0], srh[1], srh[2], srh[3], srh[4] = 41, 4, 4, 1, 1
	copy(srh[8:], a("fc00:3::d6").AsSlice())
	copy(srh[24:], a("fc00:2::f1:0").AsSlice())
	outer := make([]byte, 40)
	outer[0] = 0x60
	plen := len(srh) + len(inner)
	outer[4], outer[5] = byte(plen>>8), byte(plen)
	outer[6], outer[7] = 43, 64
	copy(outer[8:], a("fc00:1::1").AsSlice())
	copy(outer[24:], a("fc00:2::f1:0").AsSlice())
	return append(append(outer, srh...), inner...)
}
