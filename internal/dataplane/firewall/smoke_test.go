package firewall

import (
	"net/netip"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/testutil"
)

// TestSmokeForwarding sends scapy-crafted SRv6 packets through a firewall
// node between two namespaces: the one a rule drops never arrives, the one
// the policy accepts arrives after End (tcpdump + tshark are the oracle).
//
//	S (s0 fc00:10::2) ── (f0 fc00:10::1) F (f1 fc00:20::1) ── (d0 fc00:20::2) D
func TestSmokeForwarding(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	nsS, nsF, nsD := testutil.NewNetns(t, "fws"), testutil.NewNetns(t, "fwf"), testutil.NewNetns(t, "fwd")
	x := testutil.Exec
	x(t, nsS, "ip", "link", "add", "s0", "type", "veth", "peer", "name", "f0", "netns", nsF)
	x(t, nsF, "ip", "link", "add", "f1", "type", "veth", "peer", "name", "d0", "netns", nsD)
	x(t, nsF, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	for _, c := range []struct{ ns, dev, addr string }{
		{nsS, "s0", "fc00:10::2/64"}, {nsF, "f0", "fc00:10::1/64"}, {nsF, "f1", "fc00:20::1/64"}, {nsD, "d0", "fc00:20::2/64"},
	} {
		x(t, c.ns, "ip", "-6", "addr", "add", c.addr, "dev", c.dev, "nodad")
		x(t, c.ns, "ip", "link", "set", c.dev, "up")
	}
	x(t, nsS, "ip", "-6", "route", "add", "fc00:2::/32", "via", "fc00:10::1")
	x(t, nsF, "ip", "-6", "route", "add", "fc00:4::/32", "via", "fc00:20::2")

	sid := netip.MustParsePrefix("fc00:2::f1:0/112")
	rules, err := fwrule.Parse([]string{"-p", "udp", "--dport", "80", "-j", "DROP"}, fwrule.IPv6)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(nsF, Instance{SID: sid, ArgsBits: 16, Policy: fwrule.Accept, Rules: []fwrule.Rule{rules}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = Remove(nsF, sid) })

	capture := testutil.StartInboundCapture(t, nsD, "d0", "ip6 dst fc00:4::1", 1)
	testutil.RunScapyIn(t, nsS, `
for dport in (80, 81):
    p = IPv6(src="fc00:10::2", dst="fc00:2::f1:0", hlim=64) / \
        IPv6ExtHdrSegmentRouting(addresses=["fc00:4::1", "fc00:2::f1:0"], segleft=1) / \
        IPv6(src="fc00:a::1", dst="fc00:b::1") / UDP(sport=1000, dport=dport) / Raw(b"x" * 16)
    send(p, iface="s0", verbose=False)
`)
	pcap := capture.Wait(5 * time.Second)
	pkts := testutil.Tshark(t, pcap, "ipv6.dst", "ipv6.routing.segleft", "ipv6.hlim", "udp.dstport")
	if len(pkts) != 1 {
		t.Fatalf("received %d packets at D, want 1 (dport 81): %v", len(pkts), pkts)
	}
	p := pkts[0]
	if p.First("ipv6.dst") != "fc00:4::1" || p.First("ipv6.routing.segleft") != "0" || p.First("ipv6.hlim") != "63" || p.First("udp.dstport") != "81" {
		t.Errorf("forwarded packet: %v, want DA fc00:4::1, SL 0, hop limit 63, dport 81", p)
	}
	sts, err := List(nsF)
	if err != nil || len(sts) != 1 {
		t.Fatal(sts, err)
	}
	c := sts[0].Counters
	if sts[0].Rules[0].Packets != 1 || c.Drops["rule"] != 1 || c.GoNext != 1 || c.Forwarded != 1 || c.Policy != 1 {
		t.Errorf("counters: %+v, rule %+v", c, sts[0].Rules[0])
	}
}
