package oam

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Remote is how a trace reaches nodes that have an agent (-f FILE with
// nodes.NAME.agent, or a lab brought up with --agents): each agent taps
// its own node and streams the probe's sightings, the headend's agent
// injects the probe, every agent reads its node's IP statistics
// (oamsvc.Client over the OAM gRPC service). Sightings of different
// machines are put on one time line by each node's wall clock
// (CLOCK_REALTIME): across machines the times are as good as their clock
// synchronisation; on one kernel (a lab) they are exact.
type Remote interface {
	// Has reports whether node is reached through its agent.
	Has(node string) bool
	// Tap starts the tap of every node of nodes and returns once each is
	// attached; its events' At is wall time (Unix ns) on tl.
	Tap(ctx context.Context, nodes []string, magic uint64, max time.Duration, tl *Timeline) (Tapper, error)
	// Inject hands packet to node's stack as received on iface.
	Inject(ctx context.Context, node, iface string, packet []byte) error
	// Stats reads the IP statistics of each node of nodes.
	Stats(ctx context.Context, nodes []string) (map[string]map[string]uint64, error)
	// Sample runs each node's part of an O-flag sampling run for dur:
	// every node of nodes sees, head marks 1 in rate of key's packets;
	// started is called when all are attached and head marks. Events'
	// At is wall time on tl.
	Sample(ctx context.Context, nodes []string, head string, key ChainKey, rate uint32, dur time.Duration, started func(), tl *Timeline) ([]SampleEvent, SampleCounts, error)
}

// Flusher is a Tapper whose Collect can be ended without losing a
// sighting: after Flush, Collect returns once it has delivered every
// sighting made before the call (the ring buffer read to its end, the
// agents' streams ended after theirs). A trace flushes its tap when the
// probe has reached the last hop: a sighting of an earlier hop was made
// before that one, so none is lost, whatever the load (a margin of time
// after the last hop lost the egress's on a loaded machine).
type Flusher interface {
	Flush()
}

// wallTap shifts a local tap's timestamps to wall time, to be merged
// with the agents'.
type wallTap struct {
	Tapper
	off time.Duration
}

func (w wallTap) Collect(deadline time.Time, done func([]Event) bool) ([]Event, error) {
	var out []Event
	_, err := w.Tapper.Collect(deadline, func(evs []Event) bool {
		e := evs[len(evs)-1]
		e.At += w.off
		out = append(out, e)
		return done != nil && done(out)
	})
	return out, err
}

// Flush implements Flusher.
func (w wallTap) Flush() {
	if f, ok := w.Tapper.(Flusher); ok {
		f.Flush()
	}
}

// multiTap merges the sightings of several taps (the agents' streams and
// the local namespaces').
type multiTap struct {
	taps []Tapper
	// grace: how long a part that is not a Flusher is read after done
	// says enough (or the deadline passes).
	grace time.Duration
	// flushMax bounds the wait for flushed parts to end (an agent that
	// neither ends its stream nor fails): reaching it is an error.
	flushMax time.Duration
	once     sync.Once
	ch       chan Event
	errc     chan error
	quit     chan struct{}
	closing  sync.Once
}

func newMultiTap(taps ...Tapper) *multiTap {
	return &multiTap{taps: taps, grace: 100 * time.Millisecond, flushMax: 10 * time.Second,
		ch: make(chan Event, 256), errc: make(chan error, len(taps)), quit: make(chan struct{})}
}

// Collect implements Tapper: when done says enough, or at the deadline,
// it flushes every part and returns once each has delivered its
// sightings (a part that is not a Flusher: after grace).
func (m *multiTap) Collect(deadline time.Time, done func([]Event) bool) ([]Event, error) {
	m.once.Do(func() {
		for _, t := range m.taps {
			go func() {
				_, err := t.Collect(deadline, func(evs []Event) bool {
					select {
					case m.ch <- evs[len(evs)-1]:
					case <-m.quit: // closed: nobody reads any more
					}
					return false
				})
				m.errc <- err
			}()
		}
	})
	var out []Event
	var errs []error
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	flushed, allFlush := false, true
	flush := func() {
		flushed = true
		for _, t := range m.taps {
			if f, ok := t.(Flusher); ok {
				f.Flush()
			} else {
				allFlush = false
			}
		}
		if allFlush {
			timer.Reset(m.flushMax)
		} else {
			timer.Reset(m.grace)
		}
	}
loop:
	for ended := 0; ended < len(m.taps); {
		select {
		case e := <-m.ch:
			out = append(out, e)
			if done != nil && done(out) {
				done = nil
				if !flushed {
					flush()
				}
			}
		case err := <-m.errc:
			ended++
			errs = append(errs, err)
		case <-timer.C:
			if !flushed {
				flush()
				continue
			}
			if allFlush {
				errs = append(errs, fmt.Errorf("the taps did not end within %v of their flush", m.flushMax))
			}
			break loop
		}
	}
	// A part's last sightings were queued before it ended.
	for {
		select {
		case e := <-m.ch:
			out = append(out, e)
			continue
		default:
		}
		break
	}
	// Events of different taps come in any order.
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out, errors.Join(errs...)
}

// Close implements Tapper.
func (m *multiTap) Close() error {
	m.closing.Do(func() { close(m.quit) })
	errs := make([]error, len(m.taps))
	var wg sync.WaitGroup
	for i, t := range m.taps {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = t.Close() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
