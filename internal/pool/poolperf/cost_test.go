package poolperf

import (
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/perf/perftest"
)

// TestCostSlotsSelect sends every slot of the cost run (Measure) through
// its switching generator: the pool arms' packets must be chosen (their
// pool counts them) with the programs the slot attaches — with pool_in
// alone they must leave the encap with an instance's SID (nft in
// POSTROUTING), so the mark chose them —, and with no program attached
// (the reference's state) the pool arm's frame is counted by nobody: the
// reference really has no pool program. Behind the boundary filter
// (perf pools --boundary) the same, with the filter first on the input
// port's TCX ingress in every slot and pool_in after it.
func TestCostSlotsSelect(t *testing.T) {
	t.Run("alone", func(t *testing.T) { costSlotsSelect(t, "s12pc", false) })
	t.Run("behind-boundary", func(t *testing.T) { costSlotsSelect(t, "s14pb", true) })
}

func costSlotsSelect(t *testing.T, prefix string, behind bool) {
	d := perftest.Testbed(t, prefix)
	env := d.Env()
	gen, st, err := setupSlots(d, 64, behind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.close() })
	if behind {
		if err := st.set(progIn); err != nil {
			t.Fatal(err)
		}
		if got, want := ingressProgs(t, env), []string{"boundary_in", "pool_in"}; !slices.Equal(got, want) {
			t.Fatalf("TCX ingress of %s: %v, want %v (the filter first, as apply orders them)", env.In, got, want)
		}
	}
	k := recipeK[poolIn]
	byDst := farByDst(t, env, prefix, k)
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

// ingressProgs names the programs on env.In's TCX ingress, in order.
func ingressProgs(t *testing.T, env *perf.Env) []string {
	t.Helper()
	var names []string
	err := env.Do(func() error {
		i, err := net.InterfaceByName(env.In)
		if err != nil {
			return err
		}
		r, err := link.QueryPrograms(link.QueryOptions{Target: i.Index, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		for _, p := range r.Programs {
			prog, err := ebpf.NewProgramFromID(p.ID)
			if err != nil {
				return err
			}
			info, err := prog.Info()
			prog.Close()
			if err != nil {
				return err
			}
			names = append(names, info.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
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
	res, err := Measure(d, rounds, 100*time.Millisecond, os.Getenv("SEGCHAIN_POOL_COST_WIRE") != "", os.Getenv("SEGCHAIN_POOL_COST_BOUNDARY") != "")
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
