package fw_test

import (
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// TestHarnessNativeEnd checks the test network, the captures and the
// marker decoding with the kernel's own End on the firewall SID prefix in
// place of the firewall: every packet goes to the next segment.
func TestHarnessNativeEnd(t *testing.T) {
	testutil.RequirePrivileged(t)
	testutil.RequireTool(t, "tcpdump")
	testutil.RequireScapy(t)
	tp := newNetwork(t)
	testutil.Exec(t, tp.fw, "ip", "-6", "route", "add", fwSID, "encap", "seg6local", "action", "End", "dev", "i0")
	caps := tp.capture(t)
	tp.send(t, `
pkts.append(encap(IPv6(src='fc00:a::1', dst=FINAL)/UDP(dport=53)/mark('enc')))
pkts.append(encap(IP(src='10.0.0.1', dst='10.0.0.2')/UDP(dport=53)/mark('enc4'), segs=[FINAL, EG, SID], sl=2))
pkts.append(insert(TCP(dport=80)/mark('ins'), segs=[FINAL, EG, IDS, 'fc00:2::f1:7']))
pkts.append(IPv6(src=SRC, dst='fc00:99::1')/UDP(dport=7)/mark('unroutable'))
`)
	check(t, caps.collect(), map[string]outcome{
		"enc":        toIDS,
		"enc4":       {where: "eg-direct", da: egSID, sl: 1},
		"ins":        toIDS,
		"unroutable": {where: "in", icmp: 1},
	})
}
