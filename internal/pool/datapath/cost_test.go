package datapath

import (
	"net/netip"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
)

// TestProgramCost times the program alone (BPF_PROG_TEST_RUN, repeat N)
// per kind of frame: figures for docs/benchmarks.md "#29", no assertion
// on them. Opt-in: SEGCHAIN_POOL_PROG_COST=N.
func TestProgramCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SEGCHAIN_POOL_PROG_COST"))
	if n <= 0 {
		t.Skip("set SEGCHAIN_POOL_PROG_COST=REPEAT to time the selector program")
	}
	h, ns, _ := openTest(t)
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
