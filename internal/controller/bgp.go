package controller

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// DefaultBGPSettle is how long an apply waits at most for new BGP sessions
// before it removes routes.
const DefaultBGPSettle = 30 * time.Second

// settleBGP makes a switch to BGP routing make-before-break: when the adds
// started or changed BGP speakers and the deletes remove routes (static
// routes BGP replaces), it waits until every such node's sessions are
// established (those on links without carrier aside) and, on every node
// whose deletes remove a route to a prefix some speaker originates, until
// the node's main table holds its BGP replacement, before the deletes run.
// (It used to wait a fixed second after the sessions came up: a route that
// took longer to arrive, over several hops on a loaded host, left a gap
// between the static route's removal and the BGP route's install.) A
// session or route that does not come within BGPSettle does not fail the
// apply: it is what status shows.
func (c *Controller) settleBGP(ctx context.Context, diffs []Diff) {
	var speakers []string
	removes := false
	replaced := map[string][]netip.Prefix{} // node → routes its deletes remove
	for _, d := range diffs {
		for _, op := range d.Adds {
			if op.Kind == agent.KindBGP && op.BGP != nil {
				speakers = append(speakers, d.Node)
			}
		}
		for _, op := range d.Deletes {
			if op.Kind == agent.KindRoute {
				removes = true
				if op.Route != nil && op.Route.Seg6Local == nil {
					replaced[d.Node] = append(replaced[d.Node], op.Route.Dst)
				}
			}
		}
	}
	if len(speakers) == 0 || !removes {
		return
	}
	limit := c.BGPSettle
	if limit <= 0 {
		limit = DefaultBGPSettle
	}
	want := c.bgpReplacements(replaced)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if c.bgpUp(ctx, speakers) {
			switch ok, err := c.bgpInstalled(ctx, want); {
			case errors.Is(err, agent.ErrTooOld):
				// An agent that cannot show its routes: the first
				// UPDATEs follow the sessions at once.
				time.Sleep(time.Second)
				return
			case ok:
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// bgpReplacements keeps, of the routes each node's deletes remove, those
// to a prefix a BGP speaker of the plan (agent or router) originates: a
// BGP route will replace them.
func (c *Controller) bgpReplacements(replaced map[string][]netip.Prefix) map[string][]netip.Prefix {
	originated := map[netip.Prefix]bool{}
	add := func(b *nodestate.BGP) {
		if b != nil {
			for _, p := range b.Prefixes {
				originated[p.Masked()] = true
			}
			// A router's aggregate (routing.summaries under bgp)
			// replaces a static route to the block.
			for _, p := range b.Aggregates {
				originated[p.Masked()] = true
			}
		}
	}
	for _, n := range c.Plan.Nodes {
		add(n.BGP)
	}
	for _, b := range c.Plan.FRR {
		add(b)
	}
	want := map[string][]netip.Prefix{}
	for node, dsts := range replaced {
		if n := c.Plan.Nodes[node]; n == nil || n.BGP == nil {
			continue // no speaker there: nothing will replace them
		}
		for _, p := range dsts {
			if originated[p.Masked()] {
				want[node] = append(want[node], p.Masked())
			}
		}
	}
	return want
}

// bgpInstalled reports whether every node's main table has a BGP route
// (nodestate.ProtoBGP, a live next hop) to each of its prefixes in want.
func (c *Controller) bgpInstalled(ctx context.Context, want map[string][]netip.Prefix) (bool, error) {
	for node, dsts := range want {
		a, err := c.agentFor(node)
		if err != nil {
			return false, err
		}
		rr := a.Caps().Routes
		if rr == nil {
			return false, agent.ErrTooOld
		}
		routes, err := rr.MainRoutes(ctx)
		if err != nil {
			return false, err
		}
		have := map[netip.Prefix]bool{}
		for _, r := range routes {
			if r.Protocol != nodestate.ProtoBGP {
				continue
			}
			for _, h := range r.NextHops {
				if !h.Dead && !h.LinkDown {
					have[r.Dst.Masked()] = true
				}
			}
		}
		for _, p := range dsts {
			if !covered(have, p) {
				return false, nil
			}
		}
	}
	return true, nil
}

// covered: a route in have is p or covers it (with routing.summaries
// under bgp, a node outside a block learns only the block's aggregate
// where its static routes named the prefixes inside).
func covered(have map[netip.Prefix]bool, p netip.Prefix) bool {
	for bits := p.Bits(); bits >= 0; bits-- {
		if have[netip.PrefixFrom(p.Addr(), bits).Masked()] {
			return true
		}
	}
	return false
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
