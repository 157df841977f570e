package controller

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
)

// An apply killed after k of its ops leaves them journaled; Recover undoes
// them so every node is as before, and apply then completes. Every k.
func TestRecoverUndoesKilledApply(t *testing.T) {
	ctx := context.Background()
	eq := cmp.Options{cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})}
	c, _ := newCtl(twoNodePlan("fc00:2::100"))
	diffs, err := c.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var all []struct {
		node string
		op   agent.Op
	}
	for _, d := range diffs {
		for _, op := range d.Ops() {
			all = append(all, struct {
				node string
				op   agent.Op
			}{d.Node, op})
		}
	}
	for k := 0; k <= len(all); k++ {
		c, fakes := newCtl(twoNodePlan("fc00:2::100"))
		j := agenttest.NewJournal()
		c.Journal = j
		observe := func(n string) any {
			got, _ := fakes[n].Observe(ctx, c.Plan.Nodes[n])
			return got
		}
		before := map[string]any{}
		for n := range fakes {
			before[n] = observe(n)
		}
		for _, s := range all[:k] { // the killed apply's steps
			_ = j.Record(s.node, s.op)
			if _, err := fakes[s.node].Execute(ctx, []agent.Op{s.op}); err != nil {
				t.Fatal(err)
			}
		}
		rec, err := c.Recover(ctx, true)
		if err != nil || len(rec) != len(j.Nodes()) || len(j.Cleared()) != 0 {
			t.Fatalf("k=%d: dry-run Recover = %v, %v; cleared %v", k, rec, err, j.Cleared())
		}
		if _, err := c.Recover(ctx, false); err != nil {
			t.Fatal(err)
		}
		for n := range fakes {
			if d := cmp.Diff(before[n], observe(n), eq); d != "" {
				t.Errorf("k=%d: node %s not restored by Recover (-before +after):\n%s", k, n, d)
			}
		}
		if len(j.Nodes()) != 0 {
			t.Errorf("k=%d: journals left after Recover: %v", k, j.Nodes())
		}
		if _, err := c.Apply(ctx, false); err != nil {
			t.Fatal(err)
		}
		if res, _ := c.Apply(ctx, true); res.Changes() != 0 || len(j.Nodes()) != 0 {
			t.Errorf("k=%d: after recovery and apply: %d changes left, journals %v", k, res.Changes(), j.Nodes())
		}
	}
}
