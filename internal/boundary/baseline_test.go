package boundary

import (
	"fmt"
	"net/netip"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// TestFastPathAgainstBaseline times boundary_in's common path (plain UDP
// to an outside address, the benchmark's tables) with BPF_PROG_TEST_RUN,
// alternating with another build's object: the filter's own work without
// the hook or the machine's load around it. It reports figures and asserts
// nothing about them. Opt-in: SEGCHAIN_BOUNDARY_BASELINE=FILE (e.g. `git
// show REV:internal/boundary/boundarytc_bpfel.o > FILE`).
func TestFastPathAgainstBaseline(t *testing.T) {
	prev := os.Getenv("SEGCHAIN_BOUNDARY_BASELINE")
	if prev == "" {
		t.Skip("set SEGCHAIN_BOUNDARY_BASELINE=FILE to compare with another build of the filter")
	}
	b := nodestate.Boundary{External: []netip.Prefix{netip.MustParsePrefix("fd5e:1:0:0:f1::/80")}}
	for i := 1; i <= 8; i++ {
		b.Locators = append(b.Locators, netip.MustParsePrefix(fmt.Sprintf("fd5e:%x::/48", i)))
	}
	for i := 1; i <= 32; i++ {
		b.Nodes = append(b.Nodes, netip.MustParseAddr(fmt.Sprintf("fd5f:%x::1", i)))
	}
	n := loadTest(t, b)
	spec, err := ebpf.LoadCollectionSpec(prev)
	if err != nil {
		t.Fatal(err)
	}
	var old struct {
		In *ebpf.Program `ebpf:"boundary_in"`
	}
	if err := spec.LoadAndAssign(&old, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"bnd_lpm": n.objs.BndLpm, "bnd_counters": n.objs.BndCounters,
		"bnd_hmac_sids": n.objs.BndHmacSids, "bnd_hmac_keys": n.objs.BndHmacKeys}}); err != nil {
		t.Fatal(err)
	}
	defer old.In.Close()
	frame := eth6(testutil.IPv6(a("fc00:1a::a"), a("fc00:4d::d"), nhUDP, 64, udp()))
	run := func(p *ebpf.Program) time.Duration {
		ret, d, err := p.Benchmark(frame, 200000, nil)
		if err != nil || ret != actUnspec {
			t.Fatal(err, ret)
		}
		return d
	}
	var on, oo []float64
	for i := 0; i < 30; i++ {
		on = append(on, float64(run(n.objs.BoundaryIn)))
		oo = append(oo, float64(run(old.In)))
	}
	sort.Float64s(on)
	sort.Float64s(oo)
	t.Logf("common path, ns per run (30 x 200,000 runs each): this build median %.0f (min %.0f), %s median %.0f (min %.0f)",
		on[15], on[0], prev, oo[15], oo[0])
}
