package srv6svc

import (
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/testutil"
)

// uSID binding fcbb:bb00:2d0::/48 (F3216): the frames the steering
// program and the library's parser must agree on.
var (
	usidBound = netip.MustParsePrefix("fcbb:bb00:2d0::/48")
	usidNext  = netip.MustParseAddr("fcbb:bb00:900::") // the next container
)

type usidCase struct {
	name    string
	frame   []byte
	verdict string // "steer", "malformed" or "padding"
}

func usidCases() []usidCase {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	src := netip.MustParseAddr("fc00:a::1")
	noSRH := func(da string) []byte {
		return testutil.Eth(mac, mac, 0x86dd, testutil.IPv6(src, netip.MustParseAddr(da), protoIPv6, 64, innerUDP()))
	}
	withSRH := func(da string, sl uint8) []byte {
		d := netip.MustParseAddr(da)
		srh := testutil.SRH(protoIPv6, []netip.Addr{usidNext, d}, sl, 0, nil, innerUDP())
		return testutil.Eth(mac, mac, 0x86dd, testutil.IPv6(src, d, protoRouting, 64, srh))
	}
	return []usidCase{
		{"uSIDs follow, no SRH", noSRH("fcbb:bb00:2d0:3c7:4b6::"), "steer"},
		{"uSIDs follow, SRH SL 1", withSRH("fcbb:bb00:2d0:3c7::", 1), "steer"},
		{"uSIDs follow, SRH SL 0 (the last segment)", withSRH("fcbb:bb00:2d0:3c7::", 0), "steer"},
		{"six uSIDs, no SRH", noSRH("fcbb:bb00:2d0:1:2:3:4:5"), "steer"},
		{"consumed, SRH SL 1", withSRH("fcbb:bb00:2d0::", 1), "steer"},
		{"consumed, SRH SL 0", withSRH("fcbb:bb00:2d0::", 0), "malformed"},
		{"consumed, no SRH", noSRH("fcbb:bb00:2d0::"), "malformed"},
		{"invalid padding, no SRH", noSRH("fcbb:bb00:2d0:0:4b6::"), "padding"},
		{"invalid padding at the end, SRH SL 1", withSRH("fcbb:bb00:2d0:3c7:0:0:0:1", 1), "padding"},
	}
}

// The parser (F3216) refuses exactly what the program drops.
func TestParseUSIDAgreesWithSteering(t *testing.T) {
	for _, c := range usidCases() {
		t.Run(c.name, func(t *testing.T) {
			var p Packet
			err := p.parse(append([]byte(nil), c.frame...), F3216)
			if (err != nil) != (c.verdict != "steer") {
				t.Errorf("parse: %v, want %s", err, c.verdict)
			}
		})
	}
}

// TestXDPSteersUSID runs srv6svc_xdp (BPF_PROG_TEST_RUN) on frames to a
// uSID bound as F3216 with on-failure bypass and no socket (a steered
// frame passes, counted nosock_bypass): a container with uSIDs after the
// bound one is steered with or without an SRH, a consumed one needs an
// SRH with a next segment, invalid padding is dropped and counted
// csid_padding. Bound as a full-SID prefix instead, the container without
// SRH is malformed (what the binding did before uSIDs were wired).
func TestXDPSteersUSID(t *testing.T) {
	objs := loadSteerObjs(t)
	const slot = 5
	bind := func(t *testing.T, f CSIDFormat) {
		key := sidKey(usidBound)
		v := steerXDPSvcVal{Slot: slot, Flags: flagBypass, MaxLen: 9000}
		if f.ok() {
			v.CsidLb, v.CsidNf = uint8(f.LBLen/8), uint8(f.NFLen/8)
		}
		if err := objs.SvcSids.Put(&key, &v); err != nil {
			t.Fatal(err)
		}
	}
	stats := func(t *testing.T) steerXDPSvcStats {
		var per []steerXDPSvcStats
		if err := objs.SvcCounters.Lookup(uint32(slot), &per); err != nil {
			t.Fatal(err)
		}
		var s steerXDPSvcStats
		for _, p := range per {
			s.Malformed += p.Malformed
			s.NosockBypass += p.NosockBypass
			s.CsidPadding += p.CsidPadding
		}
		return s
	}
	const xdpDrop, xdpPass = 1, 2
	run := func(t *testing.T, frame []byte) (uint32, steerXDPSvcStats) {
		before := stats(t)
		ret, err := objs.Srv6svcXdp.Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		after := stats(t)
		return ret, steerXDPSvcStats{Malformed: after.Malformed - before.Malformed,
			NosockBypass: after.NosockBypass - before.NosockBypass, CsidPadding: after.CsidPadding - before.CsidPadding}
	}
	bind(t, F3216)
	for _, c := range usidCases() {
		t.Run(c.name, func(t *testing.T) {
			ret, d := run(t, c.frame)
			want := map[string]steerXDPSvcStats{"steer": {NosockBypass: 1}, "malformed": {Malformed: 1}, "padding": {CsidPadding: 1}}[c.verdict]
			wantRet := uint32(xdpDrop)
			if c.verdict == "steer" {
				wantRet = xdpPass
			}
			if ret != wantRet || d != want {
				t.Errorf("action %d, counted %+v; want %d, %+v (%s)", ret, d, wantRet, want, c.verdict)
			}
		})
	}
	t.Run("bound as full SIDs", func(t *testing.T) {
		bind(t, CSIDFormat{})
		if ret, d := run(t, usidCases()[0].frame); ret != xdpDrop || d.Malformed != 1 {
			t.Errorf("a container without SRH to a full-SID binding: action %d, %+v; want drop, malformed", ret, d)
		}
	})
}
