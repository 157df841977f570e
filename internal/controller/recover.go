package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/segchain/segchain/internal/agent"
)

// Journal keeps each op of an apply or destroy on stable storage before
// it runs, per node (agent.Journal; internal/journal is the on-disk one).
type Journal = agent.Journal

// BatchJournal is a Journal that records several ops with one sync
// (agent.BatchJournal).
type BatchJournal = agent.BatchJournal

// Recovery is an unfinished command's journal found on a node, and what
// was done about it.
type Recovery struct {
	Node string `json:"node"`
	// Who wrote the journal (pid, command line, start time).
	Who string `json:"who"`
	// Steps recorded: ops that ran, and the last one may or may not have.
	Steps int `json:"steps"`
	// Undone is false for a dry run (plan, destroy --dry-run).
	Undone bool `json:"undone"`
	// Errors of undo steps that were skipped: an op that never ran has
	// nothing to undo; whatever is left is drift the command then fixes.
	Errors []string `json:"errors,omitempty"`
}

func (r Recovery) String() string {
	if !r.Undone {
		return fmt.Sprintf("node %s: unfinished journal of %s, %d step(s): apply or destroy will undo them first", r.Node, r.Who, r.Steps)
	}
	return fmt.Sprintf("node %s: undid %d step(s) of an unfinished command, %s (%d of them had nothing to undo)", r.Node, r.Steps, r.Who, len(r.Errors))
}

// Recover finds the journals that a killed apply or destroy left on the
// plan's nodes and rolls them back: each node's recorded ops are undone
// in reverse, leaving the node as it was before that command (the caller
// holds the node locks, so nobody changed it since). Undo steps that fail
// are reported and skipped: the op they undo may never have run (the
// command died while it ran). Apply and destroy then work from what they
// observe, so anything left over is drift they fix: rolling back and then
// re-applying rather than rolling forward, because the journal holds the
// killed command's plan, not necessarily this one's. With dryRun the
// journals are only reported.
func (c *Controller) Recover(ctx context.Context, dryRun bool) ([]Recovery, error) {
	return c.recover(ctx, dryRun, nil)
}

// recover is Recover, skipping the journals of the nodes whose digests
// (dg) say they have nothing unfinished; a node whose journal is undone
// is dropped from dg (its state observed before changed).
func (c *Controller) recover(ctx context.Context, dryRun bool, dg *digests) ([]Recovery, error) {
	if c.Journal == nil {
		return nil, nil
	}
	var out []Recovery
	// The journals are read Concurrency at a time (remote ones are on
	// the agents); what they hold is undone node after node.
	var names []string
	for _, n := range c.nodes() {
		if g, ok := dg.get(n); ok && !g.Unfinished {
			continue
		}
		names = append(names, n)
	}
	type found struct {
		ops []agent.Op
		who string
	}
	journals := make([]found, len(names))
	if errs := c.each(ctx, names, func(_ context.Context, i int, n string) error {
		ops, who, err := c.Journal.Unfinished(n)
		journals[i] = found{ops, who}
		return err
	}); len(errs) > 0 {
		return out, errs[0]
	}
	for i, n := range names {
		ops, who := journals[i].ops, journals[i].who
		if ops == nil && who == "" {
			continue
		}
		r := Recovery{Node: n, Who: who, Steps: len(ops)}
		dg.drop(n)
		if !dryRun {
			a, err := c.agentFor(n)
			if err != nil {
				return out, err
			}
			// Interrupted (^C): the journals not undone yet stay for
			// the next command. A node's undo, once started, is not
			// cancelled: an undo step failing is skipped and the journal
			// cleared, so a cancelled one would lose the journal.
			if err := interrupted(ctx); err != nil {
				return out, err
			}
			uctx := context.WithoutCancel(ctx)
			for i := len(ops) - 1; i >= 0; i-- {
				if _, err := a.Execute(uctx, []agent.Op{ops[i].Inverse()}); err != nil {
					r.Errors = append(r.Errors, err.Error())
				}
			}
			if err := c.Journal.Clear(n); err != nil {
				return out, err
			}
			r.Undone = true
		}
		out = append(out, r)
	}
	return out, nil
}

// step runs one op on node, journaled first when there is a journal.
func (c *Controller) step(ctx context.Context, a agent.Agent, node string, op agent.Op) (bool, error) {
	if c.Journal != nil {
		if err := c.Journal.Record(node, op); err != nil {
			return false, err
		}
	}
	done, err := a.Execute(ctx, []agent.Op{op})
	return done == 1, err
}

// clearJournals forgets the journals of the diffs' nodes once their ops
// are complete or undone: every node's it can (an agent that died keeps
// its own, which the next apply undoes), with the errors of the others.
func (c *Controller) clearJournals(diffs []Diff) error {
	if c.Journal == nil {
		return nil
	}
	var names []string
	for _, d := range diffs {
		if !d.Empty() {
			names = append(names, d.Node)
		}
	}
	// Concurrency at a time (remote journals are on the agents): every
	// node's that can be cleared is, the errors of the others in node
	// order.
	return errors.Join(c.each(context.Background(), names, func(_ context.Context, _ int, n string) error {
		return c.Journal.Clear(n)
	})...)
}
