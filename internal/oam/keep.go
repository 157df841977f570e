package oam

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"
)

// What an agent keeps running for its node between commands (a domain's
// chains[].oam, set by apply through the OAM service's Keep): each
// sampled chain's part — the tap when the node has segments of the chain,
// the marker on its headend — and the native-SID echo responder. The
// sightings are read as they come into a ring of the last KeepRing
// events per chain, which Sightings hands out by sequence number: the
// caller (segchain status) pairs every node's sightings of a packet, since
// a per-hop latency needs two nodes' and an agent sees one.

// KeepRing is how many events (sightings and marks) a node keeps per
// sampled chain for Sightings: 80 bytes each, 1.3 MB per chain at most
// (the ring grows as events come; an agent's memory is budgeted, #33).
const KeepRing = 1 << 14

// keptEvent is a SampleEvent in the ring, without its node (the ring's).
type keptEvent struct {
	At   int64
	DA   [16]byte
	ID   [48]byte
	SL   uint8
	Kind uint8
}

// KeptSample is one chain's sampling kept on a node.
type KeptSample struct {
	Chain string
	Key   ChainKey
	// Rate > 0: the node is the headend and marks 1 in Rate.
	Rate uint32
	// Tap: the node has segments of the chain, SIDs: those segments
	// (only arrivals with one as destination are kept).
	Tap  bool
	SIDs []netip.Addr
}

func (s KeptSample) same(o KeptSample) bool {
	return s.Chain == o.Chain && s.Key == o.Key && s.Rate == o.Rate && s.Tap == o.Tap && slices.Equal(s.SIDs, o.SIDs)
}

// KeptCounts is a kept sampling's counts on its node.
type KeptCounts struct {
	Chain string
	// Marker: the node is the chain's headend (Counts are its marker's).
	Marker bool
	Counts SampleCounts
	// Arrivals: O-flagged packets of the chain (marked here, as far as the
	// node can tell: any O-flagged packet) that arrived, by destination
	// (the segment), on a tapped node.
	Arrivals map[string]uint64
}

// SightingsAfter is what Sightings returns.
type SightingsAfter struct {
	Kept   bool
	Events []SampleEvent // At: the node's monotonic clock
	Next   uint64        // the sequence number of the last event
	Lost   uint64        // events the ring let go before they were read
	Counts SampleCounts
}

type keptSample struct {
	spec KeptSample
	s    *Sampler
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	ring     []keptEvent // ring[i%KeepRing] is event i+1
	seq      uint64      // events appended
	arrivals map[string]uint64
}

// Keeper is a node's kept OAM.
type Keeper struct {
	node, ns string
	// Every is how often the sightings are read from the sampler.
	Every time.Duration

	mu      sync.Mutex
	samples map[string]*keptSample
	echo    *Echo
	// digest is the KeepSet.Digest of the set last kept whole, "" after
	// a Set that failed (what is kept is then unknown: the next apply
	// hands the set again).
	digest string
}

// NewKeeper keeps OAM for node, in namespace ns.
func NewKeeper(node, ns string) *Keeper {
	// A new Keeper keeps nothing: the empty set's.
	return &Keeper{node: node, ns: ns, Every: 100 * time.Millisecond, samples: map[string]*keptSample{},
		digest: KeepSet{}.Digest()}
}

// Digest is the KeepSet.Digest of what the node keeps, "" when unknown
// (the last Set failed).
func (k *Keeper) Digest() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.digest
}

