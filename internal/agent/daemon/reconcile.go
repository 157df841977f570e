package daemon

import (
	"context"
	"log/slog"
	"strings"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/reconcile"
	"github.com/segchain/segchain/internal/agent/rpc/server"
	"github.com/segchain/segchain/internal/journal"
	"github.com/segchain/segchain/internal/metrics"
	"github.com/segchain/segchain/internal/nodelock"
)

// startReconcile runs `agent --reconcile` (internal/agent/reconcile) until ctx
// ends or the returned function is called (which waits for it).
func startReconcile(ctx context.Context, f agentFlags, local *lockedLocal, srv *server.Server, jr *journal.Disk, m *metrics.Metrics, log *slog.Logger) func() {
	ctx, cancel := context.WithCancel(ctx)
	links, err := local.LinkUps(ctx)
	if err != nil {
		log.Warn("reconcile: interfaces not watched, checks every interval only", "err", err)
		links = nil
	}
	who := reconcile.Who(f.node)
	r := &reconcile.Reconciler{
		Node: f.node, Store: local.intents, Agent: local, Journal: jr,
		Interval: f.reconcileInterval, Log: log, Count: m.Reconcile,
		Checked: func(a reconcile.Action) { m.ReconcileCheck(strings.ReplaceAll(a.String(), " ", "-")) },
		Begin: func(ctx context.Context) (agent.Agent, func(), error) {
			// The agent's own lease first: a controller holding it
			// wins. Then the node's lock, without waiting: a local
			// segchain command holding it wins too.
			self, err := srv.AcquireSelf(ctx, who, reconcile.Timeout)
			if err != nil {
				return nil, nil, err
			}
			set, err := nodelock.Acquire(ctx, []nodelock.Node{{Key: local.key, Name: f.node}}, nodelock.Options{NoWait: true})
			if err != nil {
				self.Release()
				return nil, nil, err
			}
			return &reconcileAgent{lockedLocal: local, self: self}, func() { set.Release(); self.Release() }, nil
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, links)
	}()
	return func() { cancel(); <-done }
}

// reconcileAgent is the node as a reconcile changes it: through the
// agent's server under the agent's own lease (the same lease check, op
// validation, journal, metrics and logs as a controller's Execute), read
// from the implementation. Its Execute reaches lockedLocal.Execute marked
// as the agent's own (server.FromSelf): the reconcile holds the node's
// lock already.
type reconcileAgent struct {
	*lockedLocal
	self *server.Self
}

func (r *reconcileAgent) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	return r.self.Execute(ctx, ops)
}

// Caps implements agent.Agent: lockedLocal's, except that each Execute
// journals its ops (through the server), and that a batch goes through
// Execute only (stepping lockedLocal directly would skip the lease).
func (r *reconcileAgent) Caps() agent.Caps {
	c := r.lockedLocal.Caps()
	c.Steps, c.JournalsEachOp = nil, true
	return c
}
