package usid

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/testutil"
)

// basicFirewall unpins nfv2-fw of the default domain and gives it basic
// rules only (drop UDP 6666, accept the rest), so in f3216 it takes a uSID
// and chain filtered is all uSIDs: one container in the DA, no SRH.
func basicFirewall(s string) string {
	s = strings.Replace(s, "    function: \"0xf1\"\n", "", 1)
	s = strings.Replace(s, "      policy: drop\n", "      policy: accept\n", 1)
	return strings.Replace(s, `        - "-m srh --srh-psid fc00:2::/64 --inner-src fc00:1a::/64 -j ACCEPT"`+"\n", "", 1)
}

// TestFirewallUSID: End.AN.FW serving a uSID in the middle of a container
// (chain filtered: nfv1-end, nfv2-fw, egress in one DA) applies its rules
// to the inner packet and shifts the container on accept.
func TestFirewallUSID(t *testing.T) {
	l := up(t, "../../examples/default.yaml", config.SIDFormatF3216, basicFirewall)
	var fwSID netip.Addr
	for _, c := range l.p.Chains {
		if c.Name != "filtered" {
			continue
		}
		if c.Encap != "encap.red" || len(c.Segments) != 1 {
			t.Fatalf("chain filtered pushed as %s %v, want one container with encap.red", c.Encap, c.Segments)
		}
		fwSID = c.Hops[1].SID
	}
	fwPackets := func() uint64 {
		cs, err := local.NewLocal("nfv2", l.NS("nfv2")).Counters(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.SID.Contains(fwSID) {
				return c.Packets
			}
		}
		t.Fatalf("nfv2 has no local SID for the firewall uSID %s", fwSID)
		return 0
	}
	before := fwPackets()
	wire := testutil.StartCapture(t, l.NS("nfv2"), "eth-r2", "ip6 and ip6[6] == 41", 1)
	atD := testutil.StartInboundCapture(t, l.NS("d"), "eth-egress", "udp", 0)
	testutil.RunScapyIn(t, l.NS("s"), `
for i in range(3):
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=4000+i, dport=6001)/b"pass", verbose=0)
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=4000+i, dport=6666)/b"blocked", verbose=0)
`)
	if got := waitAtLeast(fwPackets, before+6); got != before+6 {
		t.Errorf("firewall counted %d packets, want 6", got-before)
	}
	waitAtLeast(func() uint64 { return uint64(atD.Count()) }, 3)
	pkts := testutil.Tshark(t, atD.Wait(5*time.Second), "udp.dstport")
	var ports []string
	for _, p := range pkts {
		ports = append(ports, p.First("udp.dstport"))
	}
	if strings.Join(ports, ",") != "6001,6001,6001" {
		t.Errorf("d received UDP to ports %v, want 6001 three times and 6666 never", ports)
	}
	w := testutil.Tshark(t, wire.Wait(5*time.Second), "ipv6.dst", "ipv6.routing.type")
	if len(w) == 0 {
		t.Fatal("nothing captured at nfv2")
	}
	_, seq, err := rfcDecode(netip.MustParseAddr(w[0].First("ipv6.dst")))
	if err != nil || len(seq) == 0 || seq[0] != fwSID || len(w[0]["ipv6.routing.type"]) != 0 {
		t.Errorf("at nfv2: DA %s (C-SIDs %v, %v), routing types %v; want the firewall's uSID %s active, no SRH",
			w[0].First("ipv6.dst"), seq, err, w[0]["ipv6.routing.type"], fwSID)
	}
}
