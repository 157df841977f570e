package srunaware

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/testutil"
)

// ---- packet builders (independent of the code under test) ----

var (
	macNode  = testutil.MustMAC("02:00:00:00:00:0a") // the node's uplink (pa)
	macNext  = testutil.MustMAC("02:00:00:00:00:0b") // next hop behind pa
	macSFOut = testutil.MustMAC("02:00:00:00:00:1a") // IFACE-OUT (sfa)
	macSF    = testutil.MustMAC("02:00:00:00:00:1b") // the SF
	macPeer  = testutil.MustMAC("02:00:00:00:00:99") // whoever sent the frame
)

func a6(s string) netip.Addr { return netip.MustParseAddr(s) }

func eth(dst, src net.HardwareAddr, et uint16, payload []byte) []byte {
	return testutil.Eth(dst, src, et, payload)
}

func ip6(src, dst netip.Addr, nh, hlim uint8, payload []byte) []byte {
	return testutil.IPv6(src, dst, nh, hlim, payload)
}

// srh builds an SRH; list is Segment List[0..n-1] (list[0] = last segment).
func srh(nh uint8, list []netip.Addr, sl uint8, tag uint16, tlv []byte, payload []byte) []byte {
	return testutil.SRH(nh, list, sl, tag, tlv, payload)
}

// ip4 is an IPv4 header with DF set.
func ip4(src, dst string, proto uint8, payload []byte) []byte {
	return testutil.IPv4(src, dst, proto, true, payload)
}

func udp(sport, dport uint16, n int) []byte {
	p := make([]byte, n)
	for i := range n {
		p[i] = byte(i)
	}
	return testutil.L4(sport, dport, p)
}

// hmacTLV is an RFC 8754 HMAC TLV (type 5, 1-byte length, 40 bytes total).
func hmacTLV() []byte {
	b := make([]byte, 40)
	b[0], b[1] = 5, 38
	binary.BigEndian.PutUint32(b[4:], 7)
	for i := 8; i < 40; i++ {
		b[i] = byte(0xa0 + i)
	}
	return b
}

// ---- test node: a namespace whose FIB the program consults ----

type testNode struct {
	ns           string
	pa, sfa, sfb uint32 // ifindexes
	objs         proxyTCObjects
}

func newTestNode(t testing.TB) *testNode {
	t.Helper()
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "pxu")
	x := func(args ...string) { testutil.Exec(t, ns, args...) }
	n := &testNode{ns: ns, pa: testutil.Uplink(t, ns, macNode, macNext)}
	x("ip", "link", "add", "sfa", "address", macSFOut.String(), "type", "veth", "peer", "sfb", "address", macSF.String())
	for _, d := range []string{"sfa", "sfb"} {
		x("ip", "link", "set", d, "up")
	}
	x("sysctl", "-qw", "net.ipv4.ip_forward=1")
	x("ip", "addr", "add", "10.99.0.1/24", "dev", "pa")
	x("ip", "route", "add", "default", "via", "10.99.0.2", "dev", "pa")
	x("ip", "neigh", "replace", "10.99.0.2", "lladdr", macNext.String(), "dev", "pa", "nud", "permanent")
	n.sfa, n.sfb = testutil.IfIndex(t, ns, "sfa"), testutil.IfIndex(t, ns, "sfb")
	if err := loadProxyTCObjects(&n.objs, nil); err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { n.objs.Close() })
	return n
}

// node wraps the test objects for Node's map helpers.
func (n *testNode) node() *Node { return &Node{netns: n.ns, objs: n.objs} }

// fib is the model's view of the namespace above.
func (n *testNode) fib(dst netip.Addr) FIBResult {
	src := a6("fc00:99::1")
	if dst.Is4() {
		src = netip.MustParseAddr("10.99.0.1")
	}
	return FIBResult{OK: true, MTU: 1500, SMAC: macNode, DMAC: macNext, Src: src}
}

func (n *testNode) run(t *testing.T, iif uint32, pkt []byte) (Verdict, []byte) {
	t.Helper()
	ret, out := testutil.RunTC(t, n.ns, n.objs.ProxyTc, iif, pkt, cacheHdrMax+64)
	return Verdict(int32(ret)), out
}

func (n *testNode) stats(t *testing.T, id uint32) ModelStats {
	t.Helper()
	var per []proxyTCProxyStats
	if err := n.objs.StatsMap.Lookup(id, &per); err != nil {
		t.Fatal(err)
	}
	var s ModelStats
	for _, p := range per {
		s.In += p.InPackets
		s.InBytes += p.InBytes
		s.Out += p.OutPackets
		s.OutBytes += p.OutBytes
		s.Passed += p.Passed
		s.CacheUpdates += p.CacheUpdates
		s.ICMPErrors += p.IcmpErrors
		for i, v := range p.Drops {
			s.Drops[i] += v
		}
		s.OutDrops += p.OutDrops
	}
	return s
}

