package srv6svc

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/testutil"
)

// usidFormats are the bindings the steering program and the library's
// parser must agree on: uSID 02d0 bound in F3216's fcbb:bb00::/32 (a /48)
// and in F4816's 2001:db8:aa::/48 (a /64, five uSIDs a container).
var usidFormats = []struct {
	name  string
	f     CSIDFormat
	block netip.Addr
}{
	{"f3216", F3216, netip.MustParseAddr("fcbb:bb00::")},
	{"f4816", F4816, netip.MustParseAddr("2001:db8:aa::")},
}

// container writes uSIDs (16 bits each) after the block's lb bits.
func container(block netip.Addr, lb int, usids ...uint16) netip.Addr {
	b := block.As16()
	for i, v := range usids {
		b[lb/8+2*i], b[lb/8+2*i+1] = byte(v>>8), byte(v)
	}
	return netip.AddrFrom16(b)
}

type usidCase struct {
	name    string
	frame   []byte
	verdict string // "steer", "malformed" or "padding"
}

// usidCases are frames to uSID 02d0 of format f in block: the bound
// prefix is block:02d0::/(LB+16).
func usidCases(f CSIDFormat, block netip.Addr) (netip.Prefix, []usidCase) {
	c := func(u ...uint16) netip.Addr { return container(block, f.LBLen, u...) }
	bound := netip.PrefixFrom(c(0x2d0), f.LBLen+f.NFLen)
	next := c(0x900) // the next container
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	src := netip.MustParseAddr("fc00:a::1")
	noSRH := func(d netip.Addr) []byte {
		return testutil.Eth(mac, mac, 0x86dd, testutil.IPv6(src, d, protoIPv6, 64, innerUDP()))
	}
	withSRH := func(d netip.Addr, sl uint8) []byte {
		srh := testutil.SRH(protoIPv6, []netip.Addr{next, d}, sl, 0, nil, innerUDP())
		return testutil.Eth(mac, mac, 0x86dd, testutil.IPv6(src, d, protoRouting, 64, srh))
	}
	full := []uint16{0x2d0}
	for i := 1; i < (128-f.LBLen)/f.NFLen; i++ {
		full = append(full, uint16(i))
	}
	// The last 16 bits of the address: the last uSID of the container.
	lastSet := c(0x2d0, 0x3c7)
	lb := lastSet.As16()
	lb[15] = 1
	return bound, []usidCase{
		{"uSIDs follow, no SRH", noSRH(c(0x2d0, 0x3c7, 0x4b6)), "steer"},
		{"uSIDs follow, SRH SL 1", withSRH(c(0x2d0, 0x3c7), 1), "steer"},
		{"uSIDs follow, SRH SL 0 (the last segment)", withSRH(c(0x2d0, 0x3c7), 0), "steer"},
		{"a full container, no SRH", noSRH(c(full...)), "steer"},
		{"consumed, SRH SL 1", withSRH(c(0x2d0), 1), "steer"},
		{"consumed, SRH SL 0", withSRH(c(0x2d0), 0), "malformed"},
		{"consumed, no SRH", noSRH(c(0x2d0)), "malformed"},
		{"invalid padding, no SRH", noSRH(c(0x2d0, 0, 0x4b6)), "padding"},
		{"invalid padding at the end, SRH SL 1", withSRH(netip.AddrFrom16(lb), 1), "padding"},
	}
}

// The parser refuses exactly what the program drops (F3216 and F4816).
func TestParseUSIDAgreesWithSteering(t *testing.T) {
	for _, uf := range usidFormats {
		_, cases := usidCases(uf.f, uf.block)
		for _, c := range cases {
			t.Run(uf.name+"/"+c.name, func(t *testing.T) {
				var p Packet
				err := p.parse(append([]byte(nil), c.frame...), uf.f)
				if (err != nil) != (c.verdict != "steer") {
					t.Errorf("parse: %v, want %s", err, c.verdict)
				}
			})
		}
	}
}

// TestXDPSteersUSID runs srv6svc_xdp (BPF_PROG_TEST_RUN) on frames to a
// uSID bound as F3216 and as F4816 with on-failure bypass and no socket (a steered
// frame passes, counted nosock_bypass): a container with uSIDs after the
// bound one is steered with or without an SRH, a consumed one needs an
// SRH with a next segment, invalid padding is dropped and counted
// csid_padding. Bound as a full-SID prefix instead, the container without
// SRH is malformed (what the binding did before uSIDs were wired).
func TestXDPSteersUSID(t *testing.T) {
	objs := loadSteerObjs(t)
	const slot = 5
	bind := func(t *testing.T, bound netip.Prefix, f CSIDFormat) {
		if err := objs.SvcSids.Delete(sidKey(bound)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Fatal(err)
		}
		key := sidKey(bound)
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
	for _, uf := range usidFormats {
		bound, cases := usidCases(uf.f, uf.block)
		bind(t, bound, uf.f)
		for _, c := range cases {
			t.Run(uf.name+"/"+c.name, func(t *testing.T) {
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
		if err := objs.SvcSids.Delete(sidKey(bound)); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("bound as full SIDs", func(t *testing.T) {
		bound, cases := usidCases(F3216, usidFormats[0].block)
		bind(t, bound, CSIDFormat{})
		if ret, d := run(t, cases[0].frame); ret != xdpDrop || d.Malformed != 1 {
			t.Errorf("a container without SRH to a full-SID binding: action %d, %+v; want drop, malformed", ret, d)
		}
	})
}
