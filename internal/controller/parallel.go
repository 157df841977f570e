package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// workers is how many nodes are worked on at once.
func (c *Controller) workers() int {
	if c.Concurrency < 1 {
		return 1
	}
	return c.Concurrency
}

// nodeCtx bounds one node's part of a phase by NodeTimeout.
func (c *Controller) nodeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.NodeTimeout > 0 {
		return context.WithTimeout(ctx, c.NodeTimeout)
	}
	return context.WithCancel(ctx)
}

// each runs fn for every name, Concurrency at a time, each under its
// NodeTimeout, and returns the errors in names' order (nil entries
// dropped).
func (c *Controller) each(ctx context.Context, names []string, fn func(ctx context.Context, i int, n string) error) []error {
	errs := make([]error, len(names))
	sem := make(chan struct{}, c.workers())
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			nctx, cancel := c.nodeCtx(ctx)
			defer cancel()
			errs[i] = fn(nctx, i, n)
		}()
	}
	wg.Wait()
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// runBatch runs a node's ops of one phase in one Execute, recording the
// ones that ran.
func (c *Controller) runBatch(stopCtx, ctx context.Context, a agent.Agent, n string, list []agent.Op, mu *sync.Mutex, failed *bool, record func(string, agent.Op)) error {
	if ok, err := mayStart(stopCtx, mu, failed); !ok {
		return err
	}
	start := time.Now()
	done, err := a.Execute(ctx, list)
	mu.Lock()
	defer mu.Unlock()
	for _, op := range list[:min(max(done, 0), len(list))] {
		record(n, op)
	}
	if err != nil {
		*failed = true
		if ctx.Err() != nil {
			err = fmt.Errorf("node %s: %w after %v: %w", n, ctx.Err(), time.Since(start).Round(time.Millisecond), err)
		}
		return err
	}
	return nil
}

// mayStart reports whether a node may start its next change: not once
// another node of the phase failed (nil error: it stops quietly), nor
// once stopCtx ended (ErrInterrupted, and the phase is marked failed).
func mayStart(stopCtx context.Context, mu *sync.Mutex, failed *bool) (bool, error) {
	mu.Lock()
	defer mu.Unlock()
	if *failed {
		return false, nil
	}
	if err := interrupted(stopCtx); err != nil {
		*failed = true
		return false, err
	}
	return true, nil
}

// ErrInterrupted is the failure of an apply or destroy whose context
// ended (^C, SIGTERM) before all its ops ran: it is rolled back.
var ErrInterrupted = errors.New("interrupted")

// interrupted is ErrInterrupted, with the context's cause, once ctx has
// ended; nil before.
func interrupted(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("%w (%v): no new change started", ErrInterrupted, context.Cause(ctx))
}

// phases splits an order of diff indexes into runs of consecutive nodes
// of the same kind (headend or not): the nodes of one run may change at
// the same time; runs go one after the other, which keeps the
// make-before-break order between endpoints and headends.
func (c *Controller) phases(diffs []Diff, order []int) [][]int {
	isHeadend := func(i int) bool {
		n := c.Plan.Nodes[diffs[i].Node]
		return n != nil && len(n.Rules) > 0
	}
	var out [][]int
	for k, i := range order {
		if k == 0 || isHeadend(i) != isHeadend(order[k-1]) {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], i)
	}
	return out
}

// runPhases runs, phase after phase, ops(diff) on each node of the phase
// (Concurrency nodes at a time, ops of one node in order), recording each
// op that ran with record. After the first failure no new op starts on
// any node; it returns the first failure (by node order).
//
// When ctx ends (^C) no new op (or batch) starts either, but the ops
// running then are not cancelled: they finish, so that what ran is known
// exactly and recorded for the rollback. (A cancelled remote Execute
// would report nothing done, while the agent may have run part of it.)
// Each node's part of a phase is still bounded by NodeTimeout.
func (c *Controller) runPhases(stopCtx context.Context, diffs []Diff, phases [][]int, ops func(Diff) []agent.Op,
	record func(node string, op agent.Op), started func(node string, b *nodestate.BGP)) error {
	var mu sync.Mutex
	failed := false
	ctx := context.WithoutCancel(stopCtx)
	for _, ph := range phases {
		if err := interrupted(stopCtx); err != nil {
			return err
		}
		names := make([]string, len(ph))
		for k, i := range ph {
			names[k] = diffs[i].Node
		}
		errs := c.each(ctx, names, func(ctx context.Context, k int, n string) error {
			d := diffs[ph[k]]
			list := ops(d)
			if len(list) == 0 {
				return nil
			}
			if err := c.runNode(stopCtx, ctx, n, list, &mu, &failed, record); err != nil {
				return err
			}
			if started != nil {
				for _, op := range list {
					if op.Kind == agent.KindBGP && op.BGP != nil && op.OldBGP == nil {
						started(n, op.BGP)
					}
				}
			}
			return nil
		})
		if len(errs) > 0 {
			// Each node stopped by the interrupt says so: once is enough.
			var real []error
			for _, e := range errs {
				if !errors.Is(e, ErrInterrupted) {
					real = append(real, e)
				}
			}
			if len(real) == 0 {
				return interrupted(stopCtx)
			}
			return errors.Join(real...)
		}
	}
	return nil
}

// runNode runs node n's ops of one phase (runPhases); failed is shared
// by the phase's nodes, guarded by mu.
func (c *Controller) runNode(stopCtx, ctx context.Context, n string, list []agent.Op, mu *sync.Mutex, failed *bool,
	record func(node string, op agent.Op)) error {
	a, err := c.agentFor(n)
	if err != nil {
		return err
	}
	// An agent that journals each op itself (agent.Caps) gets a
	// node's ops of one phase in one Execute, with the same crash
	// safety.
	if a.Caps().JournalsEachOp {
		return c.runBatch(stopCtx, ctx, a, n, list, mu, failed, record)
	}
	for _, op := range list {
		if ok, err := mayStart(stopCtx, mu, failed); !ok {
			return err
		}
		start := time.Now()
		done, err := c.step(ctx, a, n, op)
		if done {
			mu.Lock()
			record(n, op)
			mu.Unlock()
		}
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("node %s: %w after %v: %w", n, ctx.Err(), time.Since(start).Round(time.Millisecond), err)
			}
			mu.Lock()
			*failed = true
			mu.Unlock()
			return err
		}
	}
	return nil
}
