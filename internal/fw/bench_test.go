package fw

import (
	"fmt"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/nsutil"
)

// TestProgCostFlat measures the program's run time (BPF_PROG_TEST_RUN,
// repeated) on a packet that only the last of N rules matches (a DROP, so
// the packet is not rewritten between repetitions): the time must not grow
// with N. Informational bounds only (the machine is shared): 4096 rules
// may cost at most 2.5 times 1 rule (best of 10).
func TestProgCostFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	tn := newTestNode(t)
	pkt := srPkt(0, 41, inner6) // udp 1000 -> 2000
	cost := map[int]time.Duration{}
	for _, n := range []int{1, 64, 512, 4096} {
		var rules []fwrule.Rule
		for i := range n - 1 {
			rules = append(rules, mustRules(t, fwrule.IPv6, fmt.Sprintf("-s 2001:db8:%x::/48 -p udp --dport %d -j DROP", i, 10000+i))...)
		}
		rules = append(rules, mustRules(t, fwrule.IPv6, "-s fc00:a::/64 -p udp --dport 2000 -j DROP")...)
		tn.seed(t, Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Accept, Rules: rules})
		best := time.Duration(1 << 62)
		for range 10 {
			var d time.Duration
			err := nsutil.Do(tn.ns, func() error {
				ret, dur, err := tn.n.objs.FwTc.Benchmark(pkt, 20000, nil)
				if err == nil && ret != vShot {
					return fmt.Errorf("verdict %d", ret)
				}
				d = dur
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			best = min(best, d)
		}
		cost[n] = best
		t.Logf("%4d rules: %v per packet", n, best)
	}
	// The floor: a packet that is not the firewall's (one LPM miss).
	foreign := eth(macNode, macPeer, 0x86dd, ip6(sidIn, sidNx, 43, 60, srh(41, list(0), 1, 0, inner6)))
	err := nsutil.Do(tn.ns, func() error {
		_, d, err := tn.n.objs.FwTc.Benchmark(foreign, 20000, nil)
		t.Logf("not the firewall's: %v per packet (BPF_PROG_TEST_RUN overhead included)", d)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if cost[4096] > 5*cost[1]/2 {
		t.Errorf("4096 rules cost %v, 1 rule %v: classification grows with the rules", cost[4096], cost[1])
	}
}
