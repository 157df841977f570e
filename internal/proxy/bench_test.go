package proxy

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/nsutil"
)

// BenchmarkProgCost reports the proxy program's cost per packet
// (BPF_PROG_TEST_RUN overhead included) on paths that do not rewrite the
// packet, so every repetition sees the same input: inbound End.AD up to
// the hop-limit drop (extension-header walk, cache scratch, SRH checks),
// outbound End.AS up to the FIB's too-big answer for an IPv4 packet
// without DF (cache lookup, bounds, FIB lookup), and a packet that is not
// the proxy's (one hash miss: the floor). Run
//
//	go test -run '^$' -bench ProgCost ./internal/proxy
func BenchmarkProgCost(b *testing.B) {
	tn := newTestNode(b)
	list := []netip.Addr{sidEg, sidNx, sidPx, sidIn}
	tn.seed(b, []sidConf{
		{sid: sidPx.String(), behavior: EndAD, inner: InnerIPv6, mac: true},
		{sid: "fc00:2::a5", behavior: EndAS, inner: InnerIPv4, mac: true, asSrc: "fc00:2::5", asSegs: []string{sidNx.String(), sidEg.String()}},
	})
	// The End.AS SID's IFACE-IN is sfb for both SIDs in seed; the last
	// one written (End.AS) owns it.
	for _, c := range []struct {
		name string
		iif  uint32
		pkt  []byte
		want Verdict
	}{
		{"inbound-ad-hoplimit", tn.pa, eth(macNode, macPeer, 0x86dd, ip6(sidIn, sidPx, 43, 1, srh(41, list, 2, 0, nil, inner6))), VerdictDrop},
		{"outbound-as-mtu", tn.sfb, eth(macSFOut, macSF, 0x0800, noDF(big4)), VerdictDrop},
		{"foreign", tn.pa, srPkt([]netip.Addr{sidEg, sidNx}, 1, 41, nil, inner6), VerdictNext},
	} {
		b.Run(c.name, func(b *testing.B) {
			var d time.Duration
			err := nsutil.Do(tn.ns, func() error {
				// ebpf.Program.Benchmark takes no context (the ingress
				// ifindex picks the half): time one Run of b.N
				// repetitions instead; the syscall is amortised.
				opts := &ebpf.RunOptions{Data: c.pkt, Repeat: uint32(b.N),
					Context: skbCtx{IngressIfindex: c.iif, Ifindex: c.iif}}
				b.ResetTimer()
				start := time.Now()
				ret, err := tn.objs.ProxyTc.Run(opts)
				d = time.Since(start)
				if err == nil && Verdict(int32(ret)) != c.want {
					return fmt.Errorf("verdict %d, want %d", int32(ret), c.want)
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "ns/pkt")
		})
	}
}
