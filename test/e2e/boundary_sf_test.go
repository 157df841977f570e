package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// TestBoundarySFAddress: an SF behind a proxy is reached through its proxy
// only (the fuzzer's found-sf-address frames, issue 24). From host s,
// SRv6 addressed to sf1's own address (its SRH continuing to d, or to the
// firewalled chain's End.DX6) and plain IPv6 to it are dropped at the
// ingress' boundary interface and counted as to-sf; none reaches sf1 or
// d. Behind the boundary, sf1's kernel drops an SRH addressed to it
// (seg6_enabled 0 on sf nodes): it does not forward it on, and it would
// with seg6_enabled 1 (the control).
func TestBoundarySFAddress(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	e := setup(t, "../../examples/default.yaml")
	e.apply()
	sf := "fc00:27::7"
	dxfw := e.sid(config.EgressKey("firewalled"))

	t.Run("from outside", func(t *testing.T) {
		atSF := testutil.StartInboundCapture(t, e.NS("sf1"), "eth-nfv1", "ip6", 0)
		e.expectDropped(t, []attack{
			{name: "SRH to the SF's address, continuing to d",
				scapy: fmt.Sprintf("IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['fc00:4d::d','%s'], segleft=1, lastentry=1)", sf, sf),
				node:  "ingress", iface: "eth-s", reason: "to-sf"},
			{name: "SRH to the SF's address, continuing to the End.DX6",
				scapy: fmt.Sprintf("IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['%s','%s'], segleft=1, lastentry=1)/IPv6(src='fc00:1a::a', dst='fc00:4d::d')", sf, dxfw, sf),
				node:  "ingress", iface: "eth-s", reason: "to-sf"},
			{name: "plain IPv6 to the SF's address",
				scapy: fmt.Sprintf("IPv6(src='fc00:1a::a', dst='%s')", sf),
				node:  "ingress", iface: "eth-s", reason: "to-sf"},
		}, 5)
		for _, p := range testutil.Tshark(t, atSF.Wait(0), "data.data") {
			if strings.Contains(p.First("data.data"), fmt.Sprintf("%x", "attack-")) {
				t.Errorf("an attack from s reached sf1: %v", p)
			}
		}
		if err := e.ping("s", "fc00:4d::d"); err != nil {
			t.Errorf("web (ping s -> d) after the attacks: %v", err)
		}
	})

	t.Run("the SF's kernel drops an SRH addressed to it", func(t *testing.T) {
		for _, k := range []string{"all", "eth-nfv1"} {
			if v := sysctl(t, e.NS("sf1"), k); v != "0" {
				t.Errorf("sf1 net.ipv6.conf.%s.seg6_enabled = %s, want 0", k, v)
			}
		}
		if n := e.srhThroughSF(t, 5); n != 0 {
			t.Errorf("seg6_enabled 0: sf1 forwarded %d of 5 SRv6 packets addressed to it", n)
		}
		// The control: with SRv6 on, sf1 acts on the SRH and sends the
		// packet on to d (what the boundary alone stood against); apply
		// sees the drift and turns it off again.
		for _, k := range []string{"all", "eth-nfv1"} {
			testutil.Exec(t, e.NS("sf1"), "sysctl", "-qw", "net.ipv6.conf."+k+".seg6_enabled=1")
		}
		if n := e.srhThroughSF(t, 5); n != 5 {
			t.Errorf("seg6_enabled 1 (control): sf1 forwarded %d of 5, want 5", n)
		}
		if res := e.apply(); res.Changes() == 0 {
			t.Error("apply saw no drift in sf1's seg6_enabled")
		}
		if n := e.srhThroughSF(t, 5); n != 0 {
			t.Errorf("after re-apply: sf1 forwarded %d of 5", n)
		}
	})
}

// srhThroughSF sends, from nfv1 on its link to sf1 (past the boundary),
// count SRv6 packets addressed to sf1 whose SRH continues to d, then one
// plain packet to d through sf1 (a sentinel: sf1 forwards it back to nfv1
// after the others), and returns how many of the SRv6 ones sf1 sent on.
func (e *env) srhThroughSF(t *testing.T, count int) int {
	t.Helper()
	c := testutil.StartInboundCapture(t, e.NS("nfv1"), "eth-sf1", "ip6 dst fc00:4d::d", 0)
	back := testutil.StartInboundCapture(t, e.NS("nfv1"), "eth-sf1", "ip6 dst fc00:4d::d and udp port 7101", 1)
	testutil.RunScapyIn(t, e.NS("nfv1"), fmt.Sprintf(`
conf.verb = 0
eth = Ether(dst=%q)
sendp(eth/IPv6(src='fc00:1a::a', dst='fc00:27::7')/IPv6ExtHdrSegmentRouting(addresses=['fc00:4d::d','fc00:27::7'], segleft=1, lastentry=1)/UDP(sport=4000, dport=7100)/Raw(b'srh-to-sf'), iface='eth-sf1', count=%d)
sendp(eth/IPv6(src='fc00:1a::a', dst='fc00:4d::d')/UDP(sport=4000, dport=7101)/Raw(b'sentinel'), iface='eth-sf1')
`, e.mac("sf1", "eth-nfv1"), count))
	back.Wait(5 * time.Second) // the sentinel is back: so is whatever sf1 forwarded before it
	var n int
	sentinel := false
	for _, p := range testutil.Tshark(t, c.Wait(0), "data.data") {
		switch d := p.First("data.data"); {
		case strings.Contains(d, fmt.Sprintf("%x", "srh-to-sf")):
			n++
		case strings.Contains(d, fmt.Sprintf("%x", "sentinel")):
			sentinel = true
		}
	}
	if !sentinel {
		t.Fatal("the sentinel did not come back through sf1")
	}
	return n
}

// sysctl reads net.ipv6.conf.<iface>.seg6_enabled in ns.
func sysctl(t *testing.T, ns, iface string) string {
	t.Helper()
	var v string
	err := nsutil.Do(ns, func() error {
		b, err := os.ReadFile(filepath.Join("/proc/sys/net/ipv6/conf", iface, "seg6_enabled"))
		v = strings.TrimSpace(string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