// sidConf is one SID of a fixture's map seed.
type sidConf struct {
	sid      string
	behavior string
	inner    Inner
	flow     bool
	mac      bool // S-ADDR is macSF (else nh6 fc00:5f::2)
	asSrc    string
	asSegs   []string
	flowMax  uint32        // flow max (needs a timeout)
	timeout  time.Duration // flow timeout
	usid     bool          // an F3216 uSID (32/16): sid is block:uSID::
}

func (n *testNode) seed(t testing.TB, confs []sidConf) *Model {
	t.Helper()
	m := &Model{SIDs: map[netip.Addr]ModelSID{}, Ifaces: map[uint32]ModelSID{}, Cache: map[uint32]ModelCache{},
		Flows: map[string]ModelCache{}, FIB: n.fib}
	for i, c := range confs {
		cfg := proxyTCProxySid{Id: uint32(i), Behavior: behaviorCode[c.behavior], Inner: uint8(c.inner),
			Oif: n.sfa, Iif: n.sfb}
		if c.flow {
			cfg.Flags |= uint8(flagFlow)
		}
		cfg.FlowTimeoutNs, cfg.FlowMax = uint64(c.timeout), c.flowMax
		if c.usid {
			cfg.CsidLblen, cfg.CsidNflen = 32, 16
			if err := n.objs.CsidMap.Put(uint32(0), uint32(6)); err != nil {
				t.Fatal(err)
			}
		}
		if err := n.node().setFlowCap(uint32(i), c.flowMax); err != nil {
			t.Fatal(err)
		}
		ms := ModelSID{ID: uint32(i), Behavior: c.behavior, Inner: c.inner, Flow: c.flow, FlowMax: int(c.flowMax), OIFMAC: macSFOut}
		if c.mac {
			cfg.Flags |= uint8(flagMAC)
			copy(cfg.Dmac[:], macSF)
			copy(cfg.Smac[:], macSFOut)
			ms.MAC = macSF
		} else {
			cfg.NhFamily = 10
			a := a6("fc00:5f::2").As16()
			for j := range 4 {
				cfg.Nh[j] = nativeU32(a[4*j:])
			}
		}
		if c.behavior == EndAS {
			var segs []netip.Addr
			for _, s := range c.asSegs {
				segs = append(segs, a6(s))
			}
			hdr, off := BuildEncap(a6(c.asSrc), segs, 0, c.inner)
			var ce proxyTCProxyCache
			ce.Valid, ce.Len, ce.NhOff = 1, uint32(len(hdr)), uint16(off)
			copy(ce.Hdr[:], hdr)
			if err := n.objs.CacheMap.Put(uint32(i), &ce); err != nil {
				t.Fatal(err)
			}
			m.Cache[uint32(i)] = ModelCache{Hdr: hdr, NhOff: off}
		}
		k := sidKey(netip.PrefixFrom(a6(c.sid), 128))
		if err := n.objs.SidsMap.Put(&k, &cfg); err != nil {
			t.Fatal(err)
		}
		if err := n.objs.IfacesMap.Put(cfg.Iif, &cfg); err != nil {
			t.Fatal(err)
		}
		m.SIDs[a6(c.sid)] = ms
		m.Ifaces[cfg.Iif] = ms
	}
	return m
}

// ---- fixtures ----

var (
	hostS  = a6("fc00:a::1")
	hostD  = a6("fc00:d::1")
	sidIn  = a6("fc00:1::1")
	sidPx  = a6("fc00:2::ad")
	sidNx  = a6("fc00:3::1")
	sidEg  = a6("fc00:4::d6")
	inner6 = ip6(hostS, hostD, 17, 63, udp(1000, 2000, 16))
	innerB = ip6(hostS, hostD, 17, 63, udp(1001, 2000, 16)) // another flow
	inner4 = ip4("10.0.0.1", "10.9.9.9", 17, udp(1000, 2000, 16))
)

// big4 fills a 1500-byte MTU by itself (DF set).
var big4 = ip4("10.0.0.1", "10.9.9.9", 17, udp(1, 2, 1500-20-8))

// noDF clears DF (and fixes the header checksum).
func noDF(p []byte) []byte {
	q := append([]byte{}, p...)
	q[6] = 0
	q[10], q[11] = 0, 0
	binary.BigEndian.PutUint16(q[10:], testutil.Checksum(q[:20]))
	return q
}

// fragNeeded is the ICMP error the node (10.99.0.1) owes the source of pkt:
// type 3 code 4 with the next-hop MTU, quoting 548 bytes (RFC 1191/1812).
func fragNeeded(pkt []byte, mtu uint16) []byte {
	msg := []byte{3, 4, 0, 0, 0, 0, byte(mtu >> 8), byte(mtu)}
	msg = append(msg, pkt[:548]...)
	binary.BigEndian.PutUint16(msg[2:], testutil.Checksum(msg))
	return ip4cs("10.99.0.1", netip.AddrFrom4([4]byte(pkt[12:16])).String(), 1, msg)
}

// ip4cs is ip4 without DF (what an ICMP error carries).
func ip4cs(src, dst string, proto uint8, payload []byte) []byte {
	return noDF(ip4(src, dst, proto, payload))
}

