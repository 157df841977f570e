package firewall

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/fwrule"
)

// TestCompileDifferential: the compiled tables, looked up as the eBPF
// program does, give fwrule.Classify's answer on random rule sets and
// packets.
func TestCompileDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	sid := netip.MustParsePrefix("fc00:2::f1:0/112")
	for set := range 300 {
		n := 1 + r.IntN(40)
		if set%50 == 0 {
			n = 200 + r.IntN(300)
		}
		rules := randRules(r, n)
		c, err := compile(Instance{SID: sid, Rules: rules, Policy: fwrule.Accept})
		if err != nil {
			t.Fatalf("compile: %v\n%s", err, describe(rules))
		}
		for range 50 {
			p := randPacket(r)
			wi, wok := fwrule.Classify(rules, p)
			gi, gok := c.classify(p)
			if wi != gi || wok != gok {
				t.Fatalf("set %d packet %+v: compiled says %d %v, reference %d %v\nrules:\n%s", set, p, gi, gok, wi, wok, describe(rules))
			}
		}
	}
}

func TestCompileLimits(t *testing.T) {
	sid := netip.MustParsePrefix("fc00:2::f1:0/112")
	rule := fwrule.Rule{Family: fwrule.IPv6, Target: fwrule.Target{Kind: fwrule.Drop}}
	tests := []struct {
		name string
		in   Instance
	}{
		{"too many rules", Instance{SID: sid, Rules: make([]fwrule.Rule, MaxRules+1)}},
		{"args wider than the host part", Instance{SID: netip.MustParsePrefix("fc00:2::f1:0/120"), ArgsBits: 16}},
		{"args over 32 bits", Instance{SID: netip.MustParsePrefix("fc00:2::/64"), ArgsBits: 33}},
		{"bad policy", Instance{SID: sid, Policy: fwrule.SkipNext}},
		{"ARGS value too wide", Instance{SID: sid, ArgsBits: 2, Args: map[uint32]fwrule.TargetKind{4: fwrule.Drop}}},
		{"eval-args as an ARGS action", Instance{SID: sid, ArgsBits: 2, Args: map[uint32]fwrule.TargetKind{1: fwrule.EvalArgs}}},
		{"tcp-reset", Instance{SID: sid, Rules: []fwrule.Rule{{Family: fwrule.IPv6, Target: fwrule.Target{Kind: fwrule.Reject, RejectWith: "tcp-reset"}}}}},
		{"IPv4 SID", Instance{SID: netip.MustParsePrefix("10.0.0.0/8"), Rules: []fwrule.Rule{rule}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := compile(tc.in); err == nil {
				t.Fatal("compiled, want an error")
			}
		})
	}
}

// TestCompileRuleCountIndependent: 4096 single-port rules need one bitmap
// per port plus one for the gaps, and a handful of LPM entries per port.
func TestCompileRuleCountIndependent(t *testing.T) {
	sid := netip.MustParsePrefix("fc00:2::f1:0/112")
	var rules []fwrule.Rule
	for i := range MaxRules {
		rules = append(rules, fwrule.Rule{Family: fwrule.IPv6, Proto: &fwrule.Value8{Value: 17},
			DPort: &fwrule.PortRange{Lo: uint16(10000 + i), Hi: uint16(10000 + i)}, Target: fwrule.Target{Kind: fwrule.Drop}})
	}
	c, err := compile(Instance{SID: sid, Rules: rules, Policy: fwrule.Accept})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.bitmaps) > MaxRules+4 {
		t.Errorf("%d bitmaps for %d rules", len(c.bitmaps), MaxRules)
	}
	if len(c.lpm) > 40*MaxRules {
		t.Errorf("%d LPM entries", len(c.lpm))
	}
	p := fwrule.Packet{Family: fwrule.IPv6, Proto: 17, HasPorts: true, DPort: 10000 + 4000}
	if i, ok := c.classify(p); !ok || i != 4000 {
		t.Errorf("dport 14000: rule %d %v, want 4000", i, ok)
	}
	p.DPort = 9
	if _, ok := c.classify(p); ok {
		t.Errorf("dport 9 matched")
	}
	t.Logf("%d rules: %d bitmaps, %d LPM entries", MaxRules, len(c.bitmaps), len(c.lpm))
}
