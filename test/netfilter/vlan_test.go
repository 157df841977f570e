package netfilter_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/dataplane/netfilter"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
)

// vlanTopo: A (a0) ── (n0) N (n1) ── (b0) B. N serves the End.AN.NF SID
// fc00:e::e0:0/112 and routes fc00:e::/48 on to B as well, as a node whose
// routes cover its own locator would: a packet for the SID that the kernel
// takes past nf_in (no End, no netfilter) arrives at B still addressed to
// the SID, where the capture sees it. An nft forward chain in N counts
// each case's inner packet by UDP source port: what reached netfilter.
type vlanTopo struct {
	a, n, b string
	n0MAC   string
}

const (
	vlanSID  = "fc00:e::e0:7"
	vlanLast = "fc00:b::1"
)

func newVLANTopo(t *testing.T) vlanTopo {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "nft")
	testutil.RequireTool(t, "tshark")
	tp := vlanTopo{a: testutil.NewNetns(t, "h12va"), n: testutil.NewNetns(t, "h12vn"), b: testutil.NewNetns(t, "h12vb")}
	x := testutil.Exec
	x(t, tp.a, "ip", "link", "add", "a0", "type", "veth", "peer", "name", "n0", "netns", tp.n)
	x(t, tp.n, "ip", "link", "add", "n1", "type", "veth", "peer", "name", "b0", "netns", tp.b)
	x(t, tp.n, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", "net.ipv4.ip_forward=1")
	for _, c := range []struct{ ns, dev, addr string }{
		{tp.a, "a0", "fc00:a::1/64"}, {tp.n, "n0", "fc00:a::2/64"}, {tp.n, "n1", "fc00:b::2/64"}, {tp.b, "b0", "fc00:b::1/64"},
	} {
		x(t, c.ns, "ip", "-6", "addr", "add", c.addr, "dev", c.dev, "nodad")
		x(t, c.ns, "ip", "link", "set", c.dev, "up")
	}
	x(t, tp.n, "ip", "-6", "route", "add", "fc00:e::/48", "via", "fc00:b::1")
	x(t, tp.n, "ip", "-6", "neigh", "replace", "fc00:b::1", "lladdr", svctest.MAC(t, tp.b, "b0"), "dev", "n1", "nud", "permanent")
	tp.n0MAC = svctest.MAC(t, tp.n, "n0")
	if err := netfilter.Apply(tp.n, netfilter.Instance{SID: netip.MustParsePrefix("fc00:e::e0:0/112"), ArgsBits: 16}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netfilter.Flush(tp.n); err != nil {
			t.Errorf("flush: %v", err)
		}
	})
	return tp
}

// vlanCase is one frame from A to the SID behind tags (scapy layers,
// outermost first; "" untagged), its inner UDP source port naming it.
type vlanCase struct {
	port int
	tags string
	// deliver: the kernel processes the frame as IPv6 to the SID on some
	// interface of N (untagged, priority tags stripped, or through a
	// VLAN device), so End.AN.NF must apply: netfilter sees the inner
	// packet once, B receives it with End applied. Otherwise the kernel
	// would not take it as IPv6 (a VID no VLAN device of N serves: the
	// frame is for another host): nothing of it reaches netfilter or B.
	deliver bool
	why     string
	// otherhost: the kernel drops it as for another host (counted as
	// otherhost on the receiving interface, ip -s -s link).
	otherhost bool
}

// sendVLAN sends the cases' frames in order from A, one CPU, then an
// untagged marker (port 1999).
func (tp vlanTopo) sendVLAN(t *testing.T, cases []vlanCase) {
	t.Helper()
	var b strings.Builder
	b.WriteString("import os\nos.sched_setaffinity(0, {0})\nfr = []\n")
	for _, c := range append(cases, vlanCase{port: 1999}) {
		l2 := fmt.Sprintf("Ether(dst=%q)", tp.n0MAC)
		if c.tags != "" {
			l2 += "/" + c.tags
		}
		fmt.Fprintf(&b, "fr.append(%s/IPv6(src='fc00:a::1', dst=%q, hlim=64)/IPv6ExtHdrSegmentRouting(addresses=[%q, %q], segleft=1)"+
			"/IP(src='10.0.1.1', dst='10.0.2.1', ttl=64)/UDP(sport=%d, dport=5000)/Raw(b'v'*20))\n", l2, vlanSID, vlanLast, vlanSID, c.port)
	}
	b.WriteString("sendp(fr, iface='a0', verbose=False)\n")
	testutil.RunScapyIn(t, tp.a, b.String())
}

// nftCounts: packets per inner UDP source port counted in N's forward
// chain (the netfilter path of End.AN.NF).
var nftRule = regexp.MustCompile(`udp sport (\d+) counter packets (\d+) `)