// Frames of an L2 service (inner ethernet): from a client (macCl) to the
// edge's MAC (macEdge), as H.Encaps.L2 carries them.
var (
	macCl    = testutil.MustMAC("02:00:00:00:00:c1")
	macEdge  = testutil.MustMAC("02:00:00:00:00:e1")
	frameIn  = eth(macEdge, macCl, 0x86dd, ip6(hostS, hostD, 17, 64, udp(1000, 2000, 16)))
	arpFrame = eth(testutil.MustMAC("ff:ff:ff:ff:ff:ff"), macCl, 0x0806, make([]byte, 28))
	bpdu     = eth(testutil.MustMAC("01:80:c2:00:00:00"), macSF, 38, append([]byte{0x42, 0x42, 0x03}, make([]byte, 35)...)) // 802.3 length + LLC
)

// big6 fills a 1500-byte MTU by itself.
var big6 = ip6(hostS, hostD, 17, 63, udp(1000, 2000, 1500-40-8))

// ptb is the ICMPv6 Packet Too Big the node (fc00:99::1) owes the source of
// pkt: RFC 4443 3.2, quoting 1232 bytes.
func ptb(pkt []byte, mtu uint32) []byte {
	return testutil.ICMP6Error(a6("fc00:99::1"), pkt, 2, 0, mtu)
}

// srPkt is an encapsulated packet arriving from the network towards sid
// with list (Segment List order) and sl.
func srPkt(list []netip.Addr, sl uint8, nh uint8, tlv []byte, inner []byte) []byte {
	da := list[sl]
	return eth(macNode, macPeer, 0x86dd, ip6(sidIn, da, 43, 60, srh(nh, list, sl, 0, tlv, inner)))
}

type step struct {
	name    string
	iif     string // "net" (pa) or "sf" (sfb)
	in      []byte
	verdict Verdict
	out     []byte // nil: don't care (drops)
	reason  *DropReason
}

func reason(r DropReason) *DropReason { return &r }

// runStep runs s through SID 0's program and checks its verdict, output and
// drop counters (a drop on the way back from the SF counts as an out drop).
func (n *testNode) runStep(t *testing.T, s step) {
	t.Helper()
	iif := n.pa
	if s.iif == "sf" {
		iif = n.sfb
	}
	before := n.stats(t, 0)
	v, out := n.run(t, iif, s.in)
	after := n.stats(t, 0)
	if v != s.verdict {
		t.Errorf("%s: verdict %d, want %d (drops %v)", s.name, v, s.verdict, after.Drops)
		return
	}
	if s.out != nil {
		if diff := cmp.Diff(s.out, out); diff != "" {
			t.Errorf("%s: output (-want +got):\n%s", s.name, diff)
		}
	}
	if s.reason != nil && after.Drops[*s.reason] != before.Drops[*s.reason]+1 {
		t.Errorf("%s: drop counter %s did not increase: %v -> %v", s.name, *s.reason, before.Drops, after.Drops)
	}
	wantOut := before.OutDrops
	if s.reason != nil && s.iif == "sf" {
		wantOut++
	}
	if after.OutDrops != wantOut {
		t.Errorf("%s: out drops %d -> %d, want %d", s.name, before.OutDrops, after.OutDrops, wantOut)
	}
}

