package session

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

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
// (or the preflight's), made once every early set-up has ended.

// early are the agents dialled before the plan was made.
type early struct {
	remote  map[string]*client.Client
	tickets *tickets
	err     error
	cancel  context.CancelFunc
	done    chan struct{}
	// ready counts the connections set up before a call needed them
	// (tests); failed are the others.
	ready  atomic.Int64
	mu     sync.Mutex
	failed []*client.Client
}

// warmTimeout bounds the early set-up of one connection: past it the
// first call waits for the connection as it would have.
const warmTimeout = 5 * time.Second

// dialEarly dials the domain's agents and sets their connections up in
// the background, each as soon as its client is made: making a client
// (grpc-go's channel, its resolver and balancer) is ~0.1 ms, and making
// 1,000 of them first delayed every connection by ~0.1 s (docs/scale.md,
// "Session 17").
func (s *Session) dialEarly() {
	e := &early{done: make(chan struct{})}
	s.early = e
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	n := len(s.Domain.Nodes)
	if s.Lab != nil {
		n = max(n, len(s.Lab.Agents))
	}
	// Buffered for every node: making the clients never waits on their
	// connections.
	jobs := make(chan *client.Client, n)
	var wg sync.WaitGroup
	for range remoteConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rc := range jobs {
				if ctx.Err() != nil {
					continue
				}
				cctx, cancel := context.WithTimeout(ctx, warmTimeout)
				if rc.Connect(cctx) {
					e.ready.Add(1)
				} else if ctx.Err() == nil && cctx.Err() == nil {
					e.mu.Lock()
					e.failed = append(e.failed, rc)
					e.mu.Unlock()
				}
				cancel()
			}
		}()
	}
	e.remote, e.tickets, e.err = remoteAgentsEach(s.Domain, s.Lab, nil, func(rc *client.Client) { jobs <- rc })
	close(jobs)
	if e.err != nil {
		cancel() // the session fails (agents): nothing more to set up
	}
	go func() {
		wg.Wait()
		close(e.done)
	}()
}

// use waits for the set-up to end and dials again the agents whose
// connection failed to set up: their first call then tries afresh, and
// says why it fails, as without the early dial (an agent restarting at
// that moment is not refused for an attempt made while planning).
func (e *early) use() error {
	<-e.done
	var errs []error
	for _, rc := range e.failed {
		errs = append(errs, rc.Redial())
	}
	e.failed = nil
	return errors.Join(errs...)
}

// stop ends the set-up (the session is closed) and waits for it.
func (e *early) stop() {
	e.cancel()
	<-e.done
}
