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
// to the inner packet and shifts the container on accept; a chain of
// seven uSIDs spills into a second container. In f3216 (six uSIDs a
// container) and in f4816 (five).
func TestFirewallUSID(t *testing.T) {
	for _, format := range []string{config.SIDFormatF3216, config.SIDFormatF4816} {
		t.Run(format, func(t *testing.T) { firewallUSID(t, format) })
	}
}

func firewallUSID(t *testing.T, format string) {
	l := up(t, "../../examples/default.yaml", format, basicFirewall, longChain)
	t.Run("a chain longer than one container spills into the SRH", func(t *testing.T) { l.checkLong(t) })
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
	_, seq, err := rfcDecode(netip.MustParseAddr(w[0].First("ipv6.dst")), l.f.lbl())
	if err != nil || len(seq) == 0 || seq[0] != fwSID || len(w[0]["ipv6.routing.type"]) != 0 {
		t.Errorf("at nfv2: DA %s (C-SIDs %v, %v), routing types %v; want the firewall's uSID %s active, no SRH",
			w[0].First("ipv6.dst"), seq, err, w[0]["ipv6.routing.type"], fwSID)
	}
}

// longChain adds five End services alternating between nfv2 and nfv1 and
// chain long (UDP 7000-7999) through nfv1-end and them: seven uSIDs with
// the egress, two containers.
func longChain(s string) string {
	svcs := "\nservices:\n"
	for i, n := range []string{"nfv2", "nfv1", "nfv2", "nfv1", "nfv2"} {
		svcs += "  e" + string(rune('a'+i)) + ": {node: " + n + ", behavior: End}\n"
	}
	s = strings.Replace(s, "\nservices:\n", svcs, 1)
	return strings.Replace(s, "\nchains:\n", `
chains:
  long:
    ingress: ingress
    mode: encap
    match: {dst: "fc00:4d::/64", proto: udp, dport: "7000-7999"}
    services: [nfv1-end, ea, eb, ec, ed, ee]
    egress: {node: egress, behavior: End.DX6, nh6: "fc00:4d::d"}
`, 1)
}

// checkLong: chain long is pushed as two containers (the second in a
// reduced SRH), every hop counts the packets, d receives them, and on the
// wire after the ingress tshark sees the SRH with one entry.
func (l *lab) checkLong(t *testing.T) {
	var hops []netip.Addr
	for _, c := range l.p.Chains {
		if c.Name == "long" {
			if len(c.Segments) != 2 || c.Encap != "encap.red" {
				t.Fatalf("chain long pushed as %s %v, want 2 containers with encap.red", c.Encap, c.Segments)
			}
			for _, h := range c.Hops {
				hops = append(hops, h.SID)
			}
		}
	}
	before := l.hopCounters(t)
	wire := testutil.StartCapture(t, l.NS("r1"), "eth-ingress", "ip6 and ip6[6] == 43", 1)
	atD := testutil.StartInboundCapture(t, l.NS("d"), "eth-egress", "udp port 7001", 3)
	testutil.RunScapyIn(t, l.NS("s"), `
for i in range(3):
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=4000+i, dport=7001)/b"long", verbose=0)
`)
	if got := len(testutil.Tshark(t, atD.Wait(10*time.Second), "udp.dstport")); got != 3 {
		t.Errorf("d received %d of 3 packets of chain long", got)
	}
	after := l.hopCounters(t)
	for k, v := range after {
		if strings.HasPrefix(k, "long[") && v-before[k] < 3 {
			t.Errorf("hop %s counted %d packets, want at least 3", k, v-before[k])
		}
	}
	w := testutil.Tshark(t, wire.Wait(5*time.Second), "ipv6.dst", "ipv6.routing.segleft", "ipv6.routing.srh.addr")
	if len(w) == 0 {
		t.Fatal("no SRv6 packet with an SRH at r1")
	}
	p := w[0]
	// Independent reading: the DA's C-SIDs then the SRH entry's.
	_, first, err := rfcDecode(netip.MustParseAddr(p.First("ipv6.dst")), l.f.lbl())
	if err != nil {
		t.Fatal(err)
	}
	_, second, err := rfcDecode(netip.MustParseAddr(p.First("ipv6.routing.srh.addr")), l.f.lbl())
	if err != nil {
		t.Fatal(err)
	}
	got := append(first, second...)
	if len(p["ipv6.routing.srh.addr"]) != 1 || p.First("ipv6.routing.segleft") != "1" || len(got) != len(hops) {
		t.Fatalf("at r1: DA %s, SRH %v SL %s: want one SRH entry, SL 1, %d uSIDs", p.First("ipv6.dst"), p["ipv6.routing.srh.addr"], p.First("ipv6.routing.segleft"), len(hops))
	}
	for i := range hops {
		if got[i] != hops[i] {
			t.Errorf("uSID %d = %s, want hop %s", i, got[i], hops[i])
		}
	}
}