// Set makes the node keep exactly samples and, when respond, the echo
// responder (its SIDs read again); the rest is detached. It returns how
// many SID prefixes the responder answers.
func (k *Keeper) Set(samples []KeptSample, respond bool) (n int, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.digest = ""
	defer func() {
		if err == nil {
			k.digest = KeepSet{Samples: samples, Respond: respond}.Digest()
		}
	}()
	want := map[string]KeptSample{}
	for _, s := range samples {
		if s.Chain == "" {
			return 0, errors.New("a kept sampling without a chain name")
		}
		if s.Rate == 0 && !s.Tap {
			continue // nothing for this node to do
		}
		want[s.Chain] = s
	}
	var errs []error
	for name, ks := range k.samples {
		if w, ok := want[name]; !ok || !w.same(ks.spec) {
			ks.close()
			delete(k.samples, name)
		}
	}
	for name, spec := range want {
		if k.samples[name] != nil {
			continue
		}
		ks, err := k.start(spec)
		if err != nil {
			errs = append(errs, fmt.Errorf("chain %s: %w", name, err))
			continue
		}
		k.samples[name] = ks
	}
	switch {
	case !respond && k.echo != nil:
		errs = append(errs, k.echo.Close())
		k.echo = nil
	case respond && k.echo == nil:
		e, err := AttachEcho(k.ns)
		if err != nil {
			errs = append(errs, err)
			break
		}
		k.echo = e
		n, err = e.SIDs()
		errs = append(errs, err)
	case respond:
		var err error
		n, err = k.echo.Refresh(k.ns)
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

func (k *Keeper) start(spec KeptSample) (*keptSample, error) {
	var tap map[string]string
	if spec.Tap {
		tap = map[string]string{k.node: k.ns}
	}
	head, headNS := "", ""
	if spec.Rate > 0 {
		head, headNS = k.node, k.ns
	}
	s, err := StartSampler(tap, head, headNS, spec.Key, spec.Rate)
	if err != nil {
		return nil, err
	}
	ks := &keptSample{spec: spec, s: s, stop: make(chan struct{}), done: make(chan struct{}), arrivals: map[string]uint64{}}
	go ks.run(k.Every)
	return ks, nil
}

// run moves the sampler's events into the ring until stopped.
func (ks *keptSample) run(every time.Duration) {
	defer close(ks.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ks.stop:
			return
		case <-t.C:
			ks.add(ks.s.Take())
		}
	}
}

func (ks *keptSample) add(evs []SampleEvent) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for _, e := range evs {
		if e.Kind == 0 && !slices.Contains(ks.spec.SIDs, netip.AddrFrom16(e.DA)) {
			continue // another chain's sampled packet
		}
		ke := keptEvent{At: int64(e.At), DA: e.DA, ID: e.ID, SL: e.SL, Kind: e.Kind}
		if len(ks.ring) < KeepRing {
			ks.ring = append(ks.ring, ke)
		} else {
			ks.ring[ks.seq%KeepRing] = ke
		}
		ks.seq++
		if e.Kind == 0 {
			ks.arrivals[netip.AddrFrom16(e.DA).String()]++
		}
	}
}

func (ks *keptSample) close() {
	close(ks.stop)
	<-ks.done
	ks.s.close()
}

// Sightings returns chain's events after sequence number after.
func (k *Keeper) Sightings(chain string, after uint64) (SightingsAfter, error) {
	k.mu.Lock()
	ks := k.samples[chain]
	k.mu.Unlock()
	if ks == nil {
		return SightingsAfter{}, nil
	}
	c, err := ks.s.Counts()
	if err != nil {
		return SightingsAfter{}, err
	}
	ks.add(ks.s.Take()) // what was read since the last tick
	out := SightingsAfter{Kept: true, Counts: c}
	out.Events, out.Next, out.Lost = ks.since(after)
	return out, nil
}

// since returns the ring's events after sequence number after, the last
// sequence number and how many after it the ring let go.
func (ks *keptSample) since(after uint64) (evs []SampleEvent, next, lost uint64) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	first := min(after, ks.seq)
	if ks.seq > KeepRing && first < ks.seq-KeepRing {
		first = ks.seq - KeepRing
		lost = first - after
	}
	for i := first; i < ks.seq; i++ {
		ke := ks.ring[i%KeepRing]
		evs = append(evs, SampleEvent{At: time.Duration(ke.At), DA: ke.DA, ID: ke.ID, SL: ke.SL, Kind: ke.Kind})
	}
	return evs, ks.seq, lost
}

// Counts are the node's kept samplings' counts, by chain.
func (k *Keeper) Counts() []KeptCounts {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []KeptCounts
	for name, ks := range k.samples {
		kc := KeptCounts{Chain: name, Marker: ks.spec.Rate > 0, Arrivals: map[string]uint64{}}
		kc.Counts, _ = ks.s.Counts()
		ks.add(ks.s.Take())
		ks.mu.Lock()
		if ks.spec.Tap {
			for da, n := range ks.arrivals {
				kc.Arrivals[da] = n
			}
		}
		ks.mu.Unlock()
		out = append(out, kc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Chain < out[j].Chain })
	return out
}

// Kept names the chains kept and whether the responder is.
func (k *Keeper) Kept() ([]string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for name := range k.samples {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, k.echo != nil
}

// Close detaches everything kept.
func (k *Keeper) Close() error {
	_, err := k.Set(nil, false)
	return err
}

// Responder says whether the echo responder is kept and how many SID
// prefixes it answers.
func (k *Keeper) Responder() (bool, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.echo == nil {
		return false, 0
	}
	n, _ := k.echo.SIDs()
	return true, n
}
