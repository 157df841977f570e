package session

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/segchain/segchain/internal/agent/rpc/client"
)

// Agents dialled while the command plans. Dialling (a TCP connection, a
// TLS handshake, HTTP/2's settings) needs the domain's agents and the
// controller's keys, not the plan; planning needs one core. A plain
// command contacts every node, so Open starts setting their connections
// up, remoteConcurrency at a time, as soon as the domain is loaded, and
// the plan and the handshakes share the machine's cores instead of
// following each other (at 1,000 nodes the plan is 0.7 s of one core:
// docs/scale.md). An --changed-only apply knows whom it contacts only
// from the plan and dials after it, as before. Nothing is sent to an
// agent before the plan exists: the first call is still the digests'
// (or the preflight's).

// early are the agents dialled before the plan was made.
type early struct {
	remote  map[string]*client.Client
	tickets *tickets
	err     error
	cancel  context.CancelFunc
	done    chan struct{}
	// ready counts the connections set up before a call needed them
	// (tests).
	ready atomic.Int64
}

// dialEarly dials the domain's agents and sets their connections up in
// the background.
func (s *Session) dialEarly() {
	e := &early{done: make(chan struct{})}
	e.remote, e.tickets, e.err = remoteAgents(s.Domain, s.Lab, nil)
	s.early = e
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		defer close(e.done)
		if e.err != nil {
			return
		}
		sem := make(chan struct{}, remoteConcurrency)
		var wg sync.WaitGroup
		for _, rc := range e.remote {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return
			}
			wg.Add(1)
			go func(rc *client.Client) {
				defer func() { <-sem; wg.Done() }()
				cctx, cancel := context.WithTimeout(ctx, client.DefaultTimeout)
				defer cancel()
				if rc.Connect(cctx) {
					e.ready.Add(1)
				}
			}(rc)
		}
		wg.Wait()
	}()
}

// stop ends the set-up (the session is closed) and waits for it.
func (e *early) stop() {
	e.cancel()
	<-e.done
}
