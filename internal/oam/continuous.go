package oam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/metrics"
)

// Continuous O-flag sampling (segchain trace --sample N --metrics-listen
// ADDR): the marker and the tap stay attached for the whole run, and the
// sightings are correlated window by window as they come, each sampled
// packet handed over once it has been seen at every hop. Its consumer
// (internal/metrics' Sampling) keeps per-hop histograms for Prometheus.

// ContinuousOptions tune a continuous run.
type ContinuousOptions struct {
	// Rate: the headend marks 1 packet in Rate (at least 1).
	Rate uint32
	// Every is how often the sightings are correlated (default 1 s).
	Every time.Duration
	// Settle is how long a sampled packet may take to reach the last
	// hop before it counts as incomplete (default 1 s).
	Settle time.Duration
	// Window receives each window's results (called from the run's
	// goroutine, in order; the last one when the run ends).
	Window func(SampleWindow)
	// Started, if set, is called once everything is attached.
	Started func()
}

// defaults gives Every and Settle their default of a second.
func (o *ContinuousOptions) defaults() {
	if o.Every <= 0 {
		o.Every = time.Second
	}
	if o.Settle <= 0 {
		o.Settle = time.Second
	}
}

// SampleWindow is what one window of a continuous run completed.
type SampleWindow struct {
	Chain string
	// Hops are the chain's hops (the headend first); Packets is how
	// many sampled packets completed this window (the same for all).
	Hops []SampleHop
	// StepUS[i], AtUS[i]: each completed packet's latency to hop i from
	// the previous hop and from the headend's mark, in µs (i ≥ 1).
	StepUS, AtUS [][]float64
	// Incomplete: sampled packets given up this window (not seen at
	// every hop within Settle).
	Incomplete uint64
	// Counts are the marker's counts since the run started.
	Counts SampleCounts
}

// openPkt is a sampled packet not yet seen at every hop.
type openPkt struct {
	at   []time.Duration // per hop, 0: not yet
	seen int
}

// correlator follows sampled packets across windows.
type correlator struct {
	hops []SampleHop
	open map[[48]byte]*openPkt
}

// add feeds one window's events (in the order the ring buffer gave them:
// a mark before its sightings) and fills w with the packets completed.
func (c *correlator) add(evs []SampleEvent, w *SampleWindow) {
	for i := range evs {
		e := &evs[i]
		normID(e)
		if e.Kind == 1 {
			if old := c.open[e.ID]; old != nil {
				w.Incomplete++ // the same bytes marked again before it arrived
			}
			p := &openPkt{at: make([]time.Duration, len(c.hops))}
			p.at[0] = e.At
			c.open[e.ID] = p
			continue
		}
		p := c.open[e.ID]
		if p == nil {
			continue
		}
		da := netip.AddrFrom16(e.DA).String()
		for i := 1; i < len(c.hops); i++ {
			if p.at[i] == 0 && c.hops[i].Node == e.Node && c.hops[i].SID == da {
				p.at[i] = e.At
				p.seen++
				break
			}
		}
		if p.seen == len(c.hops)-1 {
			delete(c.open, e.ID)
			for i := 1; i < len(c.hops); i++ {
				w.StepUS[i] = append(w.StepUS[i], float64((p.at[i]-p.at[i-1]).Nanoseconds())/1000)
				w.AtUS[i] = append(w.AtUS[i], float64((p.at[i]-p.at[0]).Nanoseconds())/1000)
			}
			for i := range w.Hops {
				w.Hops[i].Packets++
			}
		}
	}
}

// expire gives up the packets marked before cutoff (monotonic clock).
func (c *correlator) expire(cutoff time.Duration, w *SampleWindow) {
	for id, p := range c.open {
		if p.at[0] < cutoff {
			delete(c.open, id)
			w.Incomplete++
		}
	}
}

// MonoNow is CLOCK_MONOTONIC now (bpf_ktime_get_ns's clock).
func MonoNow() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// SampleContinuous samples chain until ctx ends, in the namespaces of
// this machine (a lab without agents), and hands each window's completed
// packets to o.Window.
func SampleContinuous(ctx context.Context, d Domain, chain string, o ContinuousOptions) error {
	if o.Rate == 0 {
		return errors.New("sample rate: at least 1 (1 in N packets)")
	}
	o.defaults()
	pc, _, err := findChain(d, chain)
	if err != nil {
		return err
	}
	if d.Remote != nil && d.Remote.Has(pc.Ingress) {
		return fmt.Errorf("chain %s: continuous sampling runs in a lab's namespaces; through agents, use --duration runs", chain)
	}
	headNS, ok := d.Netns[pc.Ingress]
	if !ok {
		return fmt.Errorf("chain %s: no namespace for its headend %s here", chain, pc.Ingress)
	}
	key, err := ChainKeyOf(pc)
	if err != nil {
		return err
	}
	s, err := StartSampler(watched(pc, d.Netns), pc.Ingress, headNS, key, o.Rate)
	if err != nil {
		return err
	}
	if o.Started != nil {
		o.Started()
	}
	c := &correlator{hops: sampleHops(pc), open: map[[48]byte]*openPkt{}}
	window := func(evs []SampleEvent, counts SampleCounts, cutoff time.Duration) {
		w := SampleWindow{Chain: pc.Name, Hops: append([]SampleHop(nil), c.hops...), Counts: counts,
			StepUS: make([][]float64, len(c.hops)), AtUS: make([][]float64, len(c.hops))}
		c.add(evs, &w)
		c.expire(cutoff, &w)
		if o.Window != nil {
			o.Window(w)
		}
	}
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			counts, err := s.Counts()
			if err != nil {
				s.Stop()
				return err
			}
			// Events settle 100 ms (the marks' reader and the taps'
			// may hand a packet's events over in either order).
			window(s.TakeBefore(MonoNow()-100*time.Millisecond), counts, MonoNow()-o.Settle)
		case <-ctx.Done():
			// Stop lets the last marked packets arrive, then reads all.
			evs, counts, err := s.Stop()
			if err != nil {
				return err
			}
			sort.SliceStable(evs, func(i, j int) bool { return evs[i].At < evs[j].At })
			window(evs, counts, time.Duration(1<<62))
			return nil
		}
	}
}

// Export adds w to m: every completed packet's latencies at each hop
// after the headend, and the marker's counts.
func (w SampleWindow) Export(m *metrics.Sampling) {
	for i := 1; i < len(w.Hops); i++ {
		h := metrics.Hop{Index: i, Kind: w.Hops[i].Kind, Node: w.Hops[i].Node, SID: w.Hops[i].SID}
		for k := range w.StepUS[i] {
			m.Observe(w.Chain, h, w.StepUS[i][k]/1e6, w.AtUS[i][k]/1e6)
		}
	}
	m.Counts(w.Chain, w.Counts.Seen, w.Counts.Marked, w.Counts.HMAC, w.Incomplete)
}