func TestProgFixtures(t *testing.T) {
	list := []netip.Addr{sidEg, sidNx, sidPx, sidIn} // path: In, Px, Nx, Eg
	// After End at the proxy: SL 2 -> 1, DA = sidNx, hop limit 60 -> 59.
	cachedOuter := func(nh uint8, tlv []byte, inner []byte) []byte {
		return ip6(sidIn, sidNx, 43, 59, srh(nh, list, 1, 0, tlv, inner))
	}
	tlv := hmacTLV()
	// End.AS configured path Nx, Eg from src fc00:2::5.
	asOuter := func(nh uint8, inner []byte) []byte {
		return ip6(a6("fc00:2::5"), sidNx, 43, 64, srh(nh, []netip.Addr{sidEg, sidNx}, 1, 0, nil, inner))
	}
	tests := []struct {
		name  string
		confs []sidConf
		steps []step
	}{
		{"End.AD6 round trip keeps HMAC TLV", []sidConf{{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv6, mac: true}}, []step{
			{"return before any inbound: cache empty", "sf", eth(macSFOut, macSF, 0x86dd, inner6), VerdictDrop, nil, reason(DropCacheEmpty)},
			{"inbound strips to the SF", "net", srPkt(list, 2, 41, tlv, inner6), VerdictRedirect, eth(macSF, macSFOut, 0x86dd, inner6), nil},
			{"outbound pushes cache", "sf", eth(macSFOut, macSF, 0x86dd, inner6), VerdictRedirect, eth(macNext, macNode, 0x86dd, cachedOuter(41, tlv, inner6)), nil},
			{"link-local from SF passes", "sf", eth(macSFOut, macSF, 0x86dd, ip6(a6("fe80::1"), a6("fe80::2"), 58, 255, []byte{135, 0, 0, 0})), VerdictNext, eth(macSFOut, macSF, 0x86dd, ip6(a6("fe80::1"), a6("fe80::2"), 58, 255, []byte{135, 0, 0, 0})), nil},
			{"NA to a global address passes", "sf", eth(macSFOut, macSF, 0x86dd, ip6(a6("fc00:5f::2"), a6("fc00:5f::1"), 58, 255, []byte{136, 0, 0, 0, 0x60, 0, 0, 0})), VerdictNext, eth(macSFOut, macSF, 0x86dd, ip6(a6("fc00:5f::2"), a6("fc00:5f::1"), 58, 255, []byte{136, 0, 0, 0, 0x60, 0, 0, 0})), nil},
			{"ARP from SF passes", "sf", eth(macSFOut, macSF, 0x0806, make([]byte, 28)), VerdictNext, eth(macSFOut, macSF, 0x0806, make([]byte, 28)), nil},
			// Issue 24: 802.1ad + 802.1Q priority tags (VID 0) around
			// forged SRv6; the stack would untag and route it past us.
			{"QinQ VID 0 tags from SF dropped", "sf", eth(macSFOut, macSF, 0x88a8, append([]byte{0, 0, 0x81, 0, 0, 0, 0x86, 0xdd}, srPkt(list, 1, 41, nil, inner6)[14:]...)), VerdictDrop, nil, reason(DropVlan)},
			{"an 802.1Q tag from SF dropped", "sf", eth(macSFOut, macSF, 0x8100, append([]byte{0, 5, 0x86, 0xdd}, inner6...)), VerdictDrop, nil, reason(DropVlan)},
			{"last segment is dropped", "net", srPkt([]netip.Addr{sidPx, sidIn}, 0, 41, nil, inner6), VerdictDrop, nil, reason(DropSLZero)},
			{"wrong inner type", "net", srPkt(list, 2, 4, nil, inner4), VerdictDrop, nil, reason(DropInnerType)},
			{"hop limit 1", "net", eth(macNode, macPeer, 0x86dd, ip6(sidIn, sidPx, 43, 1, srh(41, list, 2, 0, nil, inner6))), VerdictDrop, nil, reason(DropHopLimit)},
			{"truncated SRH", "net", srPkt(list, 2, 41, nil, inner6)[:14+40+20], VerdictDrop, nil, reason(DropTruncated)},
			{"SL > last entry", "net", func() []byte {
				b := srPkt(list, 2, 41, nil, inner6)
				b[14+40+3] = 7
				return b
			}(), VerdictDrop, nil, reason(DropBadSRH)},
			{"fragment header", "net", eth(macNode, macPeer, 0x86dd, ip6(sidIn, sidPx, 44, 60, make([]byte, 48))), VerdictDrop, nil, reason(DropFragment)},
			{"not a proxy SID: untouched", "net", srPkt([]netip.Addr{sidEg, sidNx}, 1, 41, nil, inner6), VerdictNext, srPkt([]netip.Addr{sidEg, sidNx}, 1, 41, nil, inner6), nil},
		}},
		{"End.AD4 with neighbour S-ADDR", []sidConf{{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv4}}, []step{
			{"inbound strips, ethertype IPv4", "net", srPkt(list, 2, 4, nil, inner4), VerdictRedirect, eth(macNode, macPeer, 0x0800, inner4), nil},
			{"outbound IPv4 pushed", "sf", eth(macSFOut, macSF, 0x0800, inner4), VerdictRedirect, eth(macNext, macNode, 0x86dd, cachedOuter(4, nil, inner4)), nil},
			{"IPv4 multicast passes", "sf", eth(macSFOut, macSF, 0x0800, ip4("10.0.0.1", "224.0.0.5", 89, make([]byte, 8))), VerdictNext, eth(macSFOut, macSF, 0x0800, ip4("10.0.0.1", "224.0.0.5", 89, make([]byte, 8))), nil},
			{"too big after encap, IPv4 DF: fragmentation needed", "sf", eth(macSFOut, macSF, 0x0800, big4), VerdictRedirect,
				eth(macNext, macNode, 0x0800, fragNeeded(big4, 1500-(40+8+64))), nil},
			{"too big after encap, IPv4 without DF: dropped", "sf", eth(macSFOut, macSF, 0x0800, noDF(big4)), VerdictDrop, nil, reason(DropMTU)},
		}},
		{"End.AD6 too big after encap: Packet Too Big to the inner source", []sidConf{{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv6, mac: true}}, []step{
			{"inbound", "net", srPkt(list, 2, 41, nil, inner6), VerdictRedirect, eth(macSF, macSFOut, 0x86dd, inner6), nil},
			{"1500-byte packet from the SF", "sf", eth(macSFOut, macSF, 0x86dd, big6), VerdictRedirect, eth(macNext, macNode, 0x86dd, ptb(big6, 1500-(40+8+64))), nil},
		}},
		{"End.EAD last segment delivers, no re-encap", []sidConf{{sid: sidPx.String(), behavior: EndEAD, inner: InnerIPv6, mac: true}}, []step{
			{"SL=0 delivered", "net", srPkt([]netip.Addr{sidPx, sidIn}, 0, 41, nil, inner6), VerdictRedirect, eth(macSF, macSFOut, 0x86dd, inner6), nil},
			{"return passes unencapsulated", "sf", eth(macSFOut, macSF, 0x86dd, inner6), VerdictNext, eth(macSFOut, macSF, 0x86dd, inner6), nil},
			{"SL>0 learns", "net", srPkt(list, 2, 41, nil, inner6), VerdictRedirect, eth(macSF, macSFOut, 0x86dd, inner6), nil},
			{"return re-encapsulated", "sf", eth(macSFOut, macSF, 0x86dd, inner6), VerdictRedirect, eth(macNext, macNode, 0x86dd, cachedOuter(41, nil, inner6)), nil},
		}},
		{"End.AS static", []sidConf{{sid: sidPx.String(), behavior: EndAS, inner: InnerIPv4, mac: true, asSrc: "fc00:2::5", asSegs: []string{sidNx.String(), sidEg.String()}}}, []step{
			{"inbound strips", "net", srPkt(list, 2, 4, tlv, inner4), VerdictRedirect, eth(macSF, macSFOut, 0x0800, inner4), nil},
			{"inbound with SL=0 also strips", "net", srPkt([]netip.Addr{sidPx, sidIn}, 0, 4, nil, inner4), VerdictRedirect, eth(macSF, macSFOut, 0x0800, inner4), nil},
			{"SF-generated packet gets configured CACHE", "sf", eth(macSFOut, macSF, 0x0800, ip4("192.0.2.7", "10.9.9.9", 6, make([]byte, 20))), VerdictRedirect, eth(macNext, macNode, 0x86dd, asOuter(4, ip4("192.0.2.7", "10.9.9.9", 6, make([]byte, 20)))), nil},
		}},
		{"End.AM masquerade", []sidConf{{sid: sidPx.String(), behavior: EndAM, inner: InnerIPv6, mac: true}}, []step{
			{"inbound: DA <- SegList[0], SRH kept", "net", srPkt(list, 2, 17, nil, udp(1, 2, 8)), VerdictRedirect,
				eth(macSF, macSFOut, 0x86dd, ip6(sidIn, sidEg, 43, 60, srh(17, list, 2, 0, nil, udp(1, 2, 8)))), nil},
			{"outbound: SL--, DA <- SegList[SL]", "sf", eth(macSFOut, macSF, 0x86dd, ip6(sidIn, sidEg, 43, 59, srh(17, list, 2, 0, tlv, udp(1, 2, 8)))), VerdictRedirect,
				eth(macNext, macNode, 0x86dd, ip6(sidIn, sidNx, 43, 58, srh(17, list, 1, 0, tlv, udp(1, 2, 8)))), nil},
			{"outbound without SRH passes", "sf", eth(macSFOut, macSF, 0x86dd, inner6), VerdictNext, eth(macSFOut, macSF, 0x86dd, inner6), nil},
			{"outbound: VID 0 tags around SRv6 dropped", "sf", eth(macSFOut, macSF, 0x8100, append([]byte{0, 0, 0x86, 0xdd}, ip6(sidIn, sidEg, 43, 59, srh(17, list, 2, 0, nil, udp(1, 2, 8)))...)), VerdictDrop, nil, reason(DropVlan)},
			{"inbound without SRH dropped", "net", eth(macNode, macPeer, 0x86dd, ip6(sidIn, sidPx, 17, 60, udp(1, 2, 8))), VerdictDrop, nil, reason(DropNoSRH)},
			{"inbound SL=0 dropped", "net", srPkt([]netip.Addr{sidPx, sidIn}, 0, 17, nil, udp(1, 2, 8)), VerdictDrop, nil, reason(DropSLZero)},
		}},
		{"End.AD inner ethernet", []sidConf{{sid: sidPx.String(), behavior: EndAD, inner: InnerEthernet}}, []step{
			{"frame before any inbound: cache empty", "sf", frameIn, VerdictDrop, nil, reason(DropCacheEmpty)},
			{"inbound: the inner frame, untouched, to the SF", "net", srPkt(list, 2, 143, tlv, frameIn), VerdictRedirect, frameIn, nil},
			{"inbound: a short inner frame (ARP)", "net", srPkt(list, 2, 143, tlv, arpFrame), VerdictRedirect, arpFrame, nil},
			{"outbound: the whole frame encapsulated", "sf", frameIn, VerdictRedirect, eth(macNext, macNode, 0x86dd, cachedOuter(143, tlv, frameIn)), nil},
			{"outbound: ARP encapsulated too", "sf", arpFrame, VerdictRedirect, eth(macNext, macNode, 0x86dd, cachedOuter(143, tlv, arpFrame)), nil},
			{"outbound: link-local IPv6 encapsulated too", "sf", eth(macCl, macSF, 0x86dd, ip6(a6("fe80::1"), a6("ff02::1"), 58, 255, []byte{134, 0, 0, 0})), VerdictRedirect,
				eth(macNext, macNode, 0x86dd, cachedOuter(143, tlv, eth(macCl, macSF, 0x86dd, ip6(a6("fe80::1"), a6("ff02::1"), 58, 255, []byte{134, 0, 0, 0})))), nil},
			{"outbound: too big for the uplink", "sf", eth(macCl, macSF, 0x86dd, big6), VerdictDrop, nil, reason(DropMTU)},
			{"outbound: an STP BPDU stays on the link", "sf", bpdu, VerdictNext, bpdu, nil},
			{"inbound: IPv6 inner refused", "net", srPkt(list, 2, 41, nil, inner6), VerdictDrop, nil, reason(DropInnerType)},
		}},
		{"End.AS inner ethernet", []sidConf{{sid: sidPx.String(), behavior: EndAS, inner: InnerEthernet, asSrc: "fc00:2::5", asSegs: []string{sidNx.String(), sidEg.String()}}}, []step{
			{"inbound strips to the frame", "net", srPkt(list, 2, 143, nil, frameIn), VerdictRedirect, frameIn, nil},
			{"SF frame gets the configured CACHE", "sf", arpFrame, VerdictRedirect, eth(macNext, macNode, 0x86dd, asOuter(143, arpFrame)), nil},
		}},
		{"per-flow End.AD", []sidConf{{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv6, mac: true, flow: true}}, []step{
			{"unknown flow back from SF", "sf", eth(macSFOut, macSF, 0x86dd, inner6), VerdictDrop, nil, reason(DropFlowMiss)},
			{"flow learnt", "net", srPkt(list, 2, 41, nil, inner6), VerdictRedirect, eth(macSF, macSFOut, 0x86dd, inner6), nil},
			{"same flow re-encapsulated", "sf", eth(macSFOut, macSF, 0x86dd, inner6), VerdictRedirect, eth(macNext, macNode, 0x86dd, cachedOuter(41, nil, inner6)), nil},
			{"other flow misses", "sf", eth(macSFOut, macSF, 0x86dd, ip6(hostS, hostD, 17, 63, udp(1001, 2000, 16))), VerdictDrop, nil, reason(DropFlowMiss)},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t)
			n.seed(t, tc.confs)
			for _, s := range tc.steps {
				n.runStep(t, s)
			}
		})
	}
}