func (tp vlanTopo) nftCounts(t *testing.T) map[int]int {
	t.Helper()
	out := testutil.Exec(t, tp.n, "nft", "list", "table", "inet", "h12v")
	m := map[int]int{}
	for _, s := range nftRule.FindAllStringSubmatch(out, -1) {
		p, _ := strconv.Atoi(s[1])
		n, _ := strconv.Atoi(s[2])
		m[p] = n
	}
	return m
}

func (tp vlanTopo) loadRules(t *testing.T, cases []vlanCase) {
	t.Helper()
	var r strings.Builder
	r.WriteString("table inet h12v {\n chain fw {\n  type filter hook forward priority 0;\n")
	for _, c := range append(cases, vlanCase{port: 1999}) {
		fmt.Fprintf(&r, "  udp sport %d counter\n", c.port)
	}
	r.WriteString(" }\n}\n")
	testutil.Exec(t, tp.n, "sh", "-c", "nft delete table inet h12v 2>/dev/null; printf '%s' \"$0\" | nft -f -", r.String())
}

func loopDrops(t *testing.T, ns string) map[string]uint64 {
	t.Helper()
	ls, err := netfilter.Loop(ns)
	if err != nil {
		t.Fatalf("End.AN.NF loop: %v", err)
	}
	return ls.Drops
}

func nfCounters(t *testing.T, ns string) netfilter.Counters {
	t.Helper()
	sts, err := netfilter.List(ns)
	if err != nil || len(sts) != 1 {
		t.Fatalf("End.AN.NF list: %v %v", sts, err)
	}
	return sts[0].Counters
}

// runVLAN sends cases (and the marker) and checks every outcome: the
// packets at B (tshark), the nft counter of each, End.AN.NF's counters.
// wantStack is the rise of vlan-stack drops expected (on the loop's row).
func (tp vlanTopo) runVLAN(t *testing.T, cases []vlanCase, wantStack uint64) {
	t.Helper()
	tp.loadRules(t, cases)
	before := nfCounters(t, tp.n)
	loopBefore := loopDrops(t, tp.n)
	ohBefore := testutil.RxOtherhost(t, tp.n, "n0")
	var want []string
	for _, c := range cases {
		if c.deliver {
			want = append(want, strconv.Itoa(c.port))
		}
	}
	want = append(want, "1999")
	sort.Strings(want)
	// Everything addressed to the SID or its last segment that reaches
	// B: a leaked or bypassing frame is captured before the marker (it
	// was sent first, on one CPU), so it takes the marker's place.
	cp := testutil.StartInboundCapture(t, tp.b, "b0", "ip6 proto 43 or vlan", len(want))
	tp.sendVLAN(t, cases)
	pkts := testutil.Tshark(t, cp.Wait(10*time.Second), "vlan.id", "ipv6.dst", "ipv6.hlim", "ipv6.routing.segleft", "ip.ttl", "udp.srcport")
	var gotPorts []string
	for _, p := range pkts {
		gotPorts = append(gotPorts, p.First("udp.srcport"))
		if len(p["vlan.id"]) > 0 || p.First("ipv6.dst") != vlanLast || p.First("ipv6.routing.segleft") != "0" ||
			p.First("ipv6.hlim") != "63" || p.First("ip.ttl") != "64" {
			t.Errorf("at B: %v; want untagged, End applied (dst %s, SL 0, hop limit 63), inner TTL 64", p, vlanLast)
		}
	}
	sort.Strings(gotPorts)
	if strings.Join(gotPorts, " ") != strings.Join(want, " ") {
		t.Errorf("inner source ports at B: %v, want %v", gotPorts, want)
	}
	nft := tp.nftCounts(t)
	for _, c := range append(cases, vlanCase{port: 1999, deliver: true, why: "marker"}) {
		n := 0
		if c.deliver {
			n = 1
		}
		if nft[c.port] != n {
			t.Errorf("%d %s (%s): netfilter saw it %d times, want %d", c.port, c.tags, c.why, nft[c.port], n)
		}
	}
	after := nfCounters(t, tp.n)
	var oh uint64
	for _, c := range cases {
		if c.otherhost {
			oh++
		}
	}
	if d := testutil.RxOtherhost(t, tp.n, "n0") - ohBefore; d != oh {
		t.Errorf("the kernel dropped %d frames on n0 as for another host, want %d", d, oh)
	}
	delivered := uint64(len(want))
	if d := after.ToNetfilter - before.ToNetfilter; d != delivered {
		t.Errorf("to-netfilter +%d, want +%d (the delivered ones only)", d, delivered)
	}
	if d := after.Accepted - before.Accepted; d != delivered {
		t.Errorf("accepted +%d, want +%d", d, delivered)
	}
	if d := loopDrops(t, tp.n)["vlan-stack"] - loopBefore["vlan-stack"]; d != wantStack {
		t.Errorf("vlan-stack drops on the loop's row +%d, want +%d", d, wantStack)
	}
	if after.Malformed != before.Malformed || after.Drops["vlan-pop"] != 0 {
		t.Errorf("SID drops %v → %v: want none", before.Drops, after.Drops)
	}
	if after.DroppedNetfilter != before.DroppedNetfilter {
		t.Errorf("dropped-netfilter %d → %d: a tagged frame was handed to netfilter and lost", before.DroppedNetfilter, after.DroppedNetfilter)
	}
	t.Logf("End.AN.NF counters: %+v", after)
}

