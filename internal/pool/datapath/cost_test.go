package datapath

import (
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/testutil"
)

// TestProgramCost times the programs alone (BPF_PROG_TEST_RUN, repeat N)
// per kind of frame: figures for docs/benchmarks.md "#29", no assertion
// on them. Opt-in: SEGCHAIN_POOL_PROG_COST=N.
func TestProgramCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SEGCHAIN_POOL_PROG_COST"))
	if n <= 0 {
		t.Skip("set SEGCHAIN_POOL_PROG_COST=REPEAT to time the selector program")
	}
	h, ns, ifx := openTest(t)
	// A repeated run rewrites the same packet again: two pools of one
	// instance that rewrite into each other (P -> Q, Q -> P) make every
	// run a rewrite.
	mk := func(name, ph, inst string) pool.Pool {
		return pool.Pool{Name: name, Placeholder: netip.MustParseAddr(ph), OnFailure: pool.Failover, AllDown: pool.Drop,
			Instances: []pool.Instance{{Name: name, SID: netip.MustParseAddr(inst), Weight: 1}}}
	}
	one := mk("one", "fc00:5::f1", "fc00:5::f1")
	pq, qp := mk("pq", "fc00:6::f1", "fc00:7::f1"), mk("qp", "fc00:7::f1", "fc00:6::f1")
	if err := h.Program([]pool.Pool{one, pq, qp}); err != nil {
		t.Fatal(err)
	}
	f := pool.Flow{Src: netip.MustParseAddr("fc00:1::2"), Dst: netip.MustParseAddr("fc00:200:1::1"), Sport: 4000, Dport: 5000, Proto: 17}
	miss := one
	miss.Placeholder = netip.MustParseAddr("fc00:b00::1")
	cases := []struct {
		name  string
		frame []byte
	}{
		{"not a pool's (control)", frame(miss, f)},
		{"pool of 1: chosen, not rewritten", frame(one, f)},
		{"pool of 1: rewritten", frame(pq, f)},
	}
	// pool_in (session 12): a plain packet of a pool chain (classified
	// by one rule, chosen among 3, marked) and one no rule matches.
	three := testPool(pool.Failover)
	if err := h.Program([]pool.Pool{three, pq, qp}); err != nil {
		t.Fatal(err)
	}
	if err := h.ProgramRules([]pool.Spec{{Pool: three, Chains: []pool.ChainSel{chainSel(1111, 3000, "fc00:200::/32", three, true)}}}); err != nil {
		t.Fatal(err)
	}
	other := f
	other.Dst = netip.MustParseAddr("fc00:300::1")
	in := []struct {
		name  string
		frame []byte
	}{
		{"", plain(f)},
		{"pool_in: no rule matches", plain(other)},
		{"pool_in: a pool of 3, marked", plain(f)},
	}
	// The control: an empty program run the same way (the harness's
	// share of each figure).
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, -1), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	for round := 0; round < 3; round++ {
		for _, c := range in {
			var d time.Duration
			var ret uint32
			prog := h.InProg()
			if c.name == "" {
				prog, c.name = empty, "an empty program (control)"
			}
			err := nsutil.Do(ns, func() error {
				var err error
				// On the uplink (its MAC: a frame for this host), as
				// pool_in sees it; a context-less run uses lo.
				// (Benchmark takes no context: timed around Run, one
				// syscall amortised over the repeats.)
				opts := &ebpf.RunOptions{Data: c.frame, Repeat: uint32(n), Context: testutil.SkbCtx{IngressIfindex: ifx, Ifindex: ifx}}
				t0 := time.Now()
				ret, err = prog.Run(opts)
				d = time.Since(t0) / time.Duration(n)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("round %d %-34s %6.1f ns/run (verdict %d)", round, c.name, float64(d.Nanoseconds()), ret)
		}
	}
	if err := h.Program([]pool.Pool{one, pq, qp}); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3; round++ {
		for _, c := range cases {
			var d time.Duration
			var ret uint32
			err := nsutil.Do(ns, func() error {
				var err error
				ret, d, err = h.Prog().Benchmark(c.frame, n, nil)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("round %d %-34s %6.1f ns/run (verdict %d)", round, c.name, float64(d.Nanoseconds()), ret)
		}
	}
}