// ---- differential test: program vs model on random packets ----

func randomFrame(r *rand.Rand) (iif string, frame []byte) {
	sids := []netip.Addr{sidPx, sidPx, sidPx, sidPx, a6("fc00:2::a5"), sidNx}
	n := 1 + r.IntN(4)
	list := make([]netip.Addr, n)
	for i := range list {
		list[i] = a6(fmt.Sprintf("fc00:%x::%x", 3+r.IntN(3), 1+r.IntN(3)))
	}
	sl := uint8(r.IntN(n))
	list[sl] = sids[r.IntN(len(sids))]
	var inner []byte
	var nh uint8
	switch r.IntN(5) {
	case 0:
		inner, nh = ip4(fmt.Sprintf("10.0.0.%d", r.IntN(3)), "10.9.9.9", 17, udp(uint16(1000+r.IntN(2)), 53, r.IntN(64))), 4
	case 4:
		inner, nh = eth(macEdge, macCl, 0x86dd, ip6(hostS, hostD, 17, 64, udp(1, 2, r.IntN(64)))), 143
		if r.IntN(3) == 0 {
			inner = arpFrame
		}
	case 3:
		inner, nh = udp(5, 6, r.IntN(30)), 17
	default:
		inner, nh = ip6(hostS, hostD, 17, uint8(r.IntN(3)), udp(uint16(1000+r.IntN(2)), 53, r.IntN(64))), 41
	}
	var tlv []byte
	if r.IntN(3) == 0 {
		tlv = hmacTLV()
	}
	hop := uint8(r.IntN(4))
	var payload []byte
	if r.IntN(6) == 0 {
		payload = inner
	} else {
		payload = srh(nh, list, sl, uint16(r.IntN(2)), tlv, inner)
		if r.IntN(8) == 0 {
			payload[3] = uint8(r.IntN(8)) // maybe SL > last entry
		}
		nh = 43
		if r.IntN(6) == 0 { // a destination options header first
			payload = append([]byte{43, 0, 1, 4, 0, 0, 0, 0}, payload...)
			nh = 60
		}
	}
	p := eth(macNode, macPeer, 0x86dd, ip6(sidIn, list[sl], nh, hop, payload))
	if r.IntN(10) == 0 {
		p = p[:54+r.IntN(len(p)-54)] // test_run needs the Ethernet + IPv6 headers
	}
	if r.IntN(3) == 0 { // something coming back from the SF
		var in []byte
		switch r.IntN(9) {
		case 6:
			in = arpFrame
			if r.IntN(2) == 0 {
				in = bpdu
			}
		case 7:
			in = eth(macCl, macSF, 0x86dd, ip6(hostS, hostD, 17, 63, udp(1, 2, 1380+r.IntN(200))))
		case 0:
			in = eth(macSFOut, macSF, 0x0800, inner4)
		case 1:
			in = eth(macSFOut, macSF, 0x86dd, ip6(sidIn, list[sl], 43, hop, srh(17, list, sl, 0, tlv, udp(1, 2, 4))))
		case 2:
			in = eth(macSFOut, macSF, 0x86dd, ip6(hostS, hostD, 17, 63, udp(uint16(1000+r.IntN(2)), 53, r.IntN(64))))
		case 4:
			in = eth(macSFOut, macSF, 0x86dd, ip6(hostS, hostD, 17, 63, udp(uint16(1000+r.IntN(2)), 53, 1300+r.IntN(200))))
		case 5:
			p4 := ip4("10.0.0.1", "10.9.9.9", 17, udp(1000, 53, 1380+r.IntN(90)))
			if r.IntN(3) == 0 {
				p4 = noDF(p4)
			}
			in = eth(macSFOut, macSF, 0x0800, p4)
		case 3:
			in = eth(macSFOut, macSF, 0x86dd, ip6(a6("fc00:5f::2"), a6("fc00:5f::1"), 58, 255, []byte{uint8(128 + r.IntN(12)), 0, 0, 0}))
		default:
			in = eth(macSFOut, macSF, 0x86dd, ip6(a6("fe80::1"), hostD, 17, 63, udp(1, 2, 3)))
		}
		return "sf", in
	}
	return "net", p
}

