package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/testutil"
)

// boundaryDrops is the boundary filter's drop count on node's iface for
// reason (0 when it dropped nothing there).
func (e *env) boundaryDrops(node, iface, reason string) uint64 {
	e.T.Helper()
	cs, err := local.NewLocal(node, e.NS(node)).BoundaryCounters(context.Background())
	if err != nil {
		e.T.Fatal(err)
	}
	for _, c := range cs {
		if c.Iface == iface && c.Reason == reason {
			return c.Packets
		}
	}
	return 0
}

// variant writes file with edit applied next to a copy of its secrets and
// loads it.
func variant(t *testing.T, file string, edit func(string) string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := edit(string(raw))
	if out == string(raw) {
		t.Fatal("variant: the edit changed nothing")
	}
	dir := t.TempDir()
	if sec, err := os.ReadFile(filepath.Join(filepath.Dir(file), "secrets", "k1.key")); err == nil {
		if err := os.MkdirAll(filepath.Join(dir, "secrets"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "secrets", "k1.key"), sec, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// attack is a forged packet sent count times from host s with scapy;
// marker is its UDP payload, so that a capture at d tells whether any got
// through.
type attack struct {
	name   string
	scapy  string // the packet, a scapy expression
	node   string // where the boundary drops it
	iface  string
	reason string
	// sendp, when set, is the interface the sender puts scapy's frame
	// (an Ether() expression) on; else the packet is sent at layer 3.
	sendp string
	from  string // the sending node; "" is s
}

// sendAttacks sends each attack (from s unless it says otherwise) and
// returns how many of each reached d (by marker).
func (e *env) sendAttacks(t *testing.T, attacks []attack, count int) map[string]int {
	t.Helper()
	c := testutil.StartInboundCapture(t, e.NS("d"), "eth-egress", "ip6", 0) // "udp" would miss UDP behind an SRH
	scripts := map[string]*strings.Builder{}
	var order []string
	for i, a := range attacks {
		from := a.from
		if from == "" {
			from = "s"
		}
		script := scripts[from]
		if script == nil {
			script = &strings.Builder{}
			script.WriteString("conf.verb = 0\n")
			scripts[from] = script
			order = append(order, from)
		}
		if a.sendp != "" {
			fmt.Fprintf(script, "sendp(%s/UDP(sport=4000, dport=%d)/Raw(b'attack-%d'), iface=%q, count=%d)\n", a.scapy, 6000+i, i, a.sendp, count)
			continue
		}
		fmt.Fprintf(script, "send(%s/UDP(sport=4000, dport=%d)/Raw(b'attack-%d'), count=%d)\n", a.scapy, 6000+i, i, count)
	}
	for _, from := range order {
		testutil.RunScapyIn(t, e.NS(from), scripts[from].String())
	}
	time.Sleep(time.Second)
	got := map[string]int{}
	for _, p := range testutil.Tshark(t, c.Wait(2*time.Second), "udp.dstport", "data.data") {
		for i, a := range attacks {
			if p.First("udp.dstport") == fmt.Sprint(6000+i) && strings.Contains(p.First("data.data"), fmt.Sprintf("%x", "attack-")) {
				got[a.name]++
			}
		}
	}
	return got
}

// defaultAttacks are the attacks of issue 13 on the default domain, from
// host s outside it.
func (e *env) defaultAttacks() []attack {
	fwSID := e.sid("nfv2-fw")
	goLast := fwSID.As16()
	goLast[15] = 3 // ARGS 3 = go-last in the default eval-args table
	fwArgs := netip.AddrFrom16(goLast)
	end1, end2, dx6 := e.sid("nfv1-end"), e.sid("nfv2-end"), e.sid(config.EgressKey("filtered"))
	ad := e.sid("nfv1-fw")
	inner := "IPv6(src='fc00:1a::a', dst='fc00:4d::d')"
	srh := func(segs ...netip.Addr) string { // segs in path order
		var ss []string
		for i := len(segs) - 1; i >= 0; i-- {
			ss = append(ss, "'"+segs[i].String()+"'")
		}
		return fmt.Sprintf("IPv6ExtHdrSegmentRouting(addresses=[%s], segleft=%d, lastentry=%d)",
			strings.Join(ss, ","), len(segs)-1, len(segs)-1)
	}
	outer := func(dst netip.Addr, src string) string {
		return fmt.Sprintf("IPv6(src='%s', dst='%s')", src, dst)
	}
	return []attack{
		{"forged ARGS (go-last) to the firewall SID", outer(fwArgs, "fc00:1a::a") + "/" + srh(fwArgs, end2, dx6) + "/" + inner,
			"ingress", "eth-s", "sid-space-srh", "", ""},
		{"forged psid to the firewall SID", outer(fwSID, "fc00:2::1") + "/" +
			fmt.Sprintf("IPv6ExtHdrSegmentRouting(addresses=['%s','%s','%s'], segleft=1, lastentry=2)", dx6, fwSID, end1) + "/" + inner,
			"ingress", "eth-s", "sid-space-srh", "", ""},
		{"straight to the egress End.DX6 with an SRH", outer(dx6, "fc00:3::1") + "/" + srh(dx6) + "/" + inner,
			"ingress", "eth-s", "sid-space-srh", "", ""},
		{"straight to the egress End.DX6 without an SRH", outer(dx6, "fc00:3::1") + "/" + inner,
			"ingress", "eth-s", "sid-space", "", ""},
		{"to the End.AD SID", outer(ad, "fc00:1a::a") + "/" + srh(ad, end2, dx6) + "/" + inner,
			"ingress", "eth-s", "sid-space-srh", "", ""},
		{"SRH to the ingress' own address", outer(netip.MustParseAddr("fc00:1a::1"), "fc00:1a::a") + "/" +
			srh(netip.MustParseAddr("fc00:1a::1"), dx6) + "/" + inner, "ingress", "eth-s", "srh-to-node", "", ""},
		{"SRH to r1's address", outer(netip.MustParseAddr("fc00:15::5"), "fc00:1a::a") + "/" +
			srh(netip.MustParseAddr("fc00:15::5"), dx6) + "/" + inner, "ingress", "eth-s", "srh-to-node", "", ""},
	}
}

// TestBoundaryDropsAttacksFromOutside is issue 13's attacks from host s:
// each is dropped at the ingress' boundary interface and counted there by
// reason, nothing reaches d, and every chain of the default domain still
// delivers legitimate traffic.
func TestBoundaryDropsAttacksFromOutside(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	e := setup(t, "../../examples/default.yaml")
	e.apply()
	if res := e.apply(); res.Changes() != 0 {
		t.Fatalf("second apply made %d changes: %+v", res.Changes(), res.Diffs)
	}
	attacks := e.defaultAttacks()
	before := map[string]uint64{}
	for _, a := range attacks {
		before[a.reason] = e.boundaryDrops(a.node, a.iface, a.reason)
	}
	const n = 20
	got := e.sendAttacks(t, attacks, n)
	want := map[string]uint64{}
	for _, a := range attacks {
		if got[a.name] != 0 {
			t.Errorf("%s: %d of %d packets reached d", a.name, got[a.name], n)
		}
		want[a.reason] += n
	}
	for reason, w := range want {
		if d := e.boundaryDrops("ingress", "eth-s", reason) - before[reason]; d != w {
			t.Errorf("ingress eth-s %s drops +%d, want +%d", reason, d, w)
		}
	}
	st := e.ctl.Status(context.Background())
	var seen bool
	for _, ns := range st.Nodes {
		for _, c := range ns.Boundary {
			seen = seen || (ns.Node == "ingress" && c.Iface == "eth-s" && c.Packets > 0)
		}
	}
	if !seen {
		t.Errorf("status shows no boundary drops at ingress eth-s: %+v", st.Nodes)
	}

	t.Run("legitimate chains deliver", func(t *testing.T) {
		if err := e.ping("s", "fc00:4d::d"); err != nil {
			t.Errorf("web (ping s -> d): %v", err)
		}
		if err := e.ping("s", "198.18.4.13"); err != nil {
			t.Errorf("legacy4 (ping s -> d over IPv4): %v", err)
		}
		c := testutil.StartInboundCapture(t, e.NS("d"), "eth-egress", "ip6", 0) // "udp" would miss UDP behind an SRH
		testutil.RunScapyIn(t, e.NS("s"), `
conf.verb = 0
send(IPv6(src='fc00:1a::a', dst='fc00:4d::d')/UDP(sport=4000, dport=6001)/Raw(b'filtered'), count=3)
send(IPv6(src='fc00:1a::a', dst='fc00:4d::d')/UDP(sport=4000, dport=5555)/Raw(b'insert6'), count=3)
`)
		time.Sleep(time.Second)
		ports := map[string]int{}
		for _, p := range testutil.Tshark(t, c.Wait(2*time.Second), "udp.dstport") {
			ports[p.First("udp.dstport")]++
		}
		if ports["6001"] != 3 || ports["5555"] != 3 {
			t.Errorf("d got %d of 3 on chain filtered and %d of 3 on insert6", ports["6001"], ports["5555"])
		}
	})

	t.Run("egress drops an inner packet addressed into the SID space", func(t *testing.T) {
		dx6 := e.sid(config.EgressKey("web"))
		b := e.boundaryDrops("egress", "eth-d", "leak-sid")
		// From inside the domain (the ingress node): a packet for the
		// egress SID whose inner packet is SRv6 addressed to nfv2's SID.
		testutil.RunScapyIn(t, e.NS("ingress"), fmt.Sprintf(`
inner = IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['fc00:4d::d','%s'], segleft=1, lastentry=1)/UDP(dport=7777)
send(IPv6(src='fc00:1::1', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['%s'], segleft=0, lastentry=0)/inner, count=5, verbose=0)
`, e.sid("nfv2-end"), e.sid("nfv2-end"), dx6, dx6))
		time.Sleep(500 * time.Millisecond)
		if d := e.boundaryDrops("egress", "eth-d", "leak-sid") - b; d != 5 {
			t.Errorf("egress eth-d leak-sid drops +%d, want +5", d)
		}
	})

	t.Run("a missing filter is drift that apply mends", func(t *testing.T) {
		if err := boundary.Remove(e.NS("ingress")); err != nil {
			t.Fatal(err)
		}
		diffs, err := e.ctl.Controller().Diff(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, d := range diffs {
			for _, op := range d.Ops() {
				ops = append(ops, d.Node+": "+op.String())
			}
		}
		if len(ops) != 1 || !strings.HasPrefix(ops[0], "ingress: + boundary") {
			t.Errorf("diff after removing ingress' filter: %q, want one + boundary on ingress", ops)
		}
		if res := e.apply(); res.Changes() != 1 {
			t.Errorf("re-apply made %d changes, want 1", res.Changes())
		}
		b := e.boundaryDrops("ingress", "eth-s", "sid-space")
		e.sendAttacks(t, e.defaultAttacks()[3:4], 3) // straight to End.DX6, no SRH
		if d := e.boundaryDrops("ingress", "eth-s", "sid-space") - b; d != 3 {
			t.Errorf("after re-apply: sid-space +%d, want +3", d)
		}
	})

	t.Run("destroy removes the filter", func(t *testing.T) {
		if _, err := e.ctl.Destroy(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, err := local.NewLocal("ingress", e.NS("ingress")).Observe(context.Background(), e.ctl.Plan.Nodes["ingress"])
		if err != nil {
			t.Fatal(err)
		}
		if got.Boundary != nil {
			t.Errorf("boundary left after destroy: %s", got.Boundary)
		}
	})
}

// TestBoundaryOffRestoresOldBehaviour: with security.boundary.off, plan
// warns and a packet from outside straight to the egress End.DX6 is
// delivered again (the behaviour issue 13 reported).
func TestBoundaryOffRestoresOldBehaviour(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	file := variant(t, "../../examples/default.yaml", func(s string) string {
		return strings.Replace(s, "routing:\n  mode: static", "routing:\n  mode: static\nsecurity:\n  boundary: {off: true}", 1)
	})
	e := setup(t, file)
	var warned bool
	for _, w := range e.ctl.Plan.Warnings {
		warned = warned || strings.Contains(w, "boundary filtering is off")
	}
	if !warned {
		t.Errorf("plan warnings %q: want one saying the boundary is off", e.ctl.Plan.Warnings)
	}
	e.apply()
	var straight []attack
	for _, a := range e.defaultAttacks() {
		if strings.HasPrefix(a.name, "straight to the egress") {
			straight = append(straight, a)
		}
	}
	got := e.sendAttacks(t, straight, 5)
	for _, a := range straight {
		if got[a.name] != 5 {
			t.Errorf("%s with the boundary off: %d of 5 reached d, want 5", a.name, got[a.name])
		}
	}
}

// TestBoundaryExternalSID: a service marked external is reachable from
// outside; its neighbours stay closed, also through it (a segment after
// the external SID that is inside the domain is dropped: external-next).
func TestBoundaryExternalSID(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	file := variant(t, "../../examples/default.yaml", func(s string) string {
		return strings.Replace(s, "nfv1-end: {node: nfv1, behavior: End}", "nfv1-end: {node: nfv1, behavior: End, external: true}", 1)
	})
	e := setup(t, file)
	e.apply()
	end1, end2 := e.sid("nfv1-end"), e.sid("nfv2-end")
	dxfw := e.sid(config.EgressKey("firewalled"))
	before := e.boundaryDrops("ingress", "eth-s", "external-next")
	got := e.sendAttacks(t, []attack{
		{name: "external", scapy: fmt.Sprintf("IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['fc00:4d::d','%s'], segleft=1, lastentry=1)", end1, end1)},
		{name: "not external", scapy: fmt.Sprintf("IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['fc00:4d::d','%s'], segleft=1, lastentry=1)", end2, end2)},
		// Issue 24 item 3: through the external SID to the firewalled
		// chain's End.DX6, skipping that chain's firewall.
		{name: "through the external SID into the domain", scapy: fmt.Sprintf("IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['%s','%s'], segleft=1, lastentry=1)/IPv6(src='fc00:1a::a', dst='fc00:4d::d')", end1, dxfw, end1)},
	}, 5)
	if got["external"] != 5 {
		t.Errorf("SRv6 from s through the external SID %s: %d of 5 reached d", end1, got["external"])
	}
	if got["not external"] != 0 {
		t.Errorf("SRv6 from s through %s (not external): %d of 5 reached d", end2, got["not external"])
	}
	if n := got["through the external SID into the domain"]; n != 0 {
		t.Errorf("SRv6 from s through the external SID %s to the End.DX6 %s: %d of 5 reached d", end1, dxfw, n)
	}
	if d := e.boundaryDrops("ingress", "eth-s", "external-next") - before; d != 5 {
		t.Errorf("ingress eth-s external-next drops +%d, want +5", d)
	}
}

// TestBoundaryHMACExample: with examples/hmac.yaml, a packet without HMAC
// from outside to the egress SID is dropped at the boundary; from inside
// the domain every bad HMAC is dropped at the egress (every node hosting a
// SID of the signed chain verifies it), counted by reason; the signed
// chain delivers.
func TestBoundaryHMACExample(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	e := setup(t, "../../examples/hmac.yaml")
	e.apply()
	dx6 := e.sid(config.EgressKey("signed"))
	if err := e.ping("s", "fc00:4d::d"); err != nil {
		t.Fatalf("signed chain: %v", err)
	}
	b := e.boundaryDrops("ingress", "eth-s", "sid-space-srh")
	pkt := fmt.Sprintf("IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['%s'], segleft=0, lastentry=0)/IPv6(src='fc00:1a::a', dst='fc00:4d::d')", dx6, dx6)
	if got := e.sendAttacks(t, []attack{{name: "no HMAC from outside", scapy: pkt}}, 10); got["no HMAC from outside"] != 0 {
		t.Errorf("no-HMAC packets from s reached d: %d of 10", got["no HMAC from outside"])
	}
	if d := e.boundaryDrops("ingress", "eth-s", "sid-space-srh") - b; d != 10 {
		t.Errorf("ingress eth-s sid-space-srh drops +%d, want +10", d)
	}
	// From inside the domain (nfv1): every kind of bad HMAC to the egress
	// SID. The classifier drops and counts what the kernel would drop
	// without a reason; a wrong digest reaches the kernel, which drops it
	// and counts it in the SID's errors.
	before := e.counters("egress", dx6)
	reasons := []string{"hmac-missing", "hmac-malformed", "hmac-unknown-key"}
	hb := map[string]uint64{}
	for _, r := range reasons {
		hb[r] = e.boundaryDrops("egress", "eth-nfv1", r)
	}
	// The capture stops at the first UDP datagram d receives: the marker
	// sent last (plain UDP over the same link), unless a bad one came
	// first. Its arrival proves the earlier ones would have arrived too.
	c := testutil.StartInboundCapture(t, e.NS("d"), "eth-egress", "udp", 1)
	testutil.RunScapyIn(t, e.NS("nfv1"), fmt.Sprintf(`
import socket, struct
conf.verb = 0
DX6 = '%s'
def srh(flags, tlv=b''):
    body = socket.inet_pton(socket.AF_INET6, DX6) + tlv
    return bytes([41, len(body)//8, 4, 0, 0, flags, 0, 0]) + body
def tlv(t, l, key):
    return bytes([t, l, 0, 0]) + struct.pack('>I', key) + bytes(32)
def inner(port):
    return IPv6(src='fc00:1a::a', dst='fc00:4d::d')/UDP(sport=4000, dport=port)/Raw(b'inside')
def out(nh, hdr, port):
    return IPv6(src='fc00:2::1', dst=DX6, nh=nh)/Raw(hdr)/inner(port)
send(IPv6(src='fc00:2::1', dst=DX6)/inner(6100), count=2)           # no SRH
send(out(43, srh(0), 6101), count=2)                                  # no HMAC flag
send(out(43, srh(0x08), 6102), count=3)                               # flag, no TLV
send(out(43, srh(0x08, tlv(5, 38, 4242)), 6103), count=4)             # unknown key id
send(out(43, srh(0x08, tlv(5, 38, 1001)), 6104), count=5)             # wrong digest
send(IPv6(src='fc00:2::1', dst='fc00:4d::d')/UDP(sport=4000, dport=6199)/Raw(b'marker'))
`, dx6))
	got := testutil.Tshark(t, c.Wait(10*time.Second), "udp.dstport")
	if len(got) != 1 || got[0].First("udp.dstport") != "6199" {
		t.Errorf("d received %v before (or instead of) the marker sent after the bad-HMAC packets: want only the marker (port 6199)", got)
	}
	want := map[string]uint64{"hmac-missing": 4, "hmac-malformed": 3, "hmac-unknown-key": 4}
	for _, r := range reasons {
		if d := e.boundaryDrops("egress", "eth-nfv1", r) - hb[r]; d != want[r] {
			t.Errorf("egress eth-nfv1 %s +%d, want +%d", r, d, want[r])
		}
	}
	if after := e.counters("egress", dx6); after.Errors != before.Errors+5 {
		t.Errorf("egress End.DX6 errors %d -> %d, want +5 (wrong digest, checked by the kernel)", before.Errors, after.Errors)
	}
}
