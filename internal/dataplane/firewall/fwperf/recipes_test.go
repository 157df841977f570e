package fwperf

import (
	"net"
	"testing"

	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/perf"
)

// TestFrameMissesEveryRule: the recipe's packet is an SRv6 packet to the
// firewall SID that none of the N rules matches (so every packet is
// classified against the whole set, then End applies).
func TestFrameMissesEveryRule(t *testing.T) {
	env := &perf.Env{InMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, TxMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	for _, size := range []int{64, 256} {
		f, err := Frame(env, 3, perf.Params{Size: size})
		if err != nil {
			t.Fatal(err)
		}
		p, err := fwrule.Extract(f[14:])
		if err != nil {
			t.Fatal(err)
		}
		if !p.HasSRH || p.SegsLeft != 1 || p.OuterDst != sidAddr(3) || !p.HasPorts || p.DPort < 1024 || p.DPort >= 10000 || p.Family != fwrule.IPv6 {
			t.Errorf("size %d: packet %+v", size, p)
		}
		rules, err := Rules(4096)
		if err != nil {
			t.Fatal(err)
		}
		if i, ok := fwrule.Classify(rules, p); ok {
			t.Errorf("rule %d matches the test packet", i+1)
		}
		p.DPort = 10000 + 4095
		if i, ok := fwrule.Classify(rules, p); !ok || i != 4095 {
			t.Errorf("the last rule does not match its port: %d %v", i, ok)
		}
	}
}
