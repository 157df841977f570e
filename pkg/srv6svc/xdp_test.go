package srv6svc

import (
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/testutil"
)

// optsHdr is a hop-by-hop or destination options header of 8 bytes (a
// PadN option), next header nh.
func optsHdr(nh uint8) []byte { return []byte{nh, 0, 1, 4, 0, 0, 0, 0} }

// steerCase is a frame to the bound SID s1 and whether it is malformed:
// no valid SRH with SL > 0 within the extension-header walk's bound.
type steerCase struct {
	name      string
	frame     []byte
	malformed bool
}

// steerCases: what the steering program and the library's parser agree
// on. exts is the headers between the IPv6 header and the SRH.
func steerCases(t testing.TB) []steerCase {
	segs := []netip.Addr{a2, a1, s1}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	build := func(first uint8, exts []byte, srh []byte) []byte {
		ip := testutil.IPv6(netip.MustParseAddr("fc00:a::1"), s1, first, 64, append(append([]byte(nil), exts...), srh...))
		return testutil.Eth(mac, mac, 0x86dd, ip)
	}
	srh := func() []byte { return testutil.SRH(protoIPv6, segs, 2, 0, nil, innerUDP()) }
	opts := func(n int) (uint8, []byte) { // n options headers, then the SRH
		var b []byte
		for i := 0; i < n; i++ {
			nh := uint8(protoDstOpts)
			if i == n-1 {
				nh = protoRouting
			}
			b = append(b, optsHdr(nh)...)
		}
		if n == 0 {
			return protoRouting, nil
		}
		return protoDstOpts, b
	}
	mut := func(f func([]byte)) []byte { b := srh(); f(b); return b }
	withExts := func(n int) []byte { first, e := opts(n); return build(first, e, srh()) }
	plain := withExts(0)
	hbhDst := build(protoHopOpts, append(optsHdr(protoDstOpts), optsHdr(protoRouting)...), srh())
	twoSRH := build(protoRouting, nil, testutil.SRH(protoRouting, segs, 2, 0, nil, testutil.SRH(protoIPv6, segs, 1, 0, nil, innerUDP())))
	dstAfter := build(protoRouting, nil, append(testutil.SRH(protoDstOpts, segs, 2, 0, nil, nil), 17))
	frag := build(44, []byte{protoRouting, 0, 0, 0, 0, 0, 0, 1}, srh())
	return []steerCase{
		{"srh", plain, false},
		{"hop-by-hop, srh", build(protoHopOpts, optsHdr(protoRouting), srh()), false},
		{"hop-by-hop, dst opts, srh", hbhDst, false},
		{"3 dst opts, srh", withExts(3), false},
		{"7 dst opts, srh (the walk's bound: IPV6_EXT_MAX headers)", withExts(7), false},
		{"8 dst opts, srh", withExts(8), true},
		{"two srhs (the first counts)", twoSRH, false},
		{"srh, then a cut dst opts header (not looked at)", dstAfter, false},
		{"sl 0", build(protoRouting, nil, mut(func(b []byte) { b[3] = 0 })), true},
		{"sl > last entry", build(protoRouting, nil, mut(func(b []byte) { b[3] = 3 })), true},
		{"routing type 3", build(protoRouting, nil, mut(func(b []byte) { b[2] = 3 })), true},
		{"hdr len short of the segments", build(protoRouting, nil, mut(func(b []byte) { b[1] = 4 })), true},
		{"srh past the frame", plain[:ethLen+ipv6Len+srhFixedLen+20], true},
		{"srh fixed part past the frame", plain[:ethLen+ipv6Len+6], true},
		{"options header past the frame", hbhDst[:ethLen+ipv6Len+1], true},
		{"no srh", build(protoUDP, nil, innerUDP()), true},
		{"fragment before the srh", frag, true},
	}
}

// The library's parser rejects exactly the frames the steering program
// counts as malformed (TestXDPSteersWellFormed runs the program).
func TestParseAgreesWithSteering(t *testing.T) {
	for _, c := range steerCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var p Packet
			err := p.parse(append([]byte(nil), c.frame...), CSIDFormat{})
			if (err != nil) != c.malformed {
				t.Errorf("parse: %v, want malformed %v", err, c.malformed)
			}
		})
	}
}

// TestXDPSteersWellFormed runs srv6svc_xdp (BPF_PROG_TEST_RUN) on frames
// to a SID bound with on-failure bypass and no socket: a well-formed one
// passes to the kernel, counted nosock_bypass; a malformed one is dropped,
// counted malformed; a frame to another address passes uncounted.
func TestXDPSteersWellFormed(t *testing.T) {
	objs := loadSteerObjs(t)
	key := steerXDPSvcKey{Prefixlen: 128, Addr: s1.As16()}
	if err := objs.SvcSids.Put(&key, &steerXDPSvcVal{Slot: 3, Flags: 1, MaxLen: 9000}); err != nil {
		t.Fatal(err)
	}
	stats := func(t *testing.T) steerXDPSvcStats {
		var per []steerXDPSvcStats
		if err := objs.SvcCounters.Lookup(uint32(3), &per); err != nil {
			t.Fatal(err)
		}
		var s steerXDPSvcStats
		for _, p := range per {
			s.Malformed += p.Malformed
			s.NosockBypass += p.NosockBypass
			s.Steered += p.Steered
		}
		return s
	}
	run := func(t *testing.T, frame []byte) uint32 {
		ret, err := objs.Srv6svcXdp.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		return ret
	}
	const xdpDrop, xdpPass = 1, 2
	for _, c := range steerCases(t) {
		t.Run(c.name, func(t *testing.T) {
			before := stats(t)
			ret := run(t, c.frame)
			after := stats(t)
			malformed, bypass := after.Malformed-before.Malformed, after.NosockBypass-before.NosockBypass
			switch {
			case c.malformed && (ret != xdpDrop || malformed != 1 || bypass != 0):
				t.Errorf("malformed frame: action %d, malformed +%d, nosock_bypass +%d; want drop (1), +1, +0", ret, malformed, bypass)
			case !c.malformed && (ret != xdpPass || malformed != 0 || bypass != 1):
				t.Errorf("well-formed frame: action %d, malformed +%d, nosock_bypass +%d; want pass (2), +0, +1", ret, malformed, bypass)
			}
		})
	}
	t.Run("another destination", func(t *testing.T) {
		f := append([]byte(nil), steerCases(t)[0].frame...)
		f[ethLen+ipv6Len-1] ^= 0xff // last byte of the destination
		before := stats(t)
		if ret := run(t, f); ret != xdpPass || stats(t) != before {
			t.Errorf("frame to an unbound address: action %d, counters %+v → %+v; want pass, unchanged", ret, before, stats(t))
		}
	})
}

// loadSteerObjs loads srv6svc_xdp's objects unpinned for one test (as
// root), closed when it ends.
func loadSteerObjs(t *testing.T) *steerXDPObjects {
	t.Helper()
	testutil.RequireRoot(t)
	spec, err := loadSteerXDP()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone
	}
	var objs steerXDPObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { objs.Close() })
	return &objs
}
