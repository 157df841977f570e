package srv6svc

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPrivilegedGenericXDP: an input interface whose MTU is too large for
// native XDP on veth gets the program in generic mode, reported in Mode,
// and the service works the same.
func TestPrivilegedGenericXDP(t *testing.T) {
	tp := svctest.New(t, "h17g")
	testutil.Exec(t, tp.NFV, "ip", "link", "set", tp.NIn, "mtu", "9000")
	testutil.Exec(t, tp.Tester, "ip", "link", "set", tp.TIn, "mtu", "9000")
	s := serve(t, tp, Config{Name: "generic", SIDs: []netip.Prefix{sid("fc00:5::100/128")}, Queues: 1},
		func(*Packet) Verdict { return Forward }, nil)
	if !strings.Contains(s.Mode(), tp.NIn+":generic") {
		t.Errorf("mode %q: want %s:generic", s.Mode(), tp.NIn)
	}
	c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 3)
	tp.Send(t, "", `[srv6("fc00:5::100", [FINAL, NEXT, "fc00:5::100"], 2, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=i, dport=9)) for i in range(3)]`)
	if n := len(testutil.Tshark(t, c.Wait(5*time.Second), "ipv6.dst")); n != 3 {
		t.Errorf("sink got %d packets, want 3 (counters %+v)", n, s.Counters())
	}
}
