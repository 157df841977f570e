package boundary

import (
	"encoding/binary"
	"net/netip"
	"regexp"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// Issue 24's bypasses as verdict-table rows: what the kernel would act on,
// not what looks well formed.

const (
	nhDstOpts = 60
	ethVLAN   = 0x8100
	ethQinQ   = 0x88a8
)

// tagged is an Ethernet frame whose IPv6 payload sits behind VLAN tags
// (outermost first: each an ethertype 0x8100/0x88a8 and a VID).
func tagged(l3 []byte, tags ...[2]uint16) []byte {
	if len(tags) == 0 {
		return eth6(l3)
	}
	var body []byte
	for i := 1; i < len(tags); i++ {
		body = binary.BigEndian.AppendUint16(body, tags[i-1][1])
		body = binary.BigEndian.AppendUint16(body, tags[i][0])
	}
	body = binary.BigEndian.AppendUint16(body, tags[len(tags)-1][1])
	body = binary.BigEndian.AppendUint16(body, 0x86dd)
	return testutil.Eth(mac1, mac2, tags[0][0], append(body, l3...))
}

// rh is a routing header: type typ, Segments Left sl, Last Entry le, the
// segments list (Segment List[0] first) and TLVs, its Hdr Ext Len from
// what it holds unless hdrlen >= 0.
func rh(nh, typ, sl, le uint8, hdrlen int, list []netip.Addr, tlv, payload []byte) []byte {
	b := testutil.SRH(nh, list, sl, 0, tlv, nil)
	b[2], b[4] = typ, le
	if hdrlen >= 0 {
		b[1] = uint8(hdrlen)
	}
	return append(b, payload...)
}

func TestKernelViewVerdicts(t *testing.T) {
	b := nodestate.Boundary{
		Locators: []netip.Prefix{netip.MustParsePrefix("fc00:1::/64"), netip.MustParsePrefix("fc00:2::/64")},
		External: []netip.Prefix{netip.MustParsePrefix("fc00:2::e:0/112"), netip.MustParsePrefix("fc00:1::e:0/112")},
		Nodes:    []netip.Addr{a("fc00:12::1"), a("fc00:1a::1")},
	}
	n := loadTest(t, b)
	src, out := a("fc00:1a::a"), a("fc00:4d::d")
	sid, ext, ext2, node := a("fc00:2::f1:3"), a("fc00:2::e:5"), a("fc00:1::e:7"), a("fc00:12::1")
	inner := testutil.IPv6(src, out, nhUDP, 64, udp())
	ip := func(dst netip.Addr, nh uint8, payload []byte) []byte { return testutil.IPv6(src, dst, nh, 64, payload) }
	segs := func(s ...netip.Addr) []netip.Addr { return s }
	dstopts := func(next uint8, payload []byte) []byte {
		return append([]byte{next, 0, 1, 4, 0, 0, 0, 0}, payload...)
	}
	q0 := [2]uint16{ethQinQ, 0}
	v0 := [2]uint16{ethVLAN, 0}
	v100 := [2]uint16{ethVLAN, 100}
	for _, tc := range []struct {
		name   string
		prog   *ebpf.Program
		frame  []byte
		want   uint32
		reason string
	}{
		// 1. Every type 4 routing header to a node, valid or not.
		{"SL > Last Entry to a node", n.objs.BoundaryIn,
			eth6(ip(node, nhRouting, rh(nhIPv6, 4, 1, 0, -1, segs(sid, node), nil, inner))), actShot, "srh-to-node"},
		{"Last Entry beyond the header to a node", n.objs.BoundaryIn,
			eth6(ip(node, nhRouting, rh(nhIPv6, 4, 1, 7, -1, segs(sid, node), nil, inner))), actShot, "srh-to-node"},
		{"SRH of one segment, SL 1 (the issue's packet) to a node", n.objs.BoundaryIn,
			eth6(ip(node, nhRouting, rh(nhIPv6, 4, 1, 0, 2, segs(sid), nil, inner))), actShot, "srh-to-node"},
		{"type 0 routing header (SL 0) before an SRH to a node", n.objs.BoundaryIn,
			eth6(ip(node, nhRouting, rh(nhRouting, 0, 0, 0, -1, segs(out), nil, rh(nhIPv6, 4, 1, 1, -1, segs(sid, node), nil, inner)))), actShot, "srh-to-node"},
		{"two SRHs to a node", n.objs.BoundaryIn,
			eth6(ip(node, nhRouting, rh(nhRouting, 4, 0, 0, -1, segs(node), nil, rh(nhIPv6, 4, 1, 1, -1, segs(sid, node), nil, inner)))), actShot, "srh-to-node"},
		{"type 2 routing header with segments left to a node", n.objs.BoundaryIn,
			eth6(ip(node, nhRouting, rh(nhIPv6, 2, 1, 0, -1, segs(sid), nil, inner))), actShot, "malformed"},
		{"malformed SRH transiting to an outside host passes", n.objs.BoundaryIn,
			eth6(ip(out, nhRouting, rh(nhIPv6, 4, 1, 0, -1, segs(sid, out), nil, inner))), actUnspec, ""},
		{"malformed SRH behind destination options into a locator", n.objs.BoundaryIn,
			eth6(ip(sid, nhDstOpts, dstopts(nhRouting, rh(nhIPv6, 4, 5, 0, -1, segs(sid), nil, inner)))), actShot, "sid-space-srh"},
		{"AH before an SRH to a node", n.objs.BoundaryIn,
			eth6(ip(node, 51, append([]byte{nhRouting, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, rh(nhIPv6, 4, 1, 1, -1, segs(sid, node), nil, inner)...))), actShot, "srh-to-node"},

		// 2. VLAN tags: what the kernel untags into IPv6.
		{"802.1ad + 802.1Q VID 0 around an SRH to a node", n.objs.BoundaryIn,
			tagged(ip(node, nhRouting, testutil.SRH(nhIPv6, segs(sid, node), 1, 0, nil, inner)), q0, v0), actShot, "srh-to-node"},
		{"VID 0 tags around IPv6 into a locator", n.objs.BoundaryIn, tagged(ip(sid, nhUDP, udp()), q0, v0), actShot, "sid-space"},
		{"a VID 100 tag around an SRH into a locator", n.objs.BoundaryIn,
			tagged(ip(sid, nhRouting, testutil.SRH(nhIPv6, segs(out, sid), 1, 0, nil, inner)), v100), actShot, "sid-space-srh"},
		{"four tags around IPv6 into a locator", n.objs.BoundaryIn, tagged(ip(sid, nhUDP, udp()), q0, v0, v0, v0), actShot, "sid-space"},
		{"five tags: more than the filter reads", n.objs.BoundaryIn, tagged(ip(out, nhUDP, udp()), q0, v0, v0, v0, v0), actShot, "vlan"},
		{"tagged IPv6 to outside passes", n.objs.BoundaryIn, tagged(ip(out, nhUDP, udp()), q0, v0), actUnspec, ""},
		{"tagged IPv4 passes", n.objs.BoundaryIn,
			testutil.Eth(mac1, mac2, ethVLAN, append([]byte{0, 5, 8, 0}, testutil.IPv4("10.0.0.1", "10.0.0.2", 17, false, udp())...)), actUnspec, ""},
		{"a truncated tag passes (the stack drops it)", n.objs.BoundaryIn, testutil.Eth(mac1, mac2, ethVLAN, []byte{0, 0}), actUnspec, ""},
		{"out: tagged IPv6 into a locator leaks", n.objs.BoundaryOut, tagged(ip(sid, nhUDP, udp()), q0, v0), actShot, "leak-sid"},

		// 3. An external SID is not a door to the rest of the domain.
		{"external SID, next segment a SID of the domain", n.objs.BoundaryIn,
			eth6(ip(ext, nhRouting, testutil.SRH(nhIPv6, segs(out, sid, ext), 2, 0, nil, inner))), actShot, "external-next"},
		{"external SID, last segment a SID of the domain", n.objs.BoundaryIn,
			eth6(ip(ext, nhRouting, testutil.SRH(nhIPv6, segs(sid, out, ext), 2, 0, nil, inner))), actShot, "external-next"},
		{"external SID, next segment a domain node", n.objs.BoundaryIn,
			eth6(ip(ext, nhRouting, testutil.SRH(nhIPv6, segs(node, ext), 1, 0, nil, inner))), actShot, "external-next"},
		{"external SID, then another external SID and outside passes", n.objs.BoundaryIn,
			eth6(ip(ext, nhRouting, testutil.SRH(nhIPv6, segs(out, ext2, ext), 2, 0, nil, inner))), actUnspec, ""},
		{"external SID, a domain SID already visited passes", n.objs.BoundaryIn,
			eth6(ip(ext, nhRouting, testutil.SRH(nhIPv6, segs(out, ext, sid), 1, 0, nil, inner))), actUnspec, ""},
		{"external SID, malformed SRH", n.objs.BoundaryIn,
			eth6(ip(ext, nhRouting, rh(nhIPv6, 4, 3, 0, -1, segs(out, sid), nil, inner))), actShot, "malformed"},
		{"external SID, two routing headers", n.objs.BoundaryIn,
			eth6(ip(ext, nhRouting, rh(nhRouting, 0, 0, 0, -1, segs(out), nil, testutil.SRH(nhIPv6, segs(out, ext), 1, 0, nil, inner)))), actShot, "malformed"},
		{"external SID, SL 0, inner packet into a locator", n.objs.BoundaryIn,
			eth6(ip(ext, nhRouting, testutil.SRH(nhIPv6, segs(ext), 0, 0, nil, ip(sid, nhUDP, udp())))), actShot, "external-next"},
		{"external SID, bare IPv6-in-IPv6 into a locator", n.objs.BoundaryIn, eth6(ip(ext, nhIPv6, ip(sid, nhUDP, udp()))), actShot, "external-next"},
		{"external SID, bare IPv6-in-IPv6 to outside passes", n.objs.BoundaryIn, eth6(ip(ext, nhIPv6, inner)), actUnspec, ""},
		{"external SID, a fragment", n.objs.BoundaryIn,
			eth6(ip(ext, 44, []byte{nhRouting, 0, 0, 1, 0, 0, 0, 1})), actShot, "malformed"},
	} {
		n.expectTCAndXDP(t, tc.name, tc.prog, tc.frame, tc.want, tc.reason)
	}
}

// TestHMACKernelView: the HMAC classifier drops what the kernel would let
// through a signed SID unchecked (a malformed SRH taken for none) or check
// on another header than the one it acts on.
func TestHMACKernelView(t *testing.T) {
	sidP := netip.MustParsePrefix("fc00:4::a:0/112")
	n := loadTest(t, nodestate.Boundary{
		Locators: []netip.Prefix{netip.MustParsePrefix("fc00:4::/64")},
		HMACSIDs: []netip.Prefix{sidP}, HMACKeys: []uint32{1001},
	})
	src, out := a("fc00:1::1"), a("fc00:4d::d")
	sid, end1 := a("fc00:4::a:0"), a("fc00:2::e")
	inner := testutil.IPv6(a("fc00:1a::a"), out, nhUDP, 64, udp())
	tlv := append([]byte{5, 38, 0, 0, 0, 0, 0x03, 0xe9}, make([]byte, 32)...) // key 1001
	// signedSRH is an SRH with the HMAC flag and TLV (flags byte 5).
	signedSRH := func(nh uint8, list []netip.Addr, sl uint8, extra, payload []byte) []byte {
		b := testutil.SRH(nh, list, sl, 0, append(append([]byte{}, tlv...), extra...), payload)
		b[5] |= 0x08
		return b
	}
	ip := func(nh uint8, payload []byte) []byte { return eth6(testutil.IPv6(src, sid, nh, 64, payload)) }
	good := signedSRH(nhIPv6, []netip.Addr{sid}, 0, nil, inner)
	for _, tc := range []struct {
		name   string
		frame  []byte
		want   uint32
		reason string
	}{
		{"well formed: the kernel checks the digest", ip(nhRouting, good), actUnspec, ""},
		{"behind hop-by-hop: the kernel checks the digest", ip(nhHop, append([]byte{nhRouting, 0, 1, 4, 0, 0, 0, 0}, good...)), actUnspec, ""},
		// 4. A malformed SRH: End.DX6 takes it for none and skips the HMAC.
		{"Last Entry 7 beyond the header", ip(nhRouting, func() []byte {
			b := signedSRH(nhIPv6, []netip.Addr{sid}, 0, nil, inner)
			b[4] = 7
			return b
		}()), actShot, "hmac-malformed"},
		{"SL > Last Entry", ip(nhRouting, func() []byte {
			b := signedSRH(nhIPv6, []netip.Addr{sid}, 0, nil, inner)
			b[3] = 1
			return b
		}()), actShot, "hmac-malformed"},
		{"a type 0 routing header", ip(nhRouting, rh(nhIPv6, 0, 0, 0, -1, []netip.Addr{sid}, nil, inner)), actShot, "hmac-malformed"},
		{"a TLV after the HMAC TLV", ip(nhRouting, signedSRH(nhIPv6, []netip.Addr{sid}, 0, []byte{4, 6, 0, 0, 0, 0, 0, 0}, inner)), actShot, "hmac-malformed"},
		{"truncated", ip(nhRouting, good[:30]), actShot, "hmac-malformed"},
		// 5. The HMAC the kernel checks must be the SRH it acts on.
		{"a signed copy in destination options before an altered SRH", ip(nhDstOpts, func() []byte {
			cp := append([]byte{}, good[:len(good)-len(inner)]...)
			cp[0] = nhRouting
			return append(cp, signedSRH(nhIPv6, []netip.Addr{sid, end1}, 1, nil, inner)...)
		}()), actShot, "hmac-misplaced"},
		{"a signed SRH with SL 0 before a second SRH", ip(nhRouting,
			signedSRH(nhRouting, []netip.Addr{sid}, 0, nil, signedSRH(nhIPv6, []netip.Addr{out, sid}, 1, nil, inner))), actShot, "hmac-misplaced"},
		{"destination options before the SRH", ip(nhDstOpts, append([]byte{nhRouting, 0, 1, 4, 0, 0, 0, 0}, good...)), actShot, "hmac-misplaced"},
		// 2. Tags do not hide a packet from the classifier.
		{"VID 0 tags, IPv6-in-IPv6 without SRH", tagged(testutil.IPv6(src, sid, nhIPv6, 64, inner), [2]uint16{ethQinQ, 0}, [2]uint16{ethVLAN, 0}), actShot, "hmac-missing"},
	} {
		t.Run(tc.name, func(t *testing.T) { n.expect(t, n.objs.HmacIn, tc.frame, tc.want, tc.reason) })
	}
}

// TestVerifierComplexity keeps the programs cheap to verify (verifying is
// most of what applying the boundary costs): the walks and the segment
// check are global functions and a bpf_loop callback so that the verifier
// checks each once. 2026-11-28: boundary_in 3,270 instructions processed,
// boundary_xdp 3,215, hmac_in 2,557, boundary_out 346.
func TestVerifierComplexity(t *testing.T) {
	testutil.RequireRoot(t)
	spec, err := loadBoundaryTC()
	if err != nil {
		t.Fatal(err)
	}
	var o boundaryTCObjects
	if err := spec.LoadAndAssign(&o, &ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}}); err != nil {
		t.Fatalf("load boundary program: %v", err)
	}
	defer o.Close()
	const limit = 10000
	for name, p := range map[string]*ebpf.Program{"boundary_in": o.BoundaryIn, "boundary_out": o.BoundaryOut, "boundary_xdp": o.BoundaryXdp, "hmac_in": o.HmacIn} {
		m := regexp.MustCompile(`processed (\d+) insns`).FindStringSubmatch(p.VerifierLog)
		if m == nil {
			t.Fatalf("%s: no statistics in the verifier log %q", name, p.VerifierLog)
		}
		if n, _ := strconv.Atoi(m[1]); n > limit {
			t.Errorf("%s: the verifier processed %d instructions, more than %d", name, n, limit)
		}
	}
}
