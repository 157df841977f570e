package oam_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/testutil"
)

// linkMTU is iface's MTU in ns, as iproute2 reads it.
func linkMTU(t *testing.T, ns, iface string) int {
	t.Helper()
	m := regexp.MustCompile(` mtu (\d+) `).FindStringSubmatch(testutil.Exec(t, ns, "ip", "link", "show", iface))
	if m == nil {
		t.Fatalf("%s/%s: no mtu", ns, iface)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// seqOf is the sequence number the scapy senders put first in the UDP
// payload (tshark's data.data, hex).
func seqOf(p testutil.Packet) int {
	d := p["data.data"]
	if len(d) == 0 || len(d[len(d)-1]) < 16 {
		return -1
	}
	n, err := strconv.ParseUint(d[len(d)-1][:16], 16, 64)
	if err != nil {
		return -1
	}
	return int(n)
}

// MTU-sized datagrams through the sampled web chain (1 in 2 marked): 10
// whose encapsulated packet is exactly the headend's link MTU (its link
// to r1 set to 1500), then 10 one byte longer, sent by scapy as Ethernet frames (no PMTU cache at s in
// the way). Marked or not, a packet behaves the same: the 10 that fit
// leave the headend as 1500-byte SRv6 packets (tshark on r1: 5 with the
// O-flag, 5 without) and all 10 reach d; each of the 10 too long, marked
// or not, fails the kernel's MTU check after its encapsulation
// (Ip6InTooBigErrors and Ip6FragFails up by 10 on the headend) and none
// leaves it; no ICMPv6 Packet Too Big reaches s for either (the kernel
// addresses it to the encapsulated packet's source, the headend itself:
// a Linux seg6 headend does not tell the inner source, sampled or not). The
// filter counted 20 and marked 10; each segment saw the 5 marked ones
// that fit.
func TestSampleMTUSized(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	testutil.RequireScapy(t)
	e := setupOF(t, "../../examples/default.yaml", nil)
	pc := e.chain(t, "web")
	ing, _ := e.lab.Netns(pc.Ingress)
	s, _ := e.lab.Netns("s")
	d, _ := e.lab.Netns("d")
	r1, _ := e.lab.Netns("r1")
	r := headendRoute(t, ing, pc.Table, netip.MustParseAddr("fc00:4d::d"))
	// The fabric's links have a 9000-byte MTU, the hosts' 1500: the
	// headend's uplink made 1500 puts the path MTU where s can reach it.
	testutil.Exec(t, ing, "ip", "link", "set", r.Dev, "mtu", "1500")
	testutil.Exec(t, r1, "ip", "link", "set", "eth-"+pc.Ingress, "mtu", "1500")
	mtu := linkMTU(t, ing, r.Dev)
	overhead := 40 + 8 + 16*len(r.Seg6.Segs) // outer IPv6, SRH
	inner := mtu - overhead                  // the longest inner packet that fits
	payload := inner - 40 - 8
	mac := strings.TrimSpace(testutil.Exec(t, ing, "cat", "/sys/class/net/eth-s/address"))
	const n, rate = 10, 2
	script := fmt.Sprintf(`
import struct
pkts = [Ether(dst=%q)/IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/UDP(sport=40000, dport=7000)/Raw(struct.pack(">Q", i) + b"m" * (%d + (1 if i >= %d else 0) - 8)) for i in range(%d)]
sendp(pkts, iface="eth-ingress", inter=0.002, verbose=False)
`, mac, payload, n, 2*n)
	var atR1, atD, atS string
	var before, after map[string]int
	rep := e.sampled(t, "web", rate, func() {
		cr1 := testutil.StartInboundCapture(t, r1, "eth-ingress", "ip6[6] == 43 and ip6[40+2] == 4", 0)
		cd := testutil.StartInboundCapture(t, d, "eth-egress", "udp and dst port 7000", n)
		cs := testutil.StartInboundCapture(t, s, "eth-ingress", "icmp6 and ip6[40] == 2", 0)
		before = testutil.SNMP6(t, ing)
		testutil.RunScapyIn(t, s, script)
		atD = cd.Wait(10 * time.Second)
		// What else would come has come: d has its last datagram.
		atR1, atS = cr1.Wait(time.Second), cs.Wait(time.Second)
		after = testutil.SNMP6(t, ing)
	})

	// r1: the 10 that fit, exactly the MTU, 5 O-flagged.
	flags := map[string]int{}
	for _, p := range testutil.Tshark(t, atR1, "ipv6.plen", "ipv6.routing.srh.flags", "data.data") {
		if got := p.First("ipv6.plen"); got != strconv.Itoa(mtu-40) {
			t.Errorf("r1: an SRv6 packet of payload length %s (seq %d), want %d: the encapsulated packet is the MTU", got, seqOf(p), mtu-40)
		}
		if seqOf(p) >= n {
			t.Errorf("r1: datagram %d (one byte over the MTU) left the headend", seqOf(p))
		}
		flags[p.First("ipv6.routing.srh.flags")]++
	}
	if flags["0x20"] != n/rate || flags["0x00"] != n-n/rate {
		t.Errorf("r1 saw SRH flags %v, want 0x20 × %d and 0x00 × %d", flags, n/rate, n-n/rate)
	}
	// d: the 10 that fit, intact.
	got := map[int]bool{}
	for _, p := range testutil.Tshark(t, atD, "udp.length", "data.data") {
		if p.First("udp.length") != strconv.Itoa(payload+8) {
			t.Errorf("d: datagram %d of UDP length %s, want %d", seqOf(p), p.First("udp.length"), payload+8)
		}
		got[seqOf(p)] = true
	}
	for i := 0; i < n; i++ {
		if !got[i] {
			t.Errorf("d: datagram %d (%s) not received", i, markedOr(i, rate))
		}
	}
	// The headend: each of the 10 too long, marked or not, failed the
	// MTU check after its encapsulation (the kernel's counters), and no
	// Packet Too Big reached s (the kernel's goes to the outer source).
	for _, c := range []string{"Ip6InTooBigErrors", "Ip6FragFails"} {
		if got := after[c] - before[c]; got != n {
			t.Errorf("headend %s went up by %d, want %d (every datagram one byte over, marked or not)", c, got, n)
		}
	}
	if ptb := testutil.Tshark(t, atS, "icmpv6.mtu"); len(ptb) != 0 {
		t.Errorf("s received %d Packets Too Big, want none (Linux's seg6 headend sends its own to the outer source): %v", len(ptb), ptb)
	}
	if rep.Marker != oam.MarkerBoundary || rep.Packets != 2*n || rep.Marked != 2*n/rate {
		t.Errorf("marker %q: counted %d, marked %d; want the boundary filter, %d, %d", rep.Marker, rep.Packets, rep.Marked, 2*n, 2*n/rate)
	}
	for _, h := range rep.Hops {
		want := n / rate
		if h.Kind == oam.KindHeadend {
			want = 2 * n / rate
		}
		if h.Packets != uint64(want) {
			t.Errorf("hop %s %s: %d sampled packets, want %d", h.Kind, h.Node, h.Packets, want)
		}
	}
	noSampleState(t, e, pc.Ingress)
}

// markedOr says whether the filter marked the i-th packet of the chain
// (the 1st, (rate+1)-th, ...).
func markedOr(i, rate int) string {
	if i%rate == 0 {
		return "marked"
	}
	return "not marked"
}

// VLAN-tagged frames at the headend. The kernel pulls a frame's 802.1Q
// tag into skb->vlan_tci before TCX, so boundary_in on eth-s sees a
// tagged frame's IPv6 packet at the untagged offset; after TCX the kernel
// hands a non-zero VID to that VLAN's device (its own pass through TCX,
// its own ifindex, its own iif for the rules) or, with none, drops it,
// and keeps a priority tag's (VID 0) packet on eth-s. This kernel has no
// 802.1Q devices (CONFIG_VLAN_8021Q unset), so VID 100 is dropped. Scapy
// sends web's flow from s as 60 frames tagged VID 100, 60 tagged VID 0
// and 60 untagged, interleaved, while web is sampled 1 in 10: the filter
// counts the 120 the chain carries and marks 12 — none of the VID 100
// ones, which no rule ever sees (counted, they put marks on packets that
// never leave: "incomplete") —; tshark on r1 sees 12 O-flagged and 108
// plain, d receives each of the 120, the VID 100 frames are nowhere.
func TestSampleVLAN(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	testutil.RequireScapy(t)
	e := setupOF(t, "../../examples/default.yaml", nil)
	pc := e.chain(t, "web")
	ing, _ := e.lab.Netns(pc.Ingress)
	s, _ := e.lab.Netns("s")
	d, _ := e.lab.Netns("d")
	r1, _ := e.lab.Netns("r1")
	mac := strings.TrimSpace(testutil.Exec(t, ing, "cat", "/sys/class/net/eth-s/address"))
	// seq % 3: 0 tagged VID 100, 1 tagged VID 0, 2 untagged.
	const n, rate = 180, 10
	script := fmt.Sprintf(`
import struct
def pkt(i):
    p = Ether(dst=%q)
    if i %% 3 == 0:
        p = p/Dot1Q(vlan=100)
    elif i %% 3 == 1:
        p = p/Dot1Q(vlan=0)
    return p/IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=40000, dport=7000)/Raw(struct.pack(">Q", i) + b"v" * 32)
sendp([pkt(i) for i in range(%d)], iface="eth-ingress", inter=0.002, verbose=False)
`, mac, n)
	const want = n * 2 / 3
	var atR1, atD string
	rep := e.sampled(t, "web", rate, func() {
		cr1 := testutil.StartInboundCapture(t, r1, "eth-ingress", "ip6[6] == 43 and ip6[40+2] == 4", want)
		cd := testutil.StartInboundCapture(t, d, "eth-egress", "udp and dst port 7000", want)
		testutil.RunScapyIn(t, s, script)
		atD, atR1 = cd.Wait(10*time.Second), cr1.Wait(10*time.Second)
	})
	if rep.Marker != oam.MarkerBoundary || rep.Packets != want || rep.Marked != want/rate || rep.Incomplete != 0 {
		t.Errorf("marker %q: counted %d, marked %d, incomplete %d; want the boundary filter, %d, %d, 0", rep.Marker, rep.Packets, rep.Marked, rep.Incomplete, want, want/rate)
	}
	for _, h := range rep.Hops {
		if h.Packets != want/rate {
			t.Errorf("hop %s %s: %d sampled packets, want %d", h.Kind, h.Node, h.Packets, want/rate)
		}
	}
	flags := map[string]int{}
	for _, p := range testutil.Tshark(t, atR1, "ipv6.routing.srh.flags", "data.data") {
		if seqOf(p)%3 == 0 {
			t.Errorf("r1: datagram %d (VID 100) left the headend", seqOf(p))
		}
		flags[p.First("ipv6.routing.srh.flags")]++
	}
	if flags["0x20"] != want/rate || flags["0x00"] != want-want/rate {
		t.Errorf("r1 saw SRH flags %v, want 0x20 × %d and 0x00 × %d", flags, want/rate, want-want/rate)
	}
	got := map[int]bool{}
	for _, p := range testutil.Tshark(t, atD, "data.data") {
		got[seqOf(p)] = true
	}
	for i := 0; i < n; i++ {
		if i%3 != 0 && !got[i] {
			t.Errorf("d: datagram %d (%s) not received", i, []string{"", "VID 0", "untagged"}[i%3])
		}
		if i%3 == 0 && got[i] {
			t.Errorf("d: datagram %d (VID 100, no VLAN device) received", i)
		}
	}
	noSampleState(t, e, pc.Ingress)
}

// A headend whose host-facing interface is a bridge's port: eth-s
// enslaved to br0 (before apply: the filter is on both). A frame to br0's
// address passes boundary_in on eth-s, then the bridge hands it to br0,
// where it passes again and is routed (iif br0). 100 datagrams of web's
// flow (scapy) while web is sampled 1 in 10: the filter counts 100 and
// marks 10, each seen at every hop (before: a selector without iif
// matched on both passes — 200 counted, 1 in 5 marked).
func TestSampleBridgePort(t *testing.T) {
	testutil.RequireScapy(t)
	e := setupOF(t, "../../examples/default.yaml", func(l *lab.Lab) {
		ing, _ := l.Netns("ingress")
		testutil.Exec(t, ing, "ip", "link", "add", "br0", "type", "bridge")
		testutil.Exec(t, ing, "ip", "link", "set", "eth-s", "master", "br0")
		testutil.Exec(t, ing, "ip", "link", "set", "br0", "up")
	})
	pc := e.chain(t, "web")
	ing, _ := e.lab.Netns(pc.Ingress)
	s, _ := e.lab.Netns("s")
	samp, ifs, err := boundary.OpenSampling(ing)
	if err != nil {
		t.Fatal(err)
	}
	samp.Close()
	for _, dev := range []string{"eth-s", "br0"} {
		ix, _ := strconv.Atoi(strings.TrimSpace(testutil.Exec(t, ing, "cat", "/sys/class/net/"+dev+"/ifindex")))
		if !slices.Contains(ifs, ix) {
			t.Fatalf("the boundary filter is not on %s (%d): %v", dev, ix, ifs)
		}
	}
	mac := strings.TrimSpace(testutil.Exec(t, ing, "cat", "/sys/class/net/br0/address"))
	const n, rate = 100, 10
	script := fmt.Sprintf(`
import struct
sendp([Ether(dst=%q)/IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=40000, dport=7000)/Raw(struct.pack(">Q", i) + b"b" * 32) for i in range(%d)], iface="eth-ingress", inter=0.002, verbose=False)
`, mac, n)
	d, _ := e.lab.Netns("d")
	var atD string
	rep := e.sampled(t, "web", rate, func() {
		cd := testutil.StartInboundCapture(t, d, "eth-egress", "udp and dst port 7000", n)
		testutil.RunScapyIn(t, s, script)
		atD = cd.Wait(10 * time.Second)
	})
	if rep.Marker != oam.MarkerBoundary || rep.Packets != n || rep.Marked != n/rate || rep.Incomplete != 0 {
		t.Errorf("marker %q (%s): counted %d, marked %d, incomplete %d; want the boundary filter, %d, %d, 0", rep.Marker, rep.MarkerNote, rep.Packets, rep.Marked, rep.Incomplete, n, n/rate)
	}
	for _, h := range rep.Hops {
		if h.Packets != n/rate {
			t.Errorf("hop %s %s: %d sampled packets, want %d", h.Kind, h.Node, h.Packets, n/rate)
		}
	}
	if got := len(testutil.Tshark(t, atD, "data.data")); got != n {
		t.Errorf("d received %d datagrams, want %d", got, n)
	}
	noSampleState(t, e, pc.Ingress)
}
