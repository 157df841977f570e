package oam

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/plan"
)

// O-flag sampling (RFC 9259 §2.1): while it runs, the chain's headend
// sets the SRH's O-flag on 1 in Rate of the chain's packets as they leave
// it (a TCX egress program, bpf/oam_sample.bpf.c), and a tracing program
// timestamps every O-flagged packet wherever a watched node receives it.
// The sightings of one packet are put together by the bytes after its SRH
// (unchanged between hops) and give per-hop counts and latencies of live
// traffic. Linux's seg6 behaviours ignore the O-flag: the sampled packets
// are forwarded like the others.

// SampleOptions tune a sampling run.
type SampleOptions struct {
	// Rate: the headend marks 1 packet in Rate (the 1st, the Rate+1-th,
	// ... of the chain's packets; at least 1).
	Rate uint32
	// Duration is how long the headend marks.
	Duration time.Duration
	// Started, if set, is called once everything is attached.
	Started func()
	// MarkOnly attaches the marker and not the tap (the benchmark's arm
	// that splits sampling's cost): the hops see nothing.
	MarkOnly bool
	// Marker chooses the headend's marker in a lab ("": the boundary
	// filter when it can, MarkerTCX, MarkerBoundary).
	Marker string
}

// Quantiles of a latency, in microseconds.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Bucket is one bar of a latency histogram: Count values ≤ LeUS (and
// above the bucket before).
type Bucket struct {
	LeUS  float64 `json:"le_us"`
	Count uint64  `json:"count"`
}

// SampleHop is one hop of the chain as the sampled packets met it: the
// headend (where they were marked) and each segment (the SRH-carrying
// hops; an SR-unaware SF behind a proxy sees no SRH, its time is in its
// proxy's next step).
type SampleHop struct {
	Kind     string `json:"kind"`
	Node     string `json:"node"`
	SID      string `json:"sid,omitempty"`
	Behavior string `json:"behavior,omitempty"`
	Service  string `json:"service,omitempty"`
	// Packets is how many sampled packets arrived here.
	Packets uint64 `json:"packets"`
	// AtUS is the time from the headend's mark to the arrival here;
	// StepUS from the previous hop's arrival (the headend: its mark).
	AtUS   *Quantiles `json:"at_us,omitempty"`
	StepUS *Quantiles `json:"step_us,omitempty"`
	// Hist is the histogram of StepUS (power-of-two buckets).
	Hist []Bucket `json:"hist,omitempty"`
}

// SampleReport is one sampling run of a chain.
type SampleReport struct {
	Chain string `json:"chain"`
	Mode  string `json:"mode"`
	Rate  uint32 `json:"rate"`
	// Packets: the chain's packets that left the headend during the run;
	// Marked: how many of them were sampled (O-flag set); HMAC: packets
	// not marked because their SRH carries an HMAC (it covers the flags).
	Packets uint64      `json:"packets"`
	Marked  uint64      `json:"marked"`
	HMAC    uint64      `json:"hmac_unmarked,omitempty"`
	Hops    []SampleHop `json:"hops"`
	// Incomplete: sampled packets not seen at every hop (lost, or still
	// on the way when the run ended).
	Incomplete uint64  `json:"incomplete"`
	TookMS     float64 `json:"took_ms"`
	// Marker is how the headend marked (MarkerBoundary, MarkerTCX; empty
	// through agents); MarkerNote why not in the boundary filter.
	Marker     string `json:"marker,omitempty"`
	MarkerNote string `json:"marker_note,omitempty"`
}

// ChainKey is the SRH a chain's packets leave the headend with: its first
// SID (Segment List[Last Entry]) and Segment List[0] (zero for H.Insert:
// the packet's own destination).
type ChainKey struct{ First, Last [16]byte }

// ChainKeyOf is pc's key.
func ChainKeyOf(pc *plan.Chain) (ChainKey, error) {
	var k ChainKey
	hops := pc.Hops
	switch pc.Mode {
	case config.ModeEncapRed, config.ModeL2EncapRed:
		// The reduced SRH leaves the first SID out (it is the DA only).
		if len(hops) < 2 {
			return k, fmt.Errorf("chain %s: a one-SID reduced encapsulation has no SRH to set the O-flag in", pc.Name)
		}
		hops = hops[1:]
	}
	if len(hops) == 0 {
		return k, fmt.Errorf("chain %s has no SIDs", pc.Name)
	}
	k.First = hops[0].SID.As16()
	if pc.Mode != config.ModeInsert {
		k.Last = hops[len(hops)-1].SID.As16()
	}
	return k, nil
}

