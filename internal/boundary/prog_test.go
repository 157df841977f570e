package boundary

import (
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

const (
	actUnspec = 0xffffffff // TC_ACT_UNSPEC (-1): TCX_NEXT
	actShot   = 2          // TC_ACT_SHOT
	xdpDrop   = 1          // XDP_DROP
	xdpPass   = 2          // XDP_PASS
)

// loadTest loads the program unpinned with b's tables (no attachment:
// BPF_PROG_TEST_RUN).
func loadTest(t *testing.T, b nodestate.Boundary) *node {
	t.Helper()
	testutil.RequireRoot(t)
	spec, err := loadBoundaryTC()
	if err != nil {
		t.Fatal(err)
	}
	n := &node{}
	if err := spec.LoadAndAssign(&n.objs, nil); err != nil {
		t.Fatalf("load boundary program: %v", err)
	}
	t.Cleanup(n.close)
	if err := n.sync(b); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) drops(t *testing.T) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	var (
		k  boundaryTCBndCtrKey
		vs []boundaryTCBndCtr
	)
	it := n.objs.BndCounters.Iterate()
	for it.Next(&k, &vs) {
		for _, v := range vs {
			out[DropReason(k.Reason).String()] += v.Packets
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// expect runs prog on frame: verdict want, and one more drop counted
// for reason ("": none) and no other.
func (n *node) expect(t *testing.T, prog *ebpf.Program, frame []byte, want uint32, reason string) {
	t.Helper()
	before := n.drops(t)
	got, err := prog.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("verdict %#x, want %#x", got, want)
	}
	after := n.drops(t)
	for _, r := range Reasons() {
		w := before[r]
		if r == reason {
			w++
		}
		if after[r] != w {
			t.Errorf("%s drops %d -> %d, want %d", r, before[r], after[r], w)
		}
	}
}

// expectTCAndXDP is expect as a subtest called name and, when prog is the
// ingress program, one for its XDP variant too: the same decision and
// counter, XDP_PASS for TCX_NEXT and XDP_DROP for TC_ACT_SHOT.
func (n *node) expectTCAndXDP(t *testing.T, name string, prog *ebpf.Program, frame []byte, want uint32, reason string) {
	t.Helper()
	t.Run(name, func(t *testing.T) { n.expect(t, prog, frame, want, reason) })
	if prog != n.objs.BoundaryIn {
		return
	}
	xdp := uint32(xdpPass)
	if want == actShot {
		xdp = xdpDrop
	}
	t.Run("xdp: "+name, func(t *testing.T) { n.expect(t, n.objs.BoundaryXdp, frame, xdp, reason) })
}

var (
	mac1 = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	mac2 = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	a    = netip.MustParseAddr
)

func eth6(l3 []byte) []byte { return testutil.Eth(mac1, mac2, 0x86dd, l3) }

const (
	nhUDP     = 17
	nhRouting = 43
	nhHop     = 0
	nhIPv6    = 41
)

func udp() []byte { return []byte{0x0f, 0xa0, 0x17, 0x70, 0, 8, 0, 0} }

// TestProgramVerdicts runs the program on hand-built frames: the verdict
// and the drop reason counted for each.
func TestProgramVerdicts(t *testing.T) {
	b := nodestate.Boundary{
		Locators: []netip.Prefix{netip.MustParsePrefix("fc00:1::/64"), netip.MustParsePrefix("fc00:2::/64")},
		External: []netip.Prefix{netip.MustParsePrefix("fc00:2::e:0/112")},
		Nodes:    []netip.Addr{a("fc00:12::1"), a("fc00:1a::1")},
		SFs:      []netip.Addr{a("fc00:27::7")},
	}
	n := loadTest(t, b)
	src, out := a("fc00:1a::a"), a("fc00:4d::d")
	sid, ext, node, sf := a("fc00:2::f1:3"), a("fc00:2::e:5"), a("fc00:12::1"), a("fc00:27::7")
	srhTo := func(dst netip.Addr, last netip.Addr) []byte {
		return testutil.IPv6(src, dst, nhRouting, 64, testutil.SRH(nhIPv6, []netip.Addr{last, dst}, 1, 0, nil,
			testutil.IPv6(src, out, nhUDP, 64, udp())))
	}
	hbh := func(next uint8, payload []byte) []byte {
		return append([]byte{next, 0, 1, 4, 0, 0, 0, 0}, payload...) // PadN
	}
	for _, tc := range []struct {
		name   string
		prog   *ebpf.Program
		frame  []byte
		want   uint32
		reason string
	}{
		{"IPv4 passes", n.objs.BoundaryIn, testutil.Eth(mac1, mac2, 0x0800, testutil.IPv4("10.0.0.1", "10.0.0.2", 17, false, udp())), actUnspec, ""},
		{"IPv6 to outside passes", n.objs.BoundaryIn, eth6(testutil.IPv6(src, out, nhUDP, 64, udp())), actUnspec, ""},
		{"plain IPv6 into a locator", n.objs.BoundaryIn, eth6(testutil.IPv6(src, sid, nhUDP, 64, udp())), actShot, "sid-space"},
		{"IPv6-in-IPv6 into a locator", n.objs.BoundaryIn, eth6(testutil.IPv6(src, sid, nhIPv6, 64, testutil.IPv6(src, out, nhUDP, 64, udp()))), actShot, "sid-space"},
		{"SRH into a locator", n.objs.BoundaryIn, eth6(srhTo(sid, out)), actShot, "sid-space-srh"},
		{"SRH behind hop-by-hop into a locator", n.objs.BoundaryIn,
			eth6(testutil.IPv6(src, sid, nhHop, 64, hbh(nhRouting, testutil.SRH(nhUDP, []netip.Addr{out, sid}, 1, 0, nil, udp())))), actShot, "sid-space-srh"},
		{"SRH to an external SID passes", n.objs.BoundaryIn, eth6(srhTo(ext, out)), actUnspec, ""},
		{"plain to an external SID passes", n.objs.BoundaryIn, eth6(testutil.IPv6(src, ext, nhUDP, 64, udp())), actUnspec, ""},
		{"SRH to a node address", n.objs.BoundaryIn, eth6(srhTo(node, sid)), actShot, "srh-to-node"},
		{"plain to a node address passes", n.objs.BoundaryIn, eth6(testutil.IPv6(src, node, nhUDP, 64, udp())), actUnspec, ""},
		// An SF behind a proxy is reached through its proxy only: its
		// kernel would act on an SRH, and plain traffic skips the chain.
		{"SRH to an SF address (continuing outside)", n.objs.BoundaryIn, eth6(srhTo(sf, out)), actShot, "to-sf"},
		{"SRH to an SF address (continuing to a SID)", n.objs.BoundaryIn, eth6(srhTo(sf, sid)), actShot, "to-sf"},
		{"plain to an SF address", n.objs.BoundaryIn, eth6(testutil.IPv6(src, sf, nhUDP, 64, udp())), actShot, "to-sf"},
		{"IPv6-in-IPv6 to an SF address", n.objs.BoundaryIn, eth6(testutil.IPv6(src, sf, nhIPv6, 64, testutil.IPv6(src, out, nhUDP, 64, udp()))), actShot, "to-sf"},
		{"routing header type 0 to an SF address", n.objs.BoundaryIn,
			eth6(testutil.IPv6(src, sf, nhRouting, 64, append([]byte{nhUDP, 2, 0, 0, 0, 0, 0, 0}, append(out.AsSlice(), udp()...)...))), actShot, "to-sf"},
		{"SRH to an external SID continuing to an SF", n.objs.BoundaryIn, eth6(srhTo(ext, sf)), actShot, "external-next"},
		{"IPv6-in-IPv6 to an external SID, inner to an SF", n.objs.BoundaryIn,
			eth6(testutil.IPv6(src, ext, nhIPv6, 64, testutil.IPv6(src, sf, nhUDP, 64, udp()))), actShot, "external-next"},
		{"out: to an SF address passes (its proxy's traffic)", n.objs.BoundaryOut, eth6(testutil.IPv6(src, sf, nhUDP, 64, udp())), actUnspec, ""},
		{"unreadable extension headers to a node address", n.objs.BoundaryIn,
			eth6(testutil.IPv6(src, node, nhHop, 64, []byte{nhRouting, 9})), actShot, "malformed"},
		{"a fragment to a node address (an SRH may follow)", n.objs.BoundaryIn,
			eth6(testutil.IPv6(src, node, 44, 64, []byte{nhRouting, 0, 0, 1, 0, 0, 0, 1})), actShot, "malformed"},
		{"a fragment to outside passes", n.objs.BoundaryIn,
			eth6(testutil.IPv6(src, out, 44, 64, []byte{nhUDP, 0, 0, 1, 0, 0, 0, 1})), actUnspec, ""},
		{"a fragment into a locator", n.objs.BoundaryIn,
			eth6(testutil.IPv6(src, sid, 44, 64, []byte{nhUDP, 0, 0, 1, 0, 0, 0, 1})), actShot, "sid-space"},
		{"SRH transiting to an outside host passes", n.objs.BoundaryIn, eth6(srhTo(out, a("fc00:99::1"))), actUnspec, ""},
		{"out: into a locator leaks", n.objs.BoundaryOut, eth6(testutil.IPv6(src, sid, nhUDP, 64, udp())), actShot, "leak-sid"},
		{"out: SRH into a locator leaks", n.objs.BoundaryOut, eth6(srhTo(sid, out)), actShot, "leak-sid"},
		{"out: to outside passes", n.objs.BoundaryOut, eth6(srhTo(out, a("fc00:99::1"))), actUnspec, ""},
		{"out: to an external SID passes", n.objs.BoundaryOut, eth6(testutil.IPv6(src, ext, nhUDP, 64, udp())), actUnspec, ""},
	} {
		n.expectTCAndXDP(t, tc.name, tc.prog, tc.frame, tc.want, tc.reason)
	}
}

// TestSyncTables: re-syncing replaces the table's contents exactly.
func TestSyncTables(t *testing.T) {
	b1 := nodestate.Boundary{
		Locators: []netip.Prefix{netip.MustParsePrefix("fc00:1::/64"), netip.MustParsePrefix("fc00:2::/64")},
		External: []netip.Prefix{netip.MustParsePrefix("fc00:2::e:0/112")},
		Nodes:    []netip.Addr{a("fc00:12::1")},
	}
	n := loadTest(t, b1)
	b2 := nodestate.Boundary{
		Locators: []netip.Prefix{netip.MustParsePrefix("fc00:3::/64")},
		Nodes:    []netip.Addr{a("fc00:34::3"), a("fc00:34::4")},
		SFs:      []netip.Addr{a("fc00:27::7")},
	}
	if err := n.sync(b2); err != nil {
		t.Fatal(err)
	}
	got, err := n.entries()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[netip.MustParsePrefix("fc00:34::3/128")] != uint32(boundaryTCBndKindBND_NODE) ||
		got[netip.MustParsePrefix("fc00:27::7/128")] != uint32(boundaryTCBndKindBND_SF) ||
		got[netip.MustParsePrefix("fc00:3::/64")] != uint32(boundaryTCBndKindBND_SID) {
		t.Errorf("table after re-sync: %v", got)
	}
	run := func(dst string) uint32 {
		v, err := n.objs.BoundaryIn.Run(&ebpf.RunOptions{Data: eth6(testutil.IPv6(a("fc00:1a::a"), a(dst), nhUDP, 64, udp()))})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if run("fc00:1::5") != actUnspec || run("fc00:3::5") != actShot {
		t.Error("the old locator still filters or the new one does not")
	}
}

// TestHMACClassifier runs hmac_in on SRHs addressed to a signed SID: what
// the kernel's HMAC check would drop without a reason is dropped and
// counted by reason; a well-formed TLV with a known key goes on to the
// kernel.
func TestHMACClassifier(t *testing.T) {
	sidP := netip.MustParsePrefix("fc00:4::a:0/112")
	n := loadTest(t, nodestate.Boundary{
		Locators: []netip.Prefix{netip.MustParsePrefix("fc00:4::/64")},
		HMACSIDs: []netip.Prefix{sidP}, HMACKeys: []uint32{1001},
	})
	src, out := a("fc00:1::1"), a("fc00:4d::d")
	sid, other := a("fc00:4::a:0"), a("fc00:4::b:0")
	inner := testutil.IPv6(a("fc00:1a::a"), out, nhUDP, 64, udp())
	tlv := func(typ, l uint8, key uint32) []byte {
		b := []byte{typ, l, 0, 0, byte(key >> 24), byte(key >> 16), byte(key >> 8), byte(key)}
		return append(b, make([]byte, 32)...)
	}
	signed := func(dst netip.Addr, hflag bool, t []byte) []byte {
		f := eth6(testutil.IPv6(src, dst, nhRouting, 64, testutil.SRH(nhIPv6, []netip.Addr{dst}, 0, 0, t, inner)))
		if hflag {
			f[14+40+5] |= 0x08 // SR6_FLAG1_HMAC
		}
		return f
	}
	for _, tc := range []struct {
		name   string
		frame  []byte
		want   uint32
		reason string
	}{
		{"UDP to the SID: fast path", eth6(testutil.IPv6(src, sid, nhUDP, 64, udp())), actUnspec, ""},
		{"IPv6-in-IPv6 without SRH", eth6(testutil.IPv6(src, sid, nhIPv6, 64, inner)), actShot, "hmac-missing"},
		{"SRH without the HMAC flag", signed(sid, false, nil), actShot, "hmac-missing"},
		{"HMAC flag, no TLV", signed(sid, true, nil), actShot, "hmac-malformed"},
		{"HMAC flag, TLV of the wrong length", signed(sid, true, append(tlv(5, 30, 1001)[:32], make([]byte, 8)...)), actShot, "hmac-malformed"},
		{"HMAC flag, a PadN TLV first", signed(sid, true, tlv(4, 38, 1001)), actShot, "hmac-malformed"},
		{"unknown key id", signed(sid, true, tlv(5, 38, 4242)), actShot, "hmac-unknown-key"},
		{"known key id: the kernel checks the digest", signed(sid, true, tlv(5, 38, 1001)), actUnspec, ""},
		{"another SID: not classified", signed(other, false, nil), actUnspec, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { n.expect(t, n.objs.HmacIn, tc.frame, tc.want, tc.reason) })
	}
}