// TestNFVLANTags: End.AN.NF on frames with 802.1Q / 802.1ad tags. The
// receive path moves the outer tag into the skb's VLAN metadata before
// TCX ingress runs, so nf_in sees it there (vlan_present, vlan_tci) and
// any further tag in-band. The kernel processes a tagged frame as IPv6
// only through a VLAN device of its VID (and protocol); VID 0 (a
// priority tag, any number of them stacked) is stripped and the frame
// processed as untagged on the device it came in on — after TCX, which
// does not run again for it. nf_in must agree: take what the kernel takes
// as IPv6 on this device (priority tags), leave a tagged frame to the
// VLAN device (whose nf_in takes it) or to the kernel's drop, never hand
// a frame the kernel would not process to netfilter, never let one
// pass it.
func TestNFVLANTags(t *testing.T) {
	tp := newVLANTopo(t)
	prio0 := "Dot1Q(vlan=0, prio=5)/"
	tp.runVLAN(t, []vlanCase{
		{1001, "", true, "untagged", false},
		{1002, "Dot1Q(vlan=0, prio=5)", true, "802.1Q priority tag: untagged", false},
		{1003, "Dot1AD(vlan=0, prio=3)", true, "802.1ad priority tag: untagged", false},
		{1004, "Dot1Q(vlan=100)", false, "VID 100, no VLAN device: other host", true},
		{1005, "Dot1AD(vlan=100)", false, "802.1ad VID 100, no VLAN device: other host", true},
		{1006, "Dot1AD(vlan=0)/Dot1Q(vlan=0)", true, "stacked priority tags: untagged, after TCX", false},
		{1007, strings.Repeat(prio0, 3) + "Dot1Q(vlan=0)", true, "four stacked priority tags", false},
		{1008, "Dot1AD(vlan=0)/Dot1Q(vlan=100)", false, "priority tag, then VID 100: other host", true},
		{1009, "Dot1Q(vlan=100)/Dot1Q(vlan=0)", false, "VID 100, then an in-band tag: dropped by the kernel (no handler for 802.1Q)", false},
		{1010, strings.Repeat(prio0, 8) + "Dot1Q(vlan=0)", true, "nine stacked priority tags: one in metadata, eight looked through", false},
		{1011, strings.Repeat(prio0, 9) + "Dot1Q(vlan=0)", false, "ten: more than nf_in looks through, dropped (vlan-stack)", false},
	}, 1)
	// `segchain sid show` prints the drop on the loop's row.
	es, err := netfilter.Extension{}.Show(tp.n)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range es {
		lines = append(lines, localsid.FormatEntry(e))
	}
	if !strings.Contains(strings.Join(lines, "\n"), "End.AN.NF-loop dev sc-nfloop drop-vlan-stack 1") {
		t.Errorf("sid show lacks the loop's drop-vlan-stack 1:\n%s", strings.Join(lines, "\n"))
	}
}

// TestNFVLANDevice: with a VLAN device for 802.1Q VID 100 on the uplink
// (nf_in attached to it by AttachNew), the kernel processes VID 100
// through that device, the tag removed, and End.AN.NF applies there:
// nf_in on the uplink must leave the frame to it. 802.1ad VID 100 and
// VID 200 have no device: other host. This kernel may have no VLAN
// devices (CONFIG_VLAN_8021Q unset): then there is nothing to test.
func TestNFVLANDevice(t *testing.T) {
	tp := newVLANTopo(t)
	if out, err := testutil.ExecErr(tp.n, "ip", "link", "add", "link", "n0", "name", "n0.100", "type", "vlan", "id", "100"); err != nil {
		t.Skipf("no VLAN devices in this kernel (CONFIG_VLAN_8021Q unset): %s", strings.TrimSpace(out))
	}
	testutil.Exec(t, tp.n, "ip", "link", "set", "n0.100", "up")
	if err := netfilter.AttachNew(tp.n); err != nil {
		t.Fatal(err)
	}
	tp.runVLAN(t, []vlanCase{
		{2001, "Dot1Q(vlan=100, prio=2)", true, "VID 100: through n0.100", false},
		{2002, "Dot1AD(vlan=100)", false, "802.1ad VID 100: n0.100 is 802.1Q, other host", true},
		{2003, "Dot1AD(vlan=0)/Dot1Q(vlan=100)", true, "priority tag, then VID 100: through n0.100", false},
		{2004, "Dot1Q(vlan=100)/Dot1Q(vlan=0)", true, "VID 100, then a priority tag: through n0.100, untagged there", false},
		{2005, "Dot1Q(vlan=200)", false, "VID 200: no device, other host", true},
		{2006, "Dot1Q(vlan=0)", true, "priority tag: untagged on n0, not n0.100", false},
	}, 0)
}
