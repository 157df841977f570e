package controller

import (
	"context"
	"time"

	"github.com/segchain/segchain/internal/agent"
)

// DefaultBGPSettle is how long an apply waits at most for new BGP sessions
// before it removes routes.
const DefaultBGPSettle = 30 * time.Second

// settleBGP makes a switch to BGP routing make-before-break: when the adds
// started or changed BGP speakers and the deletes remove routes (static
// routes BGP replaces), it waits until every such node's sessions are
// established (those on links without carrier aside), then a moment for
// the first UPDATEs, before the deletes run. A session that does not come
// up within BGPSettle does not fail the apply: it is what status shows.
func (c *Controller) settleBGP(ctx context.Context, diffs []Diff) {
	var speakers []string
	removes := false
	for _, d := range diffs {
		for _, op := range d.Adds {
			if op.Kind == agent.KindBGP && op.BGP != nil {
				speakers = append(speakers, d.Node)
			}
		}
		for _, op := range d.Deletes {
			removes = removes || op.Kind == agent.KindRoute
		}
	}
	if len(speakers) == 0 || !removes {
		return
	}
	limit := c.BGPSettle
	if limit <= 0 {
		limit = DefaultBGPSettle
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c.bgpUp(ctx, speakers) {
			// Established: the first UPDATEs follow at once.
			time.Sleep(time.Second)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *Controller) bgpUp(ctx context.Context, nodes []string) bool {
	for _, n := range nodes {
		a, err := c.agentFor(n)
		if err != nil {
			return false
		}
		got, err := a.Observe(ctx, c.Plan.Nodes[n])
		if err != nil || got.BGP == nil {
			return false
		}
		for _, s := range got.BGPSessions {
			if !s.Established() && s.Admin == "" {
				return false
			}
		}
	}
	return true
}
