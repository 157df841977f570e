package main

import (
	"net/netip"
	"testing"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/srv6svctest"
)

// TestCount (no root): flows counted per SID and 5-tuple, every packet
// forwarded.
func TestCount(t *testing.T) {
	sid := netip.MustParseAddr("fc00:5::100")
	segs := []netip.Addr{netip.MustParseAddr("fc00:9::99"), netip.MustParseAddr("fc00:9::1"), sid}
	acc := newAccounting(10)
	f := func(inner []byte) []byte { return srv6svctest.Frame(netip.MustParseAddr("fc00:1::1"), segs, 2, inner) }
	a := srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 1111, 53, make([]byte, 10))
	rs := srv6svctest.New(netip.PrefixFrom(sid, 128)).RunBatch(func(ps []*srv6svc.Packet, _ []srv6svc.Verdict) {
		for _, p := range ps {
			acc.count(p)
		}
	}, f(a), f(a), f(srv6svctest.TCP4("192.0.2.1", "198.51.100.7", 2222, 80, nil)))
	for i, r := range rs {
		if !r.Sent {
			t.Errorf("packet %d dropped: %s", i, r.Dropped)
		}
	}
	if len(acc.flows) != 2 {
		t.Fatalf("%d flows, want 2", len(acc.flows))
	}
	for k, c := range acc.flows {
		if k.sid != sid || (c.packets != 2 && c.packets != 1) {
			t.Errorf("flow %+v: %+v", k, c)
		}
	}
}
