package proxy_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// segchainBin is the CLI under test, built once by TestMain (or taken from
// $SEGCHAIN_BIN); only the tests that drive the binary need it.
var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

func ipNetnsExec(t *testing.T, ns string, args ...string) string {
	t.Helper()
	return testutil.IPNetnsExec(t, segchainBin, ns, args...)
}

// TestProxiesUnderIPNetnsExec: each eBPF proxy added by `ip netns exec NS
// segchain sid add` persists after the command: a second, separate `ip
// netns exec` invocation and `--netns NS` both show it, and traffic goes
// through it to the server.
func TestProxiesUnderIPNetnsExec(t *testing.T) {
	testutil.RequireScapy(t)
	tp := newTopo(t)
	testutil.Exec(t, tp.srv, "sysctl", "-qw", "net.ipv6.conf.all.seg6_enabled=1")
	testutil.Exec(t, tp.srv, "sysctl", "-qw", "net.ipv6.conf.e0.seg6_enabled=1")
	for i, c := range []struct {
		name, sid, add, show, route string
	}{
		{"End.AD", "fc00:2::ad", "End.AD6 nh6 fc00:5f::2 oif sf0 iif sf0", "End.AD",
			"encap seg6 mode encap segs fc00:2::ad,fc00:4::d6"},
		{"End.AS", "fc00:2::a5", "End.AS inner ipv6 nh6 fc00:5f::2 oif sf0 iif sf0 src fc00:2::5 segs fc00:4::d6", "End.AS",
			"encap seg6 mode encap segs fc00:2::a5"},
		{"End.AM", "fc00:2::a3", "End.AM nh6 fc00:5f::2 oif sf0 iif sf0", "End.AM",
			"encap seg6 mode inline segs fc00:2::a3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ipNetnsExec(t, tp.nfv, append([]string{"sid", "add", c.sid}, strings.Fields(c.add)...)...)
			defer ipNetnsExec(t, tp.nfv, "sid", "del", c.sid)
			for _, show := range []string{
				ipNetnsExec(t, tp.nfv, "sid", "show"),
				ipNetnsExec(t, tp.nfv, "sid", "show", c.sid),
				ipNetnsExec(t, "", "sid", "--netns", tp.nfv, "show", c.sid),
			} {
				if !strings.Contains(show, c.sid+" "+c.show) {
					t.Fatalf("%s %s not shown after the adding command exited:\n%s", c.sid, c.show, show)
				}
			}
			port := 4100 + i
			testutil.Exec(t, tp.edge, append([]string{"ip", "-6", "route", "replace", "fc00:5::/64"}, append(strings.Fields(c.route), "dev", "n0")...)...)
			atSrv := startCapture(t, tp.srv, "e0", "ip6") // End.AM delivers with the SRH: no "udp" BPF match
			scapy(t, tp.cl, rawSockets+fmt.Sprintf(`
send(IPv6(src="fc00:c::2", dst="fc00:5::2")/UDP(sport=5, dport=%d)/Raw(b"ip netns exec"), count=4)
`, port))
			srv := atSrv.fields("udp", "ipv6.dst", "udp.dstport")
			if got := count(srv, fmt.Sprintf("fc00:5::2|%d", port)); got != 4 {
				t.Errorf("server got %d packets through %s, want 4:\n%s", got, c.name, strings.Join(srv, "\n"))
			}
			st := status(t, tp.nfv, c.sid)
			if st.Counters.InPackets != 4 || st.Counters.OutPackets != 4 {
				t.Errorf("proxy counters %+v", st.Counters)
			}
		})
	}
}
