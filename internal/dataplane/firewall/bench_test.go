package firewall

import (
	"fmt"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// BenchmarkProgCost reports the program's cost per packet
// (BPF_PROG_TEST_RUN, BPF_PROG_TEST_RUN overhead included) on a packet that
// only the last of N rules matches (a DROP, so the packet is not rewritten
// between repetitions), and on a packet that is not the firewall's (one LPM
// miss: the floor). The figure is a benchmark's, not a test's: run
//
//	go test -run '^$' -bench ProgCost ./internal/dataplane/firewall
//
// TestCompileRuleCountIndependent checks the structure that keeps it flat.
func BenchmarkProgCost(b *testing.B) {
	tn := newTestNode(b)
	pkt := srPkt(0, 41, inner6) // udp 1000 -> 2000
	for _, n := range []int{1, 64, 512, 4096} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			var rules []fwrule.Rule
			for i := range n - 1 {
				rules = append(rules, mustRules(b, fwrule.IPv6, fmt.Sprintf("-s 2001:db8:%x::/48 -p udp --dport %d -j DROP", i, 10000+i))...)
			}
			rules = append(rules, mustRules(b, fwrule.IPv6, "-s fc00:a::/64 -p udp --dport 2000 -j DROP")...)
			tn.seed(b, Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Accept, Rules: rules})
			runCost(b, tn, pkt, vShot)
		})
	}
	b.Run("foreign", func(b *testing.B) {
		foreign := testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, sidNx, 43, 60, srh(41, list(0), 1, 0, inner6)))
		runCost(b, tn, foreign, -1)
	})
}

// runCost runs pkt b.N times in the kernel and reports ns/packet; want is
// the expected verdict (-1: any).
func runCost(b *testing.B, tn *testNode, pkt []byte, want int) {
	var d time.Duration
	err := nsutil.Do(tn.ns, func() error {
		ret, dur, err := tn.n.objs.FwTc.Benchmark(pkt, b.N, b.ResetTimer)
		if err == nil && want >= 0 && int(ret) != want {
			return fmt.Errorf("verdict %d, want %d", ret, want)
		}
		d = dur
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(d.Nanoseconds()), "ns/pkt")
}
