package poolperf

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/perf/perftest"
)

// TestCostSlotsSelect sends every slot of the cost run (Measure) through
// its switching generator: the pool arms' packets must be chosen (their
// pool counts them) with the programs the slot attaches — with pool_in
// alone they must leave the encap with an instance's SID (nft in
// POSTROUTING), so the mark chose them —, and with no program attached
// (the reference's state) the pool arm's frame is counted by nobody: the
// reference really has no pool program.
func TestCostSlotsSelect(t *testing.T) {
	d := perftest.Testbed(t, "s12pc")
	env := d.Env()
	gen, st, err := setupSlots(d, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.close() })
	k := recipeK[poolIn]
	byDst := farByDst(t, env, "s12pc", k)
	// The one pool: poolIn's, id 0.
	stats := func(id int) uint64 { return poolPackets(t, env, id, 3) }
	poolID := map[int]int{poolIn: 0}
	if err := gen.SetRate(2000); err != nil {
		t.Fatal(err)
	}
	send := func(slot int, until func() bool) {
		t.Helper()
		if err := gen.Select(slot); err != nil {
			t.Fatal(err)
		}
		if err := gen.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !until() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if err := gen.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range Slots {
		id, isPool := poolID[s.Recipe]
		if !isPool {
			continue
		}
		before := stats(id)
		send(i, func() bool { return stats(id) > before })
		if stats(id) == before {
			t.Errorf("%s: its pool counted none of its packets in 10 s: the arm went out unselected", s.Name)
		}
		if s.Progs == progIn {
			c := byDst()
			if c["far1"] != 0 || c["far3"]+c["far4"]+c["far5"] == 0 {
				t.Errorf("%s: packets leaving the encap by destination %v: want only instances (far3..5), none to the placeholder far1", s.Name, c)
			}
		}
	}
	// The reference's state (no program) with the pool arm's frame: it
	// leaves with the placeholder, counted by no pool.
	st.mode = -1 // force set to re-evaluate
	if err := st.set(progNone); err != nil {
		t.Fatal(err)
	}
	gen.Before = func(int) error { return nil }
	before, c0 := stats(poolID[poolIn]), byDst()["far1"]
	send(2, func() bool { return byDst()["far1"] > c0 })
	if got := stats(poolID[poolIn]); got != before {
		t.Errorf("no program attached, yet the pool counted %d packets", got-before)
	}
	if byDst()["far1"] == c0 {
		t.Errorf("no program attached: the pool arm's frame should leave with the placeholder far1")
	}
}

// TestPoolCost measures the honest cost of a pool at the headend
// (docs/pools.md, docs/benchmarks.md "#29"). It reports figures and
// asserts nothing about them. Opt-in: SEGCHAIN_POOL_COST=ROUNDS.
func TestPoolCost(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SEGCHAIN_POOL_COST"))
	if rounds <= 0 {
		t.Skip("set SEGCHAIN_POOL_COST=ROUNDS to measure a pool's cost at the headend")
	}
	d := perftest.Testbed(t, "s12pm")
	res, err := Measure(d, rounds, 100*time.Millisecond, os.Getenv("SEGCHAIN_POOL_COST_WIRE") != "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reference %s: %.1f ns/packet", Slots[0].Name, res.RefNsPerPkt.Median)
	for _, a := range res.Arms {
		t.Logf("%-24s R_cpu %.4f CI95 [%.4f, %.4f] (n=%d)  throughput %.4f (n=%d)  %.1f ns/packet",
			a.Name, a.CPURatio.Median, a.CPURatio.CI95[0], a.CPURatio.CI95[1], a.CPURatio.Runs,
			a.Throughput.Median, a.Throughput.Runs, a.NsPerPkt.Median)
	}
}
