package srv6svc

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPrivilegedLocalNextSID chains two services on one node, bound to the
// same interface: the first one's output comes back through its own veth,
// whose steering program hands the second binding its SID.
func TestPrivilegedLocalNextSID(t *testing.T) {
	tp := svctest.New(t, "h17l")
	var a, b atomic.Int64
	first := serve(t, tp, Config{Name: "first", SIDs: []netip.Prefix{sid("fc00:5::100/128")}},
		func(*Packet) Verdict { a.Add(1); return Forward }, nil)
	second := serve(t, tp, Config{Name: "second", SIDs: []netip.Prefix{sid("fc00:5::101/128")}},
		func(*Packet) Verdict { b.Add(1); return Forward }, nil)
	c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 4)
	tp.Send(t, "", `[srv6("fc00:5::100", [FINAL, "fc00:5::101", "fc00:5::100"], 2, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=i, dport=9)) for i in range(4)]`)
	pkts := testutil.Tshark(t, c.Wait(5*time.Second), "ipv6.dst", "ipv6.routing.segleft")
	if len(pkts) != 4 || a.Load() != 4 || b.Load() != 4 {
		t.Fatalf("sink %d, first saw %d, second saw %d; want 4 each (%+v %+v)", len(pkts), a.Load(), b.Load(), first.Counters(), second.Counters())
	}
	for _, p := range pkts {
		if p.First("ipv6.dst") != svctest.Final || p.First("ipv6.routing.segleft") != "0" {
			t.Errorf("packet %v: want dst %s, SL 0", p, svctest.Final)
		}
	}
}
