package controller

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/nodestate"
)

// interruptingAgent cancels the command's context (as ^C does) while its
// Execute runs, after `after` ops of the apply have run on any node, and
// records whether an op it ran saw its own context cancelled.
type interruptingAgent struct {
	*agenttest.Agent
	ran       *int
	after     int
	cancel    context.CancelFunc
	sawCancel *bool
	// batch: the controller sends each node's ops of a phase in one
	// Execute (as to a remote agent): the interrupt lands mid-batch.
	batch bool
}

func (a *interruptingAgent) Caps() agent.Caps { return agent.Caps{JournalsEachOp: a.batch} }

func (a *interruptingAgent) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	for i, op := range ops {
		if ctx.Err() != nil {
			*a.sawCancel = true
			return i, ctx.Err()
		}
		if _, err := a.Agent.Execute(ctx, []agent.Op{op}); err != nil {
			return i, err
		}
		if *a.ran++; *a.ran == a.after {
			a.cancel() // the op in flight (this batch) must still finish
		}
	}
	return len(ops), nil
}

// An apply interrupted after k of its ops starts no new op, does not
// cancel the ones running (their outcome must be known to undo them), and
// rolls back every op that ran on every node — at every k.
func TestInterruptedApplyRollsBack(t *testing.T) {
	p := twoNodePlan("fc00:2::200")
	p.Nodes["ing"].Sysctls = append(p.Nodes["ing"].Sysctls, nodestate.Sysctl{Key: "net.ipv6.conf.all.seg6_enabled", Value: "1"})
	total := 0
	{
		c, _ := newCtl(twoNodePlan("fc00:2::100"))
		if _, err := c.Apply(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		c.Plan = p
		res, err := c.Apply(context.Background(), true)
		if err != nil {
			t.Fatal(err)
		}
		total = res.Changes()
	}
	if total < 3 {
		t.Fatalf("plan has %d changes, want several to interrupt between", total)
	}
	for _, batch := range []bool{false, true} {
		for k := 1; k < total; k++ {
			c, fakes := newCtl(twoNodePlan("fc00:2::100"))
			if _, err := c.Apply(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			before := map[string]*nodestate.Node{}
			for n, f := range fakes {
				before[n], _ = f.Observe(context.Background(), p.Nodes[n])
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			ran, saw := 0, false
			for n, f := range fakes {
				c.Agents[n] = &interruptingAgent{Agent: f, ran: &ran, after: k, cancel: func() { cancel(errors.New("signal interrupt")) }, sawCancel: &saw, batch: batch}
			}
			c.Plan = p
			res, err := c.Apply(ctx, false)
			cancel(nil)
			if !errors.Is(err, ErrInterrupted) {
				t.Fatalf("batch=%v k=%d: err = %v, want ErrInterrupted", batch, k, err)
			}
			fwd := ran - res.Undone // ran counts the undo ops too
			if !res.Interrupted || !res.RolledBack || res.Undone != fwd {
				t.Errorf("batch=%v k=%d: interrupted=%v rolled back=%v undone=%d of %d that ran", batch, k, res.Interrupted, res.RolledBack, res.Undone, fwd)
			}
			// One op at a time, none starts after the interrupt; in
			// batches, the batch in flight finishes (fwd ≥ k) and no
			// other starts.
			if (!batch && fwd != k) || fwd < k {
				t.Errorf("batch=%v k=%d: %d ops ran", batch, k, fwd)
			}
			if saw {
				t.Errorf("batch=%v k=%d: an op saw its context cancelled: the interrupt must not cancel ops in flight", batch, k)
			}
			for n, f := range fakes {
				got, _ := f.Observe(context.Background(), p.Nodes[n])
				if d := cmp.Diff(before[n], got, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); d != "" {
					t.Errorf("batch=%v k=%d: node %s not restored (-before +after):\n%s", batch, k, n, d)
				}
			}
		}
	}
}

// An interrupt before apply starts changing leaves the journals of a
// killed command in place (Recover does not clear what it did not undo).
func TestInterruptBeforeRecoverKeepsJournal(t *testing.T) {
	c, _ := newCtl(twoNodePlan("fc00:2::100"))
	j := agenttest.NewJournal()
	j.Leave("nfv", "pid 1 (segchain apply)", agent.Op{Kind: agent.KindSysctl, Action: agent.ActSet,
		Sysctl: &nodestate.Sysctl{Key: "net.ipv6.conf.all.forwarding", Value: "1"}, OldValue: "0"})
	c.Journal = j
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Recover(ctx, false); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Recover on an ended context: %v, want ErrInterrupted", err)
	}
	if ops, _, _ := j.Unfinished("nfv"); len(ops) == 0 {
		t.Error("the journal was cleared without being undone")
	}
}
