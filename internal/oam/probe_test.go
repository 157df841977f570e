package oam

import (
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/segchain/segchain/internal/config"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// The probe is a flow the classifier matches: addresses inside its
// prefixes (the lab's own first), the low end of its port ranges.
func TestProbeFor(t *testing.T) {
	hosts := addrs("fc00:4d::d", "198.18.4.13")
	for _, tc := range []struct {
		m    config.Match
		want string
	}{
		{config.Match{Src: "fc00:1a::/64", Dst: "fc00:4d::/64"}, "udp fc00:1a::a:49152 → fc00:4d::d:33434"},
		{config.Match{Dst: "fc00:4d::/64", Proto: "tcp", Dport: "8080"}, "tcp fc00:1a::a:49152 → fc00:4d::d:8080"},
		{config.Match{Dst: "fc00:4d::/64", Proto: "udp", Sport: "7000-7100", Dport: "6000-6999"}, "udp fc00:1a::a:7000 → fc00:4d::d:6000"},
		{config.Match{Dst: "198.18.4.0/24"}, "udp 198.18.1.10:49152 → 198.18.4.13:33434"},
		{config.Match{Dst: "fc00:99::/64", Proto: "ipv6-icmp"}, "icmp fc00:1a::a → fc00:99::1"},
	} {
		p, err := probeFor(tc.m, addrs("fc00:1a::a", "198.18.1.10"), hosts)
		if err != nil || p.String() != tc.want {
			t.Errorf("%+v: %v %v, want %s", tc.m, p, err, tc.want)
		}
	}
	if _, err := probeFor(config.Match{Dst: "fc00:4d::/64", Proto: "sctp"}, addrs("fc00:1a::a"), hosts); err == nil {
		t.Error("sctp: no error")
	}
}

// The frame decodes (gopacket) as the flow with the marker first in the
// payload (checksums: tshark checks them on the delivered probe, test/oam).
func TestProbeFrame(t *testing.T) {
	p := Probe{Src: netip.MustParseAddr("fc00:1a::a"), Dst: netip.MustParseAddr("fc00:4d::d"), Proto: "tcp", Sport: 49152, Dport: 8080}
	b, err := p.frame(make([]byte, 6), make([]byte, 6), 0x1122334455667788, 7)
	if err != nil {
		t.Fatal(err)
	}
	pk := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	tcp, _ := pk.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if tcp == nil || !tcp.SYN || tcp.DstPort != 8080 || len(tcp.Payload) < 12 || tcp.Payload[0] != 0x88 || tcp.Payload[8] != 7 {
		t.Fatalf("decoded %v", pk)
	}
}
