package oam

import (
	"context"
	"errors"
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

// multiTap merges the sightings of several taps (the agents' streams and
// the local namespaces').
type multiTap struct {
	taps []Tapper
	// grace: how long to go on reading after done says enough (the
	// agents' streams deliver late sightings of earlier hops).
	grace time.Duration
	once  sync.Once
	ch    chan Event
	errc  chan error
}

func newMultiTap(taps ...Tapper) *multiTap {
	return &multiTap{taps: taps, ch: make(chan Event, 256), errc: make(chan error, len(taps))}
}

// Collect implements Tapper. The parts keep collecting until Close.
func (m *multiTap) Collect(deadline time.Time, done func([]Event) bool) ([]Event, error) {
	m.once.Do(func() {
		for _, t := range m.taps {
			go func() {
				_, err := t.Collect(deadline, func(evs []Event) bool {
					select {
					case m.ch <- evs[len(evs)-1]:
					default: // nobody reads any more
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
	for ended := 0; ended < len(m.taps); {
		select {
		case e := <-m.ch:
			out = append(out, e)
			// Events of different taps come in any order.
			sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
			if done != nil && done(out) {
				done = nil
				timer.Reset(m.grace)
			}
		case err := <-m.errc:
			ended++
			errs = append(errs, err)
		case <-timer.C:
			return out, errors.Join(errs...)
		}
	}
	return out, errors.Join(errs...)
}

// Close implements Tapper.
func (m *multiTap) Close() error {
	errs := make([]error, len(m.taps))
	var wg sync.WaitGroup
	for i, t := range m.taps {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = t.Close() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
