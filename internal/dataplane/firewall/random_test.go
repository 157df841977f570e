package firewall

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/segchain/segchain/internal/fwrule"
)

// Small value pools so that random rules and random packets meet often.

var (
	pool6 = []string{"2001:db8::1", "2001:db8::2", "2001:db8:1::1", "fc00:1::1", "fc00:2::f1:1", "fc00:3::1", "fc00:4::d6", "::ffff:10.0.0.1"}
	pfx6  = []string{"2001:db8::/32", "2001:db8::/64", "2001:db8::1/128", "fc00::/16", "fc00:2::/32", "fc00:3::1/128", "::/0", "::ffff:0:0/96"}
	pool4 = []string{"10.0.0.1", "10.0.0.2", "10.1.0.1", "192.0.2.7"}
	pfx4  = []string{"10.0.0.0/8", "10.0.0.0/24", "10.0.0.1/32", "192.0.2.0/24", "0.0.0.0/0"}
	ports = []uint16{0, 22, 53, 80, 443, 1000, 1024, 65535}
)

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func randPrefix(r *rand.Rand, v4 bool) *fwrule.Prefix {
	s := pick(r, pfx6)
	if v4 {
		s = pick(r, pfx4)
	}
	return &fwrule.Prefix{Prefix: netip.MustParsePrefix(s), Neg: r.IntN(4) == 0}
}

func maybe(r *rand.Rand, p int) bool { return r.IntN(100) < p }

func randCmp(r *rand.Rand) *fwrule.Compare8 {
	return &fwrule.Compare8{Op: fwrule.Cmp(r.IntN(3)), Value: uint8(r.IntN(6)), Neg: maybe(r, 20)}
}

// randRule returns a random rule; the families and options are those the
// parser can produce.
func randRule(r *rand.Rand) fwrule.Rule {
	var x fwrule.Rule
	x.Family = fwrule.IPv6
	if maybe(r, 30) {
		x.Family = fwrule.IPv4
	}
	v4 := x.Family == fwrule.IPv4
	x.SRH = maybe(r, 40)
	if x.SRH {
		x.Family = fwrule.IPv6
		v4 = false
		if maybe(r, 30) {
			x.Src = randPrefix(r, false)
		}
		if maybe(r, 30) {
			x.Dst = randPrefix(r, false)
		}
		if maybe(r, 25) {
			x.InnerSrc = randPrefix(r, maybe(r, 30))
		}
		if maybe(r, 25) {
			x.InnerDst = randPrefix(r, maybe(r, 30))
		}
		if maybe(r, 20) {
			x.NextHdr = &fwrule.Value8{Value: pick(r, []uint8{41, 4, 17, 6, 59}), Neg: maybe(r, 20)}
		}
		if maybe(r, 20) {
			x.HdrLen = randCmp(r)
		}
		if maybe(r, 25) {
			x.SegsLeft = randCmp(r)
		}
		if maybe(r, 20) {
			x.LastEntry = randCmp(r)
		}
		if maybe(r, 15) {
			x.Tag = &fwrule.Tag{Value: uint16(r.IntN(3)), Neg: maybe(r, 20)}
		}
		if maybe(r, 20) {
			x.PSID = randPrefix(r, false)
		}
		if maybe(r, 20) {
			x.NSID = randPrefix(r, false)
		}
		if maybe(r, 20) {
			x.LSID = randPrefix(r, false)
		}
	} else {
		if maybe(r, 40) {
			x.Src = randPrefix(r, v4)
		}
		if maybe(r, 40) {
			x.Dst = randPrefix(r, v4)
		}
	}
	switch r.IntN(5) {
	case 0, 1:
		x.Proto = &fwrule.Value8{Value: pick(r, []uint8{6, 17}), Neg: maybe(r, 10)}
		if !x.Proto.Neg {
			if maybe(r, 50) {
				lo := pick(r, ports)
				hi := lo
				if maybe(r, 30) {
					hi = max(lo, pick(r, ports))
				}
				x.DPort = &fwrule.PortRange{Lo: lo, Hi: hi, Neg: maybe(r, 20)}
			}
			if maybe(r, 30) {
				x.SPort = &fwrule.PortRange{Lo: pick(r, ports), Hi: 65535, Neg: maybe(r, 20)}
			}
		}
	case 2:
		p := uint8(58)
		if v4 {
			p = 1
		}
		x.Proto = &fwrule.Value8{Value: p}
		if maybe(r, 70) {
			x.ICMP = &fwrule.ICMP{Type: pick(r, []uint8{0, 3, 8, 128, 129, 1}), Code: uint8(r.IntN(2)), AnyCode: maybe(r, 50), Neg: maybe(r, 20)}
			if !x.ICMP.AnyCode && maybe(r, 30) { // a code range (--icmp-type 3/0:2)
				x.ICMP.CodeHi = x.ICMP.Code + 1 + uint8(r.IntN(3))
			}
			if v4 && maybe(r, 10) { // --icmp-type any
				x.ICMP = &fwrule.ICMP{Type: 255, AnyCode: true, AnyType: true, Neg: x.ICMP.Neg}
			}
		}
	}
	kinds := []fwrule.TargetKind{fwrule.Accept, fwrule.Drop, fwrule.Reject, fwrule.GoNext}
	if x.SRH || maybe(r, 30) {
		kinds = append(kinds, fwrule.SkipNext, fwrule.GoLast, fwrule.EvalArgs)
	}
	x.Target.Kind = pick(r, kinds)
	return x
}

func randRules(r *rand.Rand, n int) []fwrule.Rule {
	out := make([]fwrule.Rule, n)
	for i := range out {
		out[i] = randRule(r)
	}
	return out
}

// randPacket is a random classifier input (as fwrule.Extract would give).
func randPacket(r *rand.Rand) fwrule.Packet {
	var p fwrule.Packet
	p.Family = fwrule.IPv6
	a6 := func() netip.Addr { return netip.MustParseAddr(pick(r, pool6)) }
	p.OuterSrc, p.OuterDst = a6(), a6()
	p.HasSRH = maybe(r, 70)
	if maybe(r, 30) {
		p.Family = fwrule.IPv4
		p.OrigSrc = netip.MustParseAddr(pick(r, pool4))
		p.OrigDst = netip.MustParseAddr(pick(r, pool4))
	} else {
		p.OrigSrc, p.OrigDst = a6(), a6()
	}
	p.Proto = pick(r, []uint8{6, 17, 58, 1, 59})
	switch {
	case (p.Proto == 6 || p.Proto == 17) && maybe(r, 90):
		p.HasPorts, p.SPort, p.DPort = true, pick(r, ports), pick(r, ports)
	case (p.Proto == 58 && p.Family == fwrule.IPv6) || (p.Proto == 1 && p.Family == fwrule.IPv4):
		p.HasICMP, p.ICMPType, p.ICMPCode = true, pick(r, []uint8{0, 3, 8, 128, 129, 1}), uint8(r.IntN(4))
	}
	if p.HasSRH {
		p.NextHdr = pick(r, []uint8{41, 4, 17, 6, 59})
		p.HdrLen, p.SegsLeft, p.LastEntry = uint8(r.IntN(6)), uint8(r.IntN(5)), uint8(r.IntN(5))
		p.Tag = uint16(r.IntN(3))
		p.LSID = a6()
		if maybe(r, 60) {
			p.PSID = a6()
		}
		if maybe(r, 60) {
			p.NSID = a6()
		}
	}
	return p
}

func describe(rules []fwrule.Rule) string {
	s := ""
	for i, x := range rules {
		s += fmt.Sprintf("  %d: %s\n", i, x.String())
	}
	return s
}
