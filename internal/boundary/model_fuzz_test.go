package boundary

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// This file is a differential fuzz target (issue 24): structure-aware
// frames, built from the fuzzer's bytes, run through the boundary's
// ingress program (TCX, and its XDP variant) with BPF_PROG_TEST_RUN, and
// judged by a reference model written from RFC 8200, RFC 8754 and what
// Linux's receive path does, not from bpf/boundary_tc.bpf.c:
//
//   - mustDrop: the kernel would hand the packet to SRv6 processing inside
//     the domain (a SID of the SID space; an SRH to a node's address; past
//     an external SID into the domain), or the packet is addressed to an SF
//     (a service function behind a proxy is reached through its proxy
//     only: anything sent to it from outside skips the chain, and its
//     kernel would act on an SRH).
//   - mustPass: ordinary traffic (to an outside destination, plain traffic
//     to a node, IPv4, what the stack drops anyway as not for it).
//   - either: what the stack drops by itself (a truncated or malformed
//     header chain, a non-zero VID without a VLAN device, a routing header
//     the kernel refuses) or a policy choice the model leaves to the filter
//     ("when in doubt, drop": fragments to a node, more tags than it reads).
//
// Every drop must be counted: one more packet under one reason.
//
//	go test -run '^$' -fuzz FuzzBoundaryModel -fuzztime 60s ./internal/boundary/

type verdict int

const (
	either verdict = iota
	mustDrop
	mustPass
)

func (v verdict) String() string { return [...]string{"either", "must drop", "must pass"}[v] }

// fuzzDomain is the domain the fuzz target's filter holds.
var fuzzDomain = nodestate.Boundary{
	Locators: []netip.Prefix{netip.MustParsePrefix("fc00:1::/64"), netip.MustParsePrefix("fc00:2::/64")},
	External: []netip.Prefix{netip.MustParsePrefix("fc00:2::e:0/112")},
	Nodes:    []netip.Addr{netip.MustParseAddr("fc00:12::1"), netip.MustParseAddr("fc00:1a::1")},
	SFs:      []netip.Addr{netip.MustParseAddr("fc00:27::7")},
}

// ------------------------------------------------------------ the model

type domainModel struct{ b nodestate.Boundary }