func TestProgDifferential(t *testing.T) {
	configs := map[string][]sidConf{
		"AD6":    {{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv6, mac: true}},
		"EAD4":   {{sid: sidPx.String(), behavior: EndEAD, inner: InnerIPv4, mac: true}},
		"AD6f":   {{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv6, mac: true, flow: true}},
		"AS6":    {{sid: sidPx.String(), behavior: EndAS, inner: InnerIPv6, asSrc: "fc00:2::5", asSegs: []string{sidNx.String(), sidEg.String()}}},
		"AM":     {{sid: sidPx.String(), behavior: EndAM, inner: InnerIPv6, mac: true}},
		"AD4nh":  {{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv4}},
		"ADeth":  {{sid: sidPx.String(), behavior: EndAD, inner: InnerEthernet}},
		"AD6max": {{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv6, mac: true, flow: true, flowMax: 2, timeout: time.Hour}},
		"ASeth":  {{sid: sidPx.String(), behavior: EndAS, inner: InnerEthernet, asSrc: "fc00:2::5", asSegs: []string{sidNx.String(), sidEg.String()}}},
	}
	const perConfig = 400
	for name, confs := range configs {
		t.Run(name, func(t *testing.T) {
			n := newTestNode(t)
			m := n.seed(t, confs)
			r := rand.New(rand.NewPCG(42, uint64(len(name))))
			verdicts := map[Verdict]int{}
			defer func() { t.Logf("verdicts %v, counters %+v", verdicts, *m.stats(0)) }()
			for i := range perConfig {
				where, frame := randomFrame(r)
				iif := n.pa
				if where == "sf" {
					iif = n.sfb
				}
				want := m.Run(iif, frame)
				v, out := n.run(t, iif, frame)
				verdicts[v]++
				if v != want.Verdict {
					t.Fatalf("packet %d (%s, %d bytes): verdict %d, model %d (model reason %s), prog drops %v passed %d", i, where, len(frame), v, want.Verdict, want.Reason, n.stats(t, 0).Drops, n.stats(t, 0).Passed)
				}
				if v != VerdictDrop {
					if diff := cmp.Diff(want.Out, out); diff != "" {
						t.Fatalf("packet %d (%s, % x): output (-model +prog):\n%s", i, where, frame, diff)
					}
				}
				got := n.stats(t, 0)
				if diff := cmp.Diff(*m.stats(0), got); diff != "" {
					t.Fatalf("packet %d (%s, % x): counters (-model +prog):\n%s", i, where, frame, diff)
				}
			}
		})
	}
}