// nsInode is the inode number of a namespace (what the tracing programs
// name it by).
func nsInode(ns string) (uint32, error) {
	st, err := os.Stat(nsutil.Path(ns))
	if err != nil {
		return 0, err
	}
	return uint32(st.Sys().(*syscall.Stat_t).Ino), nil
}

// SampleEvent is a sampled packet marked at the headend (Kind 1) or seen
// arriving at Node (Kind 0).
type SampleEvent struct {
	At   time.Duration // the node's monotonic clock; wall time once merged from agents
	Node string
	Kind uint8
	DA   [16]byte
	ID   [48]byte // the bytes after the SRH
	SL   uint8
}

// SampleCounts are the marker's counts: the chain's packets that left
// the headend, those marked, those not marked for their HMAC.
type SampleCounts struct{ Seen, Marked, HMAC uint64 }

// maxSampleEvents bounds what one run keeps (1:1 sampling of a fast
// stream would otherwise grow without end).
const maxSampleEvents = 1 << 20

// Sampler is one machine's part of a sampling run: the tap for some
// namespaces and, on the headend, the marker.
type Sampler struct {
	objs     oamSampleObjects
	rd       *ringbuf.Reader
	taps     []link.Link
	marks    []link.Link
	head     string
	nodeOf   map[uint32]string
	mu       sync.Mutex // events, between the reader and Take
	events   []SampleEvent
	readDone chan error
	// bm marks in the headend's boundary filter (nil: the TCX marker
	// marks, or nothing does).
	bm *boundaryMarker
	// Marker is how the headend marks: MarkerBoundary or MarkerTCX ("":
	// not the headend); MarkerNote says why not in the boundary filter.
	Marker     string
	MarkerNote string
}

// How a headend marks (SampleReport.Marker, SampleOptions.Marker).
const (
	// MarkerBoundary: the boundary filter marks 1 in N of the chain's
	// packets on their way in and a rule sends them to an O-flagged copy
	// of the chain's table.
	MarkerBoundary = "boundary"
	// MarkerTCX: a TCX egress program sets the O-flag on the packets
	// leaving (where the boundary filter cannot: none on the chain's way
	// in, locally originated traffic, L2 modes; or asked for).
	MarkerTCX = "tcx"
)

// Take returns the sightings and marks read so far and forgets them (a
// continuous run reads them window by window).
func (s *Sampler) Take() []SampleEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	evs := s.events
	s.events = nil
	return evs
}

// TakeBefore is Take of the events older than cutoff (monotonic clock),
// in time order; the newer stay for the next call. The headend's marks
// and the taps' sightings come from two ring buffers when the boundary
// filter marks (two readers): a packet's mark may be read after its
// first sightings, never after its own time plus the readers' delay.
func (s *Sampler) TakeBefore(cutoff time.Duration) []SampleEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	sort.SliceStable(s.events, func(i, j int) bool { return s.events[i].At < s.events[j].At })
	n := sort.Search(len(s.events), func(i int) bool { return s.events[i].At >= cutoff })
	evs := append([]SampleEvent(nil), s.events[:n]...)
	s.events = append(s.events[:0], s.events[n:]...)
	return evs
}

// Counts reads the marker's counts so far.
func (s *Sampler) Counts() (SampleCounts, error) {
	if s.bm != nil {
		return s.bm.Counts()
	}
	var v oamSampleOamChainVal
	if err := s.objs.OamChains.Lookup(uint32(0), &v); err != nil {
		return SampleCounts{}, fmt.Errorf("oam_chains: %w", err)
	}
	return SampleCounts{Seen: v.Seen, Marked: v.Marked, HMAC: v.Hmac}, nil
}

// attachAll attaches prog to every interface but loopback of namespace
// ns, at ingress first or egress last.
func attachAll(ns string, prog *ebpf.Program, at ebpf.AttachType) ([]link.Link, error) {
	var ls []link.Link
	err := nsutil.Do(ns, func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, ifc := range ifs {
			if ifc.Flags&net.FlagLoopback != 0 {
				continue
			}
			anchor := link.Tail()
			if at == ebpf.AttachTCXIngress {
				anchor = link.Head()
			}
			l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: prog, Attach: at, Anchor: anchor})
			if err != nil {
				return fmt.Errorf("%s: %w", ifc.Name, err)
			}
			ls = append(ls, l)
		}
		return nil
	})
	if err != nil {
		for _, l := range ls {
			l.Close()
		}
		return nil, err
	}
	return ls, nil
}

