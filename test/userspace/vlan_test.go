package userspace_test

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// TestPrivilegedVLANTagsSteered: frames to a bound SID behind 802.1Q /
// 802.1ad tags. The kernel removes priority tags (VID 0, however many,
// after XDP) and processes the frame as untagged IPv6: to the SID, that
// was its route for it — with on-failure bypass the End route, so the
// service (an IPS) was skipped while alive. A tag with a VLAN ID goes to
// a VLAN device (none here) or is for another host: dropped. The steering
// program must agree: the service sees every priority-tagged frame (tags
// removed) and none with a VLAN ID; the sink (tshark) receives exactly
// what the service forwarded, untagged. An untagged marker ends the burst.
func TestPrivilegedVLANTagsSteered(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	tp := svctest.New(t, "h12v")
	var mu sync.Mutex
	var seen []string
	h := func(p *srv6svc.Packet) srv6svc.Verdict {
		if f, ok := p.InnerFlow(); ok {
			mu.Lock()
			seen = append(seen, fmt.Sprint(f.SrcPort))
			mu.Unlock()
		}
		return srv6svc.Forward
	}
	s := serveIn(t, tp, srv6svc.Config{Name: "tags", SIDs: []netip.Prefix{netip.MustParsePrefix("fc00:5::100/128")},
		OnFailure: srv6svc.OnFailureBypass}, h)
	prio0 := "Dot1Q(vlan=0, prio=5)/"
	cases := []struct {
		port   int
		tags   string
		served bool
		// otherhost: the kernel drops it as for another host (ip -s -s
		// link's otherhost on the input); a VLAN ID in front of an
		// in-band tag is dropped as an unknown protocol instead.
		otherhost bool
	}{
		{1001, "", true, false},
		{1002, "Dot1Q(vlan=0, prio=5)/", true, false},
		{1003, "Dot1AD(vlan=0, prio=3)/", true, false},
		{1004, "Dot1AD(vlan=0)/Dot1Q(vlan=0)/", true, false},
		{1005, strings.Repeat(prio0, 4), true, false},
		{1006, "Dot1Q(vlan=100)/", false, true},
		{1007, "Dot1Q(vlan=0)/Dot1Q(vlan=100)/", false, true},
		{1008, "Dot1AD(vlan=100)/Dot1Q(vlan=0)/", false, false},
		{1009, strings.Repeat(prio0, 3) + "Dot1AD(vlan=7)/", false, true},
		{1999, "", true, false}, // marker
	}
	var b strings.Builder
	b.WriteString("import os\nos.sched_setaffinity(0, {0})\nfr = []\n")
	var want []string
	var oh uint64
	ohBefore := testutil.RxOtherhost(t, tp.NFV, tp.NIn)
	for _, c := range cases {
		if c.otherhost {
			oh++
		}
		fmt.Fprintf(&b, "fr.append(Ether(dst=%q)/%sIPv6(src=TIN, dst='fc00:5::100', hlim=64)/"+
			"IPv6ExtHdrSegmentRouting(addresses=[FINAL, NEXT, 'fc00:5::100'], segleft=2, nh=41)/"+
			"IPv6(src='2001:db8::1', dst='2001:db8::2')/UDP(sport=%d, dport=9)/Raw(b'v'*16))\n", tp.NInMAC, c.tags, c.port)
		if c.served {
			want = append(want, fmt.Sprint(c.port))
		}
	}
	fmt.Fprintf(&b, "sendp(fr, iface=%q, verbose=False)\n", tp.TIn)
	sort.Strings(want)
	cp := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64 or vlan", len(want))
	testutil.RunScapyIn(t, tp.Tester, fmt.Sprintf("NEXT, FINAL, TIN = %q, %q, %q\n", svctest.Next, svctest.Final, svctest.TesterIn)+b.String())
	pkts := testutil.Tshark(t, cp.Wait(10*time.Second), "vlan.id", "ipv6.dst", "ipv6.hlim", "ipv6.routing.segleft", "udp.srcport")
	var atSink []string
	for _, p := range pkts {
		atSink = append(atSink, p.First("udp.srcport"))
		if len(p["vlan.id"]) > 0 || p.First("ipv6.dst") != svctest.Next || p.First("ipv6.routing.segleft") != "1" || p.First("ipv6.hlim") != "63" {
			t.Errorf("at the sink: %v; want untagged, dst %s, SL 1, hop limit 63", p, svctest.Next)
		}
	}
	sort.Strings(atSink)
	c := s.Counters()
	mu.Lock()
	defer mu.Unlock()
	sort.Strings(seen)
	if strings.Join(seen, " ") != strings.Join(want, " ") {
		t.Errorf("the service saw %v, want %v (every priority-tagged frame, none with a VLAN ID); counters %+v", seen, want, c)
	}
	if strings.Join(atSink, " ") != strings.Join(want, " ") {
		t.Errorf("the sink got %v, want %v", atSink, want)
	}
	if d := testutil.RxOtherhost(t, tp.NFV, tp.NIn) - ohBefore; d != oh {
		t.Errorf("the kernel dropped %d frames on %s as for another host, want %d", d, tp.NIn, oh)
	}
	if c.Steered != uint64(len(want)) || c.NoSocketBypass != 0 || c.DropMalformed != 0 {
		t.Errorf("counters %+v: want %d steered, nothing bypassed or malformed", c, len(want))
	}
}