// TestProgFlowMax: a SID with flow max keeps its flows in a cache of its
// own; a full cache refuses new flows (flow-full) until entries expire.
// No wall clock: the timeout is an hour, and the test ages flow A's entry
// by two through the map (a fake clock) instead of sleeping past it.
func TestProgFlowMax(t *testing.T) {
	list := []netip.Addr{sidEg, sidNx, sidPx, sidIn}
	cachedOuter := func(inner []byte) []byte {
		return ip6(sidIn, sidNx, 43, 59, srh(41, list, 1, 0, nil, inner))
	}
	n := newTestNode(t)
	n.seed(t, []sidConf{{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv6, mac: true, flow: true, flowMax: 1, timeout: time.Hour}})
	steps := []struct {
		age bool // age the SID's flows by two timeouts first
		step
	}{
		{false, step{"flow A learnt", "net", srPkt(list, 2, 41, nil, inner6), VerdictRedirect, eth(macSF, macSFOut, 0x86dd, inner6), nil}},
		{false, step{"flow A again: no new entry", "net", srPkt(list, 2, 41, nil, inner6), VerdictRedirect, eth(macSF, macSFOut, 0x86dd, inner6), nil}},
		{false, step{"flow B: cache full", "net", srPkt(list, 2, 41, nil, innerB), VerdictDrop, nil, reason(DropFlowFull)}},
		{false, step{"flow A still served", "sf", eth(macSFOut, macSF, 0x86dd, inner6), VerdictRedirect, eth(macNext, macNode, 0x86dd, cachedOuter(inner6)), nil}},
		{true, step{"flow A expired: flow B takes its place", "net", srPkt(list, 2, 41, nil, innerB), VerdictRedirect, eth(macSF, macSFOut, 0x86dd, innerB), nil}},
		{false, step{"flow A: miss", "sf", eth(macSFOut, macSF, 0x86dd, inner6), VerdictDrop, nil, reason(DropFlowMiss)}},
		{false, step{"flow B served", "sf", eth(macSFOut, macSF, 0x86dd, innerB), VerdictRedirect, eth(macNext, macNode, 0x86dd, cachedOuter(innerB)), nil}},
	}
	for _, s := range steps {
		if s.age {
			n.ageFlows(t, 0, 2*time.Hour)
		}
		n.runStep(t, s.step)
	}
	// The node-wide LRU was not used.
	var k proxyTCProxyFlowKey
	var v proxyTCProxyCache
	if it := n.objs.FlowsMap.Iterate(); it.Next(&k, &v) {
		t.Errorf("flow in the node-wide LRU: %+v", k)
	}
}

