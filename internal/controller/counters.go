package controller

import "context"

// Counters reads only the per-SID counters of every node (no observation,
// routes or diff), Concurrency nodes at a time: what status --watch
// samples each interval. A node that cannot be read has its Error set.
func (c *Controller) Counters(ctx context.Context) []NodeStatus {
	names := map[string]string{}
	for _, s := range c.Plan.SIDs {
		names[s.Node+" "+s.SID.String()] = s.Service
	}
	nodes := c.nodes()
	out := make([]NodeStatus, len(nodes))
	c.each(ctx, nodes, func(ctx context.Context, i int, n string) error {
		ns := &out[i]
		ns.Node = n
		a, err := c.agentFor(n)
		if err == nil {
			sids, cerr := a.Counters(ctx)
			for _, s := range sids {
				ns.SIDs = append(ns.SIDs, SIDStatus{SIDCounters: s, Service: names[n+" "+s.SID.String()]})
			}
			err = cerr
		}
		if err != nil {
			ns.Error = err.Error()
			ns.State = StateUnknown
		}
		return nil
	})
	return out
}
