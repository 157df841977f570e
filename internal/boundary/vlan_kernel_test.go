package boundary

import (
	"fmt"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// TestKernelUntagsPriorityTags checks the kernel behaviour the filter's
// VLAN handling rests on (docs/security.md, "VLAN tags do not hide a
// packet"): a frame whose IPv6 packet sits behind any number of VID 0
// tags (802.1ad or 802.1Q) is delivered as IPv6 after the TCX hook, and
// one with a non-zero VID, on a device without a VLAN device for it, is
// not. Sent with scapy over a veth; the oracle is the receiver's ICMPv6
// echo request counter.
func TestKernelUntagsPriorityTags(t *testing.T) {
	testutil.RequireScapy(t)
	a, b := testutil.NewNetns(t, "vlana"), testutil.NewNetns(t, "vlanb")
	testutil.Exec(t, a, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", b)
	testutil.Exec(t, a, "ip", "addr", "add", "fd99::1/64", "dev", "eth0", "nodad")
	testutil.Exec(t, b, "ip", "addr", "add", "fd99::2/64", "dev", "eth0", "nodad")
	testutil.Exec(t, a, "ip", "link", "set", "eth0", "up")
	testutil.Exec(t, b, "ip", "link", "set", "eth0", "up")
	mac := strings.TrimSpace(testutil.Exec(t, b, "cat", "/sys/class/net/eth0/address"))
	cases := []struct {
		tags      string // scapy layers between Ether and IPv6
		delivered bool
	}{
		{"", true},
		{"Dot1Q(vlan=0)/", true},
		{"Dot1AD(vlan=0)/Dot1Q(vlan=0)/", true},
		{"Dot1AD(vlan=0)/Dot1Q(vlan=0)/Dot1Q(vlan=0)/Dot1Q(vlan=0)/Dot1Q(vlan=0)/Dot1Q(vlan=0)/", true},
		{"Dot1Q(vlan=5)/", false},
		{"Dot1AD(vlan=0)/Dot1Q(vlan=5)/", false},
	}
	// One scapy run: per case, 3 tagged echo requests, then an untagged
	// sentinel; the veth hands frames to the peer in order, so once the
	// sentinel is counted the case's frames have been judged (no sleep).
	var script strings.Builder
	fmt.Fprintf(&script, `
import subprocess, time
conf.verb = 0
def echos():
    for l in subprocess.run(['ip', 'netns', 'exec', %q, 'cat', '/proc/net/snmp6'], capture_output=True, text=True).stdout.splitlines():
        f = l.split()
        if len(f) == 2 and f[0] == 'Icmp6InEchos':
            return int(f[1])
def case(*tags):
    before = echos()
    p = Ether(dst=%q)
    for t in tags:
        p = p/t
    sendp(p/IPv6(src='fd99::1', dst='fd99::2')/ICMPv6EchoRequest(), iface='eth0', count=3)
    sendp(Ether(dst=%q)/IPv6(src='fd99::1', dst='fd99::2')/ICMPv6EchoRequest(), iface='eth0')
    for _ in range(500):
        n = echos() - before
        if n >= 1 and (n == 1 or n == 4):
            break
        time.sleep(0.01)
    print(n - 1)
`, b, mac, mac)
	for _, tc := range cases {
		fmt.Fprintf(&script, "case(%s)\n", strings.ReplaceAll(strings.TrimSuffix(tc.tags, "/"), "/", ", "))
	}
	out := strings.Fields(string(testutil.RunScapyIn(t, a, script.String())))
	if len(out) != len(cases) {
		t.Fatalf("scapy printed %q, want one count per case", out)
	}
	for i, tc := range cases {
		want := "0"
		if tc.delivered {
			want = "3"
		}
		if out[i] != want {
			t.Errorf("tags %q: %s of 3 echo requests received, want %s", tc.tags, out[i], want)
		}
	}
}