// StartSampler attaches the tap to the interfaces of the namespaces of
// netns (node → namespace: the nodes of the chain's segments; none: no
// tap), TCX ingress first, and, when rate > 0, the marker on every
// interface of node head's namespace headNS, last in its TCX egress
// chains, marking 1 in rate of the packets of key.
func StartSampler(netns map[string]string, head, headNS string, key ChainKey, rate uint32) (s *Sampler, err error) {
	return StartSamplerWith(netns, head, headNS, key, rate, "")
}

// StartSamplerWith is StartSampler with the headend's marker chosen:
// "" marks in the headend's boundary filter when it can (else with the
// TCX marker, Marker and MarkerNote say so), MarkerTCX with the TCX
// marker, MarkerBoundary in the boundary filter or fails.
func StartSamplerWith(netns map[string]string, head, headNS string, key ChainKey, rate uint32, marker string) (s *Sampler, err error) {
	spec, err := loadOamSample()
	if err != nil {
		return nil, fmt.Errorf("load the sampling programs' spec: %w", err)
	}
	for name, v := range map[string]any{"oam_first": key.First, "oam_last": key.Last, "oam_rate": rate} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	s = &Sampler{head: head, nodeOf: map[uint32]string{}, readDone: make(chan error, 1)}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load the sampling programs: %w", err)
	}
	sp := s // the returns below set s to nil
	defer func() {
		if err != nil {
			sp.close()
		}
	}()
	for node, ns := range netns {
		ino, err := nsInode(ns)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		s.nodeOf[ino] = node
	}
	if s.rd, err = ringbuf.NewReader(s.objs.OamSampleEvents); err != nil {
		return nil, fmt.Errorf("open the sampling ring buffer: %w", err)
	}
	for node, ns := range netns {
		ls, err := attachAll(ns, s.objs.OamSampled, ebpf.AttachTCXIngress)
		s.taps = append(s.taps, ls...)
		if err != nil {
			return nil, fmt.Errorf("node %s: attach the tap: %w", node, err)
		}
	}
	if rate > 0 && marker != MarkerTCX {
		s.bm, err = startBoundaryMarker(headNS, key, rate, func(ev boundary.SampleEvent) {
			e := SampleEvent{At: time.Duration(ev.Ts), Kind: 1, Node: s.head, ID: ev.ID}
			s.mu.Lock()
			if len(s.events) < maxSampleEvents {
				s.events = append(s.events, e)
			}
			s.mu.Unlock()
		})
		switch {
		case err == nil:
			s.Marker = MarkerBoundary
		case errors.Is(err, errFallback) && marker == "":
			s.MarkerNote = err.Error()
		default:
			return nil, fmt.Errorf("headend %s: %w", head, err)
		}
	}
	if rate > 0 && s.bm == nil {
		s.Marker = MarkerTCX
		if s.marks, err = attachAll(headNS, s.objs.OamMark, ebpf.AttachTCXEgress); err != nil {
			return nil, fmt.Errorf("headend %s: attach the marker: %w", head, err)
		}
	}
	// Read while the run goes: the ring buffer would fill otherwise.
	go func() {
		for {
			rec, err := s.rd.Read()
			if err != nil {
				if errors.Is(err, ringbuf.ErrFlushed) || errors.Is(err, ringbuf.ErrClosed) {
					err = nil
				}
				s.readDone <- err
				return
			}
			var ev oamSampleOamSampleEvent
			s.mu.Lock()
			full := len(s.events) >= maxSampleEvents
			s.mu.Unlock()
			if len(rec.RawSample) < binarySize(ev) || full {
				continue
			}
			decode(rec.RawSample, &ev)
			e := SampleEvent{At: time.Duration(ev.Ts), Kind: ev.Kind, DA: ev.Da, ID: ev.Id, SL: ev.Sl}
			if ev.Kind == 1 {
				e.Node = s.head
			} else if e.Node = s.nodeOf[ev.Netns]; e.Node == "" {
				continue
			}
			s.mu.Lock()
			s.events = append(s.events, e)
			s.mu.Unlock()
		}
	}()
	return s, nil
}

func (s *Sampler) close() {
	if s.bm != nil {
		s.bm.Close()
	}
	for _, l := range append(s.marks, s.taps...) {
		l.Close()
	}
	s.marks, s.taps = nil, nil
	if s.rd != nil {
		s.rd.Close()
	}
	s.objs.Close()
}