// ageFlows moves back by age the last update of every flow in SID id's
// own per-flow cache (the program's clock, bpf_ktime_get_ns, is
// CLOCK_MONOTONIC).
func (n *testNode) ageFlows(t *testing.T, id uint32, age time.Duration) {
	t.Helper()
	m := n.node().flowCap(id)
	if m == nil {
		t.Fatalf("SID %d has no per-flow cache", id)
	}
	defer m.Close()
	var k proxyTCProxyFlowKey
	var v proxyTCProxyCache
	var keys []proxyTCProxyFlowKey
	for it := m.Iterate(); it.Next(&k, &v); {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		t.Fatalf("SID %d: no flow to age", id)
	}
	for _, k := range keys {
		if err := m.Lookup(&k, &v); err != nil {
			t.Fatal(err)
		}
		v.UpdatedNs -= uint64(age)
		if err := m.Put(&k, &v); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProgFlowCacheChange: a flow learnt before the SID's flow max changes
// is still served after it, both ways (node-wide LRU → a cache of its own
// → the node-wide LRU again): a packet the SF returns right after the
// change is re-encapsulated, not dropped as a flow miss.
func TestProgFlowCacheChange(t *testing.T) {
	list := []netip.Addr{sidEg, sidNx, sidPx, sidIn}
	cachedOuter := ip6(sidIn, sidNx, 43, 59, srh(41, list, 1, 0, nil, inner6))
	n := newTestNode(t)
	n.seed(t, []sidConf{{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv6, mac: true, flow: true, timeout: time.Minute}})
	if v, _ := n.run(t, n.pa, srPkt(list, 2, 41, nil, inner6)); v != VerdictRedirect {
		t.Fatalf("flow A not learnt: verdict %d", v)
	}
	setMax := func(max uint32) {
		t.Helper()
		k := sidKey(netip.PrefixFrom(sidPx, 128))
		var cfg proxyTCProxySid
		if err := n.objs.SidsMap.Lookup(&k, &cfg); err != nil {
			t.Fatal(err)
		}
		// What Node.update does: the cache first, then the configuration.
		nd := n.node()
		if max > 0 {
			if err := nd.setFlowCap(cfg.Id, max); err != nil {
				t.Fatal(err)
			}
		} else if own := nd.flowCap(cfg.Id); own != nil {
			copyFlows(n.objs.FlowsMap, own, cfg.Id, 0)
			own.Close()
		}
		cfg.FlowMax = max
		if err := n.objs.SidsMap.Put(&k, &cfg); err != nil {
			t.Fatal(err)
		}
		if err := n.objs.IfacesMap.Put(cfg.Iif, &cfg); err != nil {
			t.Fatal(err)
		}
		if max == 0 {
			if err := nd.setFlowCap(cfg.Id, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	served := func(when string) {
		t.Helper()
		v, out := n.run(t, n.sfb, eth(macSFOut, macSF, 0x86dd, inner6))
		if v != VerdictRedirect {
			t.Fatalf("%s: flow A returned by the SF: verdict %d (drops %v), want it re-encapsulated", when, v, n.stats(t, 0).Drops)
		}
		if diff := cmp.Diff(eth(macNext, macNode, 0x86dd, cachedOuter), out); diff != "" {
			t.Errorf("%s: output (-want +got):\n%s", when, diff)
		}
	}
	served("node-wide LRU")
	setMax(10)
	served("after flow max 10 (a cache of its own)")
	// Only the SID's own cache holds the flow now (as for a flow learnt
	// after the change): going back must carry it over.
	id := uint32(0)
	n.node().deleteFlows(&id)
	served("own cache only")
	setMax(0)
	served("back to the node-wide LRU")
}
