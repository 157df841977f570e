package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/segchain/segchain/internal/nodestate"
)

// keepIntents hands every node whose agent keeps intents
// (agent.Caps.Intents: client.Client, the `segchain agent` stores it on
// disk and, with --reconcile, re-applies it when the node drifts) its intent,
// Concurrency at a time: the plan's state after an apply, nothing after
// a destroy. It runs only once every node is as planned (an apply that
// failed and was rolled back hands nothing: the previous intent stands).
func (c *Controller) keepIntents(ctx context.Context, destroyed bool) error {
	errs := c.each(ctx, c.nodes(), func(ctx context.Context, _ int, n string) error {
		k := c.Agents[n].Caps().Intents
		if k == nil {
			return nil
		}
		want := c.Plan.Nodes[n]
		// A node left as it was whose agent keeps this intent already
		// is not handed it again (digest.go).
		if !destroyed && c.inSync(c.dg, n) && c.intentKept(c.dg, n) {
			return nil
		}
		if destroyed || want == nil {
			want = &nodestate.Node{Name: n}
		}
		return k.SetIntent(ctx, want)
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the nodes are as planned, but their agents did not all take the intent (their reconcile stays suspended until the next apply):\n%w", err)
	}
	return nil
}