func (m domainModel) external(a netip.Addr) bool {
	for _, p := range m.b.External {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// inside: a non-external address of the SID space, a node's or an SF's
// address.
func (m domainModel) inside(a netip.Addr) bool {
	if m.sf(a) {
		return true
	}
	if m.external(a) {
		return false
	}
	for _, p := range m.b.Locators {
		if p.Contains(a) {
			return true
		}
	}
	for _, n := range m.b.Nodes {
		if n == a {
			return true
		}
	}
	return false
}

func (m domainModel) node(a netip.Addr) bool {
	for _, n := range m.b.Nodes {
		if n == a {
			return true
		}
	}
	return false
}

func (m domainModel) sf(a netip.Addr) bool {
	for _, n := range m.b.SFs {
		if n == a {
			return true
		}
	}
	return false
}

func (m domainModel) sidSpace(a netip.Addr) bool {
	for _, p := range m.b.Locators {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

const (
	ipHBH, ipRouting, ipFrag, ipESP, ipAH, ipNone, ipDOH, ipIPv6 = 0, 43, 44, 50, 51, 59, 60, 41
	maxChain                                                     = 8
)

// wellFormedSRH is RFC 8754 §4.3.1's check (and the kernel's
// seg6_validate_srh): type 4, Last Entry within the header, Segments Left
// at most Last Entry, the TLVs filling the rest exactly.
func wellFormedSRH(h []byte) bool {
	if len(h) < 8 || h[2] != 4 {
		return false
	}
	le, sl := int(h[4]), int(h[3])
	segEnd := 8 + (le+1)*16
	if sl > le || segEnd > len(h) {
		return false
	}
	for off := segEnd; off < len(h); {
		if h[off] == 0 { // Pad1
			off++
			continue
		}
		if off+2 > len(h) {
			return false
		}
		off += 2 + int(h[off+1])
		if off > len(h) {
			return false
		}
	}
	return true
}

// kernelModel says what must happen to frame at the domain's ingress.
func (m domainModel) kernelModel(frame []byte) verdict {
	if len(frame) < 14 {
		return either
	}
	et := binary.BigEndian.Uint16(frame[12:])
	off, tags := 14, 0
	for et == 0x8100 || et == 0x88a8 {
		if len(frame) < off+4 {
			return either // a truncated tag: the stack drops it
		}
		if binary.BigEndian.Uint16(frame[off:])&0x0fff != 0 {
			return either // no VLAN device here: PACKET_OTHERHOST, dropped
		}
		et = binary.BigEndian.Uint16(frame[off+2:])
		off += 4
		if tags++; tags > 4 {
			return either // the stack would strip priority tags however many; the filter may refuse
		}
	}
	if et != 0x86dd {
		return mustPass // IPv4 and the rest: no SRv6 here
	}
	p := frame[off:]
	if len(p) < 40 || p[0]>>4 != 6 {
		return either
	}
	plen := int(binary.BigEndian.Uint16(p[4:]))
	if plen == 0 || 40+plen > len(p) {
		return either // a jumbogram or truncated: ip6_rcv drops it
	}
	p = p[:40+plen]
	dst := netip.AddrFrom16([16]byte(p[24:40]))
	switch {
	case m.sf(dst):
		return mustDrop // an SF takes packets from its proxy only
	case m.sidSpace(dst) && !m.external(dst):
		return mustDrop // RFC 8754 §5.1: nothing from outside to the SID space
	case m.external(dst):
		return m.externalModel(p)
	case m.node(dst):
		return m.nodeModel(p)
	}
	return mustPass // to outside the domain: transit, classified traffic
}

// nodeModel: a packet to a node's own address reaches the kernel's
// extension-header handlers in order (ip6_input): a routing header of type
// 4, well formed or not, goes to ipv6_srh_rcv; a routing header of another
// type is skipped when its Segments Left is 0 (RFC 8200 §4.4), refused
// otherwise; AH stops the walk without IPsec state.
func (m domainModel) nodeModel(p []byte) verdict {
	nh, off := int(p[6]), 40
	doubt := false // a routing header of another type, skipped: the filter may refuse it
	for i := 0; ; i++ {
		if i > maxChain {
			return either
		}
		switch nh {
		case ipHBH, ipDOH, ipRouting:
			if off+2 > len(p) {
				return either
			}
			l := (int(p[off+1]) + 1) * 8
			if off+l > len(p) {
				if nh == ipRouting && off+4 <= len(p) && p[off+2] == 4 {
					return mustDrop // the filter cannot tell it is harmless
				}
				return either
			}
			if nh == ipHBH && i != 0 {
				return either // a hop-by-hop header not first: refused
			}
			if nh == ipRouting {
				if p[off+2] == 4 {
					return mustDrop
				}
				if p[off+3] != 0 {
					return either // refused (or type 2's home address check)
				}
				doubt = true
			}
			nh, off = int(p[off]), off+l
		case ipFrag:
			if off+8 > len(p) {
				return either
			}
			if binary.BigEndian.Uint16(p[off+2:])&^7 != 0 {
				return either // a later fragment: what follows is known after reassembly only
			}
			// the first fragment: an SRH behind it is processed after
			// reassembly; without one, dropping is still a fair doubt
			q := append(append([]byte{}, p[:40]...), p[off+8:]...)
			q[6] = p[off] // the fragment header's next header
			if m.nodeModel(q) == mustDrop {
				return mustDrop
			}
			return either
		case ipAH:
			return either // without a security association, AH input drops it
		default:
			if doubt {
				return either
			}
			return mustPass // ESP, no next header, an upper layer
		}
	}
}

// externalModel: an external SID is only a last hop into the domain: the
// segments it hands the packet to (Segment List[SL-1] .. [0]) and an inner
// IPv6 destination must not lead inside.
func (m domainModel) externalModel(p []byte) verdict {
	nh, off := int(p[6]), 40
	srhs := 0
	for i := 0; ; i++ {
		if i > maxChain {
			return either
		}
		switch nh {
		case ipHBH, ipDOH, ipRouting:
			if off+2 > len(p) {
				return either
			}
			l := (int(p[off+1]) + 1) * 8
			if off+l > len(p) {
				return either
			}
			if nh == ipRouting {
				h := p[off : off+l]
				if !wellFormedSRH(h) {
					return either
				}
				if srhs++; srhs > 1 {
					return either
				}
				for k := int(h[3]) - 1; k >= 0; k-- {
					if m.inside(netip.AddrFrom16([16]byte(h[8+16*k : 8+16*k+16]))) {
						return mustDrop
					}
				}
			}
			nh, off = int(p[off]), off+l
		case ipIPv6:
			if off+40 > len(p) {
				return either
			}
			if m.inside(netip.AddrFrom16([16]byte(p[off+24 : off+40]))) {
				return mustDrop
			}
			return mustPass
		case ipFrag, ipAH:
			return either
		default:
			return mustPass
		}
	}
}

// ------------------------------------------------------------ the generator

// fuzzReader hands out the fuzzer's bytes (zeros when they run out).
type fuzzReader struct {
	b []byte
	i int
}

func (r *fuzzReader) u8() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *fuzzReader) pick(n int) int { return int(r.u8()) % n }

func (r *fuzzReader) addr() netip.Addr {
	var a [16]byte
	switch r.pick(8) {
	case 0, 1: // a SID
		a = netip.MustParseAddr("fc00:1::a:0").As16()
		a[15] = r.u8()
	case 2:
		a = netip.MustParseAddr("fc00:2::f1:0").As16()
		a[14], a[15] = r.u8(), r.u8()
	case 3: // external
		a = netip.MustParseAddr("fc00:2::e:0").As16()
		a[15] = r.u8()
	case 4:
		a = fuzzDomain.Nodes[r.pick(len(fuzzDomain.Nodes))].As16()
	case 5: // a host outside, or (one time in four) an SF
		a = netip.MustParseAddr("fc00:4d::d").As16()
		if r.pick(4) == 0 {
			a = fuzzDomain.SFs[0].As16()
		}
	default: // anywhere in 2001:db8::/32 (never local to the test's namespace)
		a = netip.MustParseAddr("2001:db8::").As16()
		for i := 4; i < 16; i++ {
			a[i] = r.u8()
		}
	}
	return netip.AddrFrom16(a)
}

func pad8(b []byte) []byte { return append(b, make([]byte, (8-len(b)%8)%8)...) }

// extHeader builds one extension header (next header nh) and returns its
// own protocol number.
func (r *fuzzReader) extHeader(nh byte) (byte, []byte) {
	switch r.pick(7) {
	case 0, 1, 2: // routing header, type 4 mostly, its fields inconsistent at will
		typ := []byte{4, 4, 4, 0, 2, 3, 253, r.u8()}[r.pick(8)]
		n := 1 + r.pick(4)
		var segs []byte
		for i := 0; i < n; i++ {
			a := r.addr().As16()
			segs = append(segs, a[:]...)
		}
		le, sl, flags := byte(n-1), byte(r.pick(n+2)), byte(0)
		if r.pick(4) == 0 {
			le = r.u8() % 9
		}
		var tlv []byte
		switch r.pick(4) {
		case 0: // HMAC TLV, one-byte length (RFC 8754 §2.1.2)
			flags = 0x08
			tlv = append([]byte{5, 38, 0, 0, 0, 0, 0x03, 0xe9}, make([]byte, 32)...)
		case 1:
			tlv = []byte{4, r.u8() % 6}
			tlv = append(tlv, make([]byte, int(tlv[1]))...)
		}
		h := pad8(append(append([]byte{nh, 0, typ, sl, le, flags, 0, 0}, segs...), tlv...))
		h[1] = byte(len(h)/8 - 1)
		if r.pick(6) == 0 {
			h[1] = r.u8()
		}
		return ipRouting, h
	case 3, 4: // hop-by-hop or destination options: PadN
		k := byte(ipDOH)
		if r.pick(2) == 0 {
			k = ipHBH
		}
		n := r.pick(3)
		h := []byte{nh, byte(n)}
		h = append(h, 1, byte(n*8+4))
		h = append(h, make([]byte, n*8+4)...)
		return k, h
	case 5: // fragment: first, atomic or later
		fo := []uint16{1, 0, uint16(r.u8())<<3 | 1}[r.pick(3)]
		return ipFrag, []byte{nh, 0, byte(fo >> 8), byte(fo), 0, 0, 0, 1}
	default: // AH, 12-byte ICV
		return ipAH, append([]byte{nh, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, make([]byte, 12)...)
	}
}

// frame builds an Ethernet frame from the fuzzer's bytes: 0-5 VLAN tags,
// IPv6 to a SID, a node, an external SID or outside, an extension-header
// chain of 0-5 headers, UDP or IPv6-in-IPv6, a payload length that may
// lie.
func fuzzFrame(data []byte) []byte {
	r := &fuzzReader{b: data}
	var inner []byte
	var nh byte
	if r.pick(3) == 0 {
		nh, inner = ipIPv6, testutil.IPv6(netip.MustParseAddr("fc00:1a::a"), r.addr(), 17, 64, udp())
	} else {
		nh, inner = 17, udp()
	}
	dst := r.addr()
	var chain []byte
	for i, n := 0, r.pick(6); i < n; i++ {
		k, h := r.extHeader(nh)
		nh, chain = k, append(h, chain...)
	}
	l3 := testutil.IPv6(netip.MustParseAddr("fc00:1a::a"), dst, nh, 64, append(chain, inner...))
	if r.pick(10) == 0 {
		binary.BigEndian.PutUint16(l3[4:], uint16(r.u8())<<2)
	}
	frame := testutil.Eth(mac1, mac2, 0x86dd, l3)
	if r.pick(3) == 0 {
		var tags []byte
		et := uint16(0x86dd)
		for i, n := 0, 1+r.pick(5); i < n; i++ {
			tpid := []uint16{0x8100, 0x88a8}[r.pick(2)]
			vid := []uint16{0, 0, 0, 1, 100, 4095}[r.pick(6)]
			tags = append(binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, vid), et), tags...)
			et = tpid
		}
		frame = append(append(append([]byte{}, frame[:12]...), byte(et>>8), byte(et)), append(tags, l3...)...)
	}
	return frame
}

// ------------------------------------------------------------ the target

func loadFuzz(f *testing.F) *node {
	f.Helper()
	testutil.RequireRoot(f)
	spec, err := loadBoundaryTC()
	if err != nil {
		f.Fatal(err)
	}
	n := &node{}
	if err := spec.LoadAndAssign(&n.objs, nil); err != nil {
		f.Fatalf("load boundary program: %v", err)
	}
	f.Cleanup(n.close)
	if err := n.sync(fuzzDomain); err != nil {
		f.Fatal(err)
	}
	return n
}

func (n *node) totalDrops(t *testing.T) uint64 {
	var s uint64
	for _, v := range n.drops(t) {
		s += v
	}
	return s
}

func FuzzBoundaryModel(f *testing.F) {
	n := loadFuzz(f)
	m := domainModel{fuzzDomain}
	for _, seed := range [][]byte{
		{},
		{1, 4, 0, 0, 4, 0, 0, 1, 1, 0, 0, 1}, // SRH to a node
		{1, 0, 1, 0, 0, 5, 2, 3, 0, 0, 0, 2}, // to a SID
		{0, 6, 0, 3, 1, 0, 2, 0, 1, 1, 1, 0}, // external
		{1, 4, 2, 5, 0, 0, 7, 7, 2, 2, 2, 0}, // fragment chain to a node
		{1, 4, 1, 0, 3, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3},
		{1, 5, 0},                            // plain UDP to an SF
		{1, 5, 0, 1, 0, 5, 0, 0, 0, 0, 1, 0}, // SRH to an SF
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		frame := fuzzFrame(data)
		want := m.kernelModel(frame)
		before := n.totalDrops(t)
		got, err := n.objs.BoundaryIn.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		counted := n.totalDrops(t) - before
		xdp, err := n.objs.BoundaryXdp.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		dropped := got == actShot
		switch {
		case got != actShot && got != actUnspec:
			t.Fatalf("verdict %#x, neither pass nor drop\nframe %x", got, frame)
		case want == mustDrop && !dropped:
			t.Fatalf("BYPASS: the model says the kernel would process this as SRv6 inside the domain; the filter passed it\nframe %x", frame)
		case want == mustPass && dropped:
			t.Fatalf("the filter dropped ordinary traffic the model passes\nframe %x", frame)
		case dropped && counted != 1, !dropped && counted != 0:
			t.Fatalf("verdict drop=%v but %d drops counted\nframe %x", dropped, counted, frame)
		case (xdp == xdpDrop) != dropped:
			t.Fatalf("XDP verdict %d, TCX %#x\nframe %x", xdp, got, frame)
		}
	})
}

// TestFuzzModel checks the reference model itself (no root): issue 24's
// packets are must-drop, ordinary traffic must-pass, and the generator
// reaches all three verdicts often enough for the fuzzing to mean
// something.
func TestFuzzModel(t *testing.T) {
	m := domainModel{fuzzDomain}
	src, out := netip.MustParseAddr("fc00:1a::a"), netip.MustParseAddr("fc00:4d::d")
	node, sid, ext := fuzzDomain.Nodes[0], netip.MustParseAddr("fc00:1::a:0"), netip.MustParseAddr("fc00:2::e:1")
	sf := fuzzDomain.SFs[0]
	in6 := testutil.IPv6(src, out, 17, 64, udp())
	srh := func(list []netip.Addr, sl, le uint8) []byte {
		h := testutil.SRH(ipIPv6, list, sl, 0, nil, in6)
		h[4] = le
		return h
	}
	qinq := func(l3 []byte) []byte {
		return append(append(append([]byte{}, mac1...), mac2...), append([]byte{0x88, 0xa8, 0, 0, 0x81, 0, 0, 0, 0x86, 0xdd}, l3...)...)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		want  verdict
	}{
		{"#1 SL > Last Entry to a node", eth6(testutil.IPv6(src, node, ipRouting, 64, srh([]netip.Addr{sid, netip.IPv6Unspecified()}, 1, 0))), mustDrop},
		{"#1 Last Entry beyond the header to a node", eth6(testutil.IPv6(src, node, ipRouting, 64, srh([]netip.Addr{sid, netip.IPv6Unspecified()}, 1, 7))), mustDrop},
		{"#2 QinQ VID 0 around SRv6 to a SID", qinq(testutil.IPv6(src, sid, ipRouting, 64, srh([]netip.Addr{sid}, 0, 0))), mustDrop},
		{"#3 external SID, next segment a SID", eth6(testutil.IPv6(src, ext, ipRouting, 64, srh([]netip.Addr{sid, ext}, 1, 1))), mustDrop},
		{"external SID, next segment outside", eth6(testutil.IPv6(src, ext, ipRouting, 64, srh([]netip.Addr{out, ext}, 1, 1))), mustPass},
		{"plain to a node", eth6(testutil.IPv6(src, node, 17, 64, udp())), mustPass},
		{"SRH to an SF, continuing outside (found-sf-address-door)", eth6(testutil.IPv6(src, sf, ipRouting, 64, srh([]netip.Addr{out, sf}, 1, 1))), mustDrop},
		{"SRH to an SF, continuing to a SID (found-sf-address-door-to-sid)", eth6(testutil.IPv6(src, sf, ipRouting, 64, srh([]netip.Addr{sid, sf}, 1, 1))), mustDrop},
		{"plain to an SF (found-sf-address-plain)", eth6(testutil.IPv6(src, sf, 17, 64, udp())), mustDrop},
		{"external SID, next segment an SF", eth6(testutil.IPv6(src, ext, ipRouting, 64, srh([]netip.Addr{sf, ext}, 1, 1))), mustDrop},
		{"to outside with an SRH", eth6(testutil.IPv6(src, out, ipRouting, 64, srh([]netip.Addr{sid, out}, 1, 1))), mustPass},
		{"VID 100 around SRv6 to a SID (no VLAN device: dropped by the stack)",
			append(append(append([]byte{}, mac1...), mac2...), append([]byte{0x81, 0, 0, 100, 0x86, 0xdd}, testutil.IPv6(src, sid, 17, 64, udp())...)...), either},
	} {
		if got := m.kernelModel(tc.frame); got != tc.want {
			t.Errorf("%s: model says %v, want %v", tc.name, got, tc.want)
		}
	}
	counts := map[verdict]int{}
	rnd := uint64(1)
	for i := 0; i < 20000; i++ {
		b := make([]byte, 64)
		for j := range b {
			rnd = rnd*6364136223846793005 + 1442695040888963407
			b[j] = byte(rnd >> 56)
		}
		counts[m.kernelModel(fuzzFrame(b))]++
	}
	for _, v := range []verdict{mustDrop, mustPass, either} {
		if counts[v] < 20000/10 {
			t.Errorf("the generator reaches %q in %d of 20000 frames (%v): too few to fuzz", v, counts[v], counts)
		}
	}
	t.Logf("verdicts of 20000 generated frames: %v", counts)
}
