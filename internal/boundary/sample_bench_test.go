package boundary

import (
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// BenchmarkBoundaryInSampling is boundary_in's own cost on a plain IPv6
// packet (BPF_PROG_TEST_RUN, ns per run): sampling off (no selector: the
// path of every node but a sampled chain's headend), a selector the packet
// does not match, one it matches at 1:1000; with SEGCHAIN_OLD_BOUNDARY_O
// naming an older build's boundarytc_bpfel.o (git show
// REV:internal/boundary/boundarytc_bpfel.o), that program too. Run them
// interleaved (-count) on a quiet machine: differences of a few ns are
// the test run's noise.
func BenchmarkBoundaryInSampling(b *testing.B) {
	testutil.RequireRoot(b)
	bnd := nodestate.Boundary{Locators: []netip.Prefix{netip.MustParsePrefix("fc00:1::/64")}}
	spec, err := loadBoundaryTC()
	if err != nil {
		b.Fatal(err)
	}
	n := &node{}
	if err := spec.LoadAndAssign(&n.objs, nil); err != nil {
		b.Fatal(err)
	}
	defer n.close()
	if err := n.sync(bnd); err != nil {
		b.Fatal(err)
	}
	frame := eth6(testutil.IPv6(a("fc00:1a::a"), a("fc00:4d::d"), nhUDP, 64, udp()))
	s := &Sampling{n: n}
	run := func(b *testing.B, p *ebpf.Program) {
		b.Helper()
		_, d, err := p.Benchmark(frame, b.N, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(d.Nanoseconds()), "ns/run")
	}
	type arm struct {
		name string
		sels []SampleSel
	}
	for _, a := range []arm{
		{"off", nil},
		{"other-selector", []SampleSel{{Family: 6, Dst: netip.MustParsePrefix("fc00:5d::/64"), Slot: 0, Rate: 1000, Mark: 1}}},
		{"match-1000", []SampleSel{{Family: 6, Dst: netip.MustParsePrefix("fc00:4d::/64"), Slot: 0, Rate: 1000, Mark: 1}}},
	} {
		b.Run(a.name, func(b *testing.B) {
			if err := s.Set(a.sels); err != nil {
				b.Fatal(err)
			}
			run(b, n.objs.BoundaryIn)
		})
	}
	if p := os.Getenv("SEGCHAIN_OLD_BOUNDARY_O"); p != "" {
		b.Run("old", func(b *testing.B) {
			old, err := ebpf.LoadCollectionSpec(p)
			if err != nil {
				b.Fatal(err)
			}
			var o struct {
				P   *ebpf.Program `ebpf:"boundary_in"`
				Lpm *ebpf.Map     `ebpf:"bnd_lpm"`
			}
			if err := old.LoadAndAssign(&o, nil); err != nil {
				b.Fatal(err)
			}
			defer o.P.Close()
			defer o.Lpm.Close()
			k := lpmKey(netip.MustParsePrefix("fc00:1::/64"))
			if err := o.Lpm.Put(k, boundaryTCBndDest{Kind: 1}); err != nil {
				b.Fatal(err)
			}
			run(b, o.P)
		})
	}
}