// Stop ends marking, lets the last marked packets arrive (100 ms), ends
// the tap and returns what the run saw and the marker's counts.
func (s *Sampler) Stop() ([]SampleEvent, SampleCounts, error) {
	defer s.close()
	var berr error
	if s.bm != nil {
		berr = s.bm.Close()
	}
	for _, l := range s.marks {
		l.Close()
	}
	s.marks = nil
	time.Sleep(100 * time.Millisecond)
	for _, l := range s.taps {
		l.Close()
	}
	s.taps = nil
	// Read what is left, then end the reader.
	if err := s.rd.Flush(); err != nil {
		return nil, SampleCounts{}, fmt.Errorf("flush the sampling ring buffer: %w", err)
	}
	if err := <-s.readDone; err != nil {
		return nil, SampleCounts{}, fmt.Errorf("read the sampling ring buffer: %w", err)
	}
	c, err := s.Counts()
	if err = errors.Join(berr, err); err != nil {
		return nil, SampleCounts{}, err
	}
	return s.Take(), c, nil
}

// Sample runs O-flag sampling on chain for o.Duration (or until ctx
// ends) and reports per hop: in the namespaces of this machine (a lab),
// or through the nodes' agents (Domain.Remote: each runs its node's
// part, the headend's marks; the sightings are put on one wall-clock
// line as trace's are).
func Sample(ctx context.Context, d Domain, chain string, o SampleOptions) (*SampleReport, error) {
	start := time.Now()
	if o.Rate == 0 {
		return nil, errors.New("sample rate: at least 1 (1 in N packets)")
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	pc, _, err := findChain(d, chain)
	if err != nil {
		return nil, err
	}
	key, err := ChainKeyOf(pc)
	if err != nil {
		return nil, err
	}
	var evs []SampleEvent
	var counts SampleCounts
	var marker, note string
	if d.Remote != nil && d.Remote.Has(pc.Ingress) {
		if o.MarkOnly {
			return nil, errors.New("MarkOnly: in a lab only")
		}
		var local map[string]string
		for n, ns := range watched(pc, d.Netns) {
			if !d.Remote.Has(n) {
				if local == nil {
					local = map[string]string{}
				}
				local[n] = ns
			}
		}
		var ls *Sampler
		if local != nil {
			if ls, err = StartSampler(local, "", "", key, 0); err != nil {
				return nil, err
			}
		}
		// The headend marks, the segments' nodes see: no other agent
		// takes part.
		nodes := []string{pc.Ingress}
		for _, n := range segmentNodes(pc) {
			if n != pc.Ingress && d.Remote.Has(n) {
				nodes = append(nodes, n)
			}
		}
		tl := NewTimeline()
		evs, counts, err = d.Remote.Sample(ctx, nodes, pc.Ingress, key, o.Rate, o.Duration, o.Started, tl)
		if ls != nil {
			lev, _, lerr := ls.Stop()
			off := tl.Local()
			for _, e := range lev {
				e.At += off
				evs = append(evs, e)
			}
			err = errors.Join(err, lerr)
		}
		if err != nil {
			return nil, err
		}
	} else {
		headNS, ok := d.Netns[pc.Ingress]
		if !ok {
			return nil, fmt.Errorf("chain %s: no namespace for its headend %s here, nor an agent", chain, pc.Ingress)
		}
		watch := watched(pc, d.Netns)
		if o.MarkOnly {
			watch = nil
		}
		s, err := StartSamplerWith(watch, pc.Ingress, headNS, key, o.Rate, o.Marker)
		if err != nil {
			return nil, err
		}
		marker, note = s.Marker, s.MarkerNote
		if o.Started != nil {
			o.Started()
		}
		select {
		case <-time.After(o.Duration):
		case <-ctx.Done():
		}
		if evs, counts, err = s.Stop(); err != nil {
			return nil, err
		}
	}
	r := &SampleReport{Chain: pc.Name, Mode: pc.Mode, Rate: o.Rate, Packets: counts.Seen, Marked: counts.Marked, HMAC: counts.HMAC, Marker: marker, MarkerNote: note}
	r.Hops, r.Incomplete = correlate(pc, evs)
	r.TookMS = ms(time.Since(start))
	return r, nil
}

// segmentNodes are the nodes of pc's segments, in order, each once: the
// only ones whose sightings a run uses (correlate), so the only ones
// tapped.
func segmentNodes(pc *plan.Chain) []string {
	var out []string
	seen := map[string]bool{}
	for _, h := range pc.Hops {
		if !seen[h.Node] {
			seen[h.Node] = true
			out = append(out, h.Node)
		}
	}
	return out
}

// watched is netns (node → namespace) limited to pc's segments' nodes.
func watched(pc *plan.Chain, netns map[string]string) map[string]string {
	out := map[string]string{}
	for _, n := range segmentNodes(pc) {
		if ns, ok := netns[n]; ok {
			out[n] = ns
		}
	}
	return out
}

// sampleHops are the hops of pc a sampling run reports: the headend, then
// each segment.
func sampleHops(pc *plan.Chain) []SampleHop {
	hops := []SampleHop{{Kind: KindHeadend, Node: pc.Ingress, Behavior: headendBehavior(pc.Mode)}}
	for i, h := range pc.Hops {
		k := KindSID
		if i == len(pc.Hops)-1 && pc.Mode != config.ModeInsert {
			k = KindEgress
		}
		hops = append(hops, SampleHop{Kind: k, Node: h.Node, SID: h.SID.String(), Behavior: h.Behavior, Service: h.Service})
	}
	return hops
}

// normID leaves out of a sighting's ID what changes on the way: an SF
// behind a proxy forwards the inner packet, its hop limit (IPv4: TTL and
// checksum) goes down.
func normID(e *SampleEvent) {
	switch e.ID[0] >> 4 {
	case 6:
		e.ID[7] = 0
	case 4:
		e.ID[8], e.ID[10], e.ID[11] = 0, 0, 0
	}
}

// correlate puts each sampled packet's sightings together (by the bytes
// after its SRH) and fills the hops: the headend, then each segment (a
// sighting on the segment's node with the segment as its destination).
func correlate(pc *plan.Chain, evs []SampleEvent) ([]SampleHop, uint64) {
	hops := sampleHops(pc)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].At < evs[j].At })
	type pkt struct {
		mark time.Duration
		at   []time.Duration // per hop, 0: not seen
	}
	var pkts []*pkt
	open := map[[48]byte]*pkt{} // the last marked packet with these bytes
	for i := range evs {
		e := &evs[i]
		normID(e)
		if e.Kind == 1 {
			p := &pkt{mark: e.At, at: make([]time.Duration, len(hops))}
			p.at[0] = e.At
			pkts = append(pkts, p)
			open[e.ID] = p
			continue
		}
		p := open[e.ID]
		if p == nil {
			continue // marked before the run's reader, or not the chain's
		}
		da := netip.AddrFrom16(e.DA).String()
		for i := 1; i < len(hops); i++ {
			if p.at[i] == 0 && hops[i].Node == e.Node && hops[i].SID == da {
				p.at[i] = e.At
				break
			}
		}
	}
	at := make([][]float64, len(hops))
	step := make([][]float64, len(hops))
	var incomplete uint64
	for _, p := range pkts {
		prev := p.mark
		whole := true
		for i := range hops {
			if p.at[i] == 0 {
				whole = false
				continue
			}
			hops[i].Packets++
			if i > 0 {
				at[i] = append(at[i], float64((p.at[i]-p.mark).Nanoseconds())/1000)
				step[i] = append(step[i], float64((p.at[i]-prev).Nanoseconds())/1000)
			}
			prev = p.at[i]
		}
		if !whole {
			incomplete++
		}
	}
	for i := 1; i < len(hops); i++ {
		hops[i].AtUS = quantiles(at[i])
		hops[i].StepUS = quantiles(step[i])
		hops[i].Hist = histogram(step[i])
	}
	return hops, incomplete
}

func quantiles(v []float64) *Quantiles {
	if len(v) == 0 {
		return nil
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		if i < 0 {
			i = 0
		}
		return math.Round(s[i]*10) / 10
	}
	return &Quantiles{P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: math.Round(s[len(s)-1]*10) / 10}
}

// histogram counts v in power-of-two µs buckets (1, 2, 4, ...), up to
// the largest bucket that has a value.
func histogram(v []float64) []Bucket {
	if len(v) == 0 {
		return nil
	}
	var bs []Bucket
	for le := 1.0; ; le *= 2 {
		bs = append(bs, Bucket{LeUS: le})
		if le >= 1<<24 {
			break
		}
	}
	for _, x := range v {
		for i := range bs {
			if x <= bs[i].LeUS || i == len(bs)-1 {
				bs[i].Count++
				break
			}
		}
	}
	last := 0
	for i, b := range bs {
		if b.Count > 0 {
			last = i
		}
	}
	return bs[:last+1]
}
