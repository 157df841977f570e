package oam

import (
	"net"
	"testing"
	"time"
)

// proxyChain is the default lab's firewalled chain as expectedHops lists it.
func proxyChain() []Hop {
	return []Hop{
		{Kind: KindHeadend, Node: "ingress"},
		{Kind: KindSID, Node: "nfv1", SID: "fc00:2::b324:0", Service: "nfv1-fw"},
		{Kind: KindSF, Node: "sf1", Service: "nfv1-fw"},
		{Kind: KindSID, Node: "nfv2", SID: "fc00:3::695e:0", Service: "nfv2-end"},
		{Kind: KindEgress, Node: "egress", SID: "fc00:4::a7c9:0"},
		{Kind: KindDelivery, Node: "d"},
	}
}

func ev(us int, node, iface, da string) Event {
	return Event{At: time.Duration(us) * time.Microsecond, Point: Point{Node: node, Iface: iface, Ingress: true}, DA: net.ParseIP(da)}
}

var fullPath = []Event{
	ev(0, "ingress", "eth-s", "fc00:4d::d"),
	ev(10, "r1", "eth-ingress", "fc00:2::b324:0"),
	ev(20, "nfv1", "eth-r1", "fc00:2::b324:0"),
	ev(30, "sf1", "eth-nfv1", "fc00:4d::d"),
	ev(40, "nfv1", "eth-sf1", "fc00:4d::d"),
	ev(50, "r2", "eth-nfv1", "fc00:3::695e:0"),
	ev(60, "nfv2", "eth-r2", "fc00:3::695e:0"),
	ev(70, "egress", "eth-nfv2", "fc00:4::a7c9:0"),
	ev(80, "d", "eth-egress", "fc00:4d::d"),
}

var links = map[string]string{"sf1:eth-nfv1": "nfv1:eth-sf1", "nfv1:eth-sf1": "sf1:eth-nfv1", "r2:eth-nfv1": "nfv1:eth-r2"}

func TestMatchProxyChain(t *testing.T) {
	hops := proxyChain()
	match(hops, fullPath, links)
	if b := broken(hops, fullPath, nil); b != nil {
		t.Fatalf("broken %+v", b)
	}
	for i, h := range hops {
		if !h.Reached || h.Inferred {
			t.Fatalf("hop %d %s not reached", i, h.Name())
		}
	}
	p, sf := hops[1], hops[2]
	// The proxy holds the probe from its arrival to the re-encapsulated
	// packet's arrival at r2: to the SF and back.
	if *p.AtUS != 20 || *p.HeldUS != 30 || p.Out != "eth-r2" || len(hops[3].Via) != 1 || hops[3].Via[0] != "r2" {
		t.Errorf("proxy hop %+v at %v held %v, nfv2 via %v", p, *p.AtUS, *p.HeldUS, hops[3].Via)
	}
	if *sf.AtUS != 30 || *sf.HeldUS != 10 || sf.Out != "eth-nfv1" {
		t.Errorf("SF hop %+v at %v held %v", sf, *sf.AtUS, *sf.HeldUS)
	}
}

func TestBrokenNamesTheHop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		upto   int // the probe's sightings up to this one
		hop    int
		reason string
	}{
		{"SF drops", 4, 2, "did not leave"},
		{"SF not reached", 3, 2, "not reached"},
		{"proxy does not re-encapsulate", 5, 1, "did not leave (its SF returned the probe)"},
		{"route lost on r2", 6, 3, "not reached"},
		{"egress does not deliver", 8, 4, "did not leave"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hops := proxyChain()
			evs := fullPath[:tc.upto]
			match(hops, evs, links)
			b := broken(hops, evs, []Delta{{Node: "r2", Counter: "Ip6OutNoRoutes", Delta: 1}, {Node: "nfv1", Counter: "SID fc00:2::b324:0 packets", Delta: 1}})
			if b == nil || b.Hop != tc.hop || b.Reason != tc.reason {
				t.Fatalf("broken %+v, want hop %d %q", b, tc.hop, tc.reason)
			}
			if len(b.Drops) != 1 || b.Drops[0].Counter != "Ip6OutNoRoutes" {
				t.Errorf("drops %+v: want the drop counter only", b.Drops)
			}
		})
	}
}

// A hop the tap cannot see (served in XDP before tc) is inferred from a
// later one, not reported broken.
func TestMatchInfersUnseenHop(t *testing.T) {
	hops := proxyChain()
	var evs []Event
	for _, e := range fullPath {
		if e.Point.Node != "nfv2" {
			evs = append(evs, e)
		}
	}
	match(hops, evs, links)
	if b := broken(hops, evs, nil); b != nil || !hops[3].Inferred || hops[3].Reached {
		t.Fatalf("broken %+v, nfv2 %+v", b, hops[3])
	}
}
