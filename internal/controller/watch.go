package controller

import (
	"context"
	"fmt"
	"time"
)

// Settle is how long Watch waits after a link event for more of them
// before it applies (a flap brings several interfaces up at once); the
// agent's reconcile (internal/agent/reconcile) waits as long.
const Settle = 300 * time.Millisecond

// Watch is `segchain watch`: it keeps the domain applied from the
// controller's host. It applies once, then again whenever an
// interface of a node comes up (taking an interface down deletes the
// routes through it and bringing it up does not restore them: an SF's
// route back to its proxy, a transit route). Every apply is reported with
// the interfaces that triggered it. Nodes whose agent cannot watch links
// (no agent.Caps.Links) are only repaired by these applies. It
// returns when ctx ends.
func (c *Controller) Watch(ctx context.Context, report func(trigger []string, res *Result, err error)) error {
	events := make(chan string, 64)
	for _, n := range c.nodes() {
		w := c.Agents[n].Caps().Links
		if w == nil {
			continue
		}
		ch, err := w.LinkUps(ctx)
		if err != nil {
			return err
		}
		go func(node string) {
			for name := range ch {
				select {
				case events <- node + ":" + name:
				case <-ctx.Done():
					return
				}
			}
		}(n)
	}
	res, err := c.lockedApply(ctx)
	report(nil, res, err)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			trigger := []string{ev}
			timer := time.NewTimer(Settle)
		gather:
			for {
				select {
				case ev := <-events:
					trigger = append(trigger, ev)
				case <-timer.C:
					break gather
				case <-ctx.Done():
					timer.Stop()
					return nil
				}
			}
			res, err := c.lockedApply(ctx)
			if err != nil {
				err = fmt.Errorf("re-apply after %v came up: %w", trigger, err)
			}
			report(trigger, res, err)
		}
	}
}

// lockedApply applies under c.Lock, if set.
func (c *Controller) lockedApply(ctx context.Context) (*Result, error) {
	if c.Lock != nil {
		release, err := c.Lock(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	return c.Apply(ctx, false)
}
