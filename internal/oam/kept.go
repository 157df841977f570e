package oam

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/plan"
)

// The controller's side of the kept OAM (chains[].oam): what each node
// keeps (KeepPlan, handed to the agents by apply, an empty set by
// destroy), and the per-hop latency of the kept sampling, paired here
// from every node's sightings (KeptSampling, for segchain status).
//
// Why the pairing is here: a hop's latency is the difference of two
// nodes' timestamps of one packet (the previous hop's and its own), and
// an agent sees its own node only. The status process reads each node's
// ring of recent sightings (Sightings), puts them on one wall-clock line
// (Timeline: one offset per kernel, as a trace does) and pairs them by the
// bytes after the SRH, as a sampling run does. The agents export what one
// node knows (the marker's counts, the arrivals per segment) on their
// /metrics.

// KeepSet is what one node keeps.
type KeepSet struct {
	Samples []KeptSample
	Respond bool
}

// Keeping reaches the kept OAM of the nodes' agents (oamsvc.Client).
type Keeping interface {
	Has(node string) bool
	Keep(ctx context.Context, node string, set KeepSet) (int, error)
	Sightings(ctx context.Context, node, chain string, after uint64) (NodeSightings, error)
}

// NodeSightings is a node's answer to Sightings, with its clocks.
type NodeSightings struct {
	SightingsAfter
	Offset time.Duration // CLOCK_REALTIME − CLOCK_MONOTONIC there
	Boot   string
	Now    time.Duration // its monotonic clock when it answered
}

// baseChain is the domain file's chain of plan chain name ("x/reverse":
// x).
func baseChain(cfg *config.Domain, name string) *config.Chain {
	if c, ok := cfg.Chains[name]; ok {
		return c
	}
	if b, ok := strings.CutSuffix(name, "/reverse"); ok {
		return cfg.Chains[b]
	}
	return nil
}

// sampledChains are the plan's chains (both directions of a bidirectional
// one) whose domain chain keeps sampling, with the rate.
func sampledChains(cfg *config.Domain, p *plan.Plan) map[string]uint32 {
	out := map[string]uint32{}
	for _, pc := range p.Chains {
		if c := baseChain(cfg, pc.Name); c != nil && c.OAM != nil && c.OAM.Sample > 0 {
			out[pc.Name] = uint32(c.OAM.Sample)
		}
	}
	return out
}

// KeepPlan is what every node of the plan keeps: for each sampled chain,
// its headend the marker, the nodes of its segments the tap (for their
// segments' SIDs); the nodes of a responding chain's segments the echo
// responder. A node absent keeps nothing.
func KeepPlan(cfg *config.Domain, p *plan.Plan) (map[string]*KeepSet, error) {
	out := map[string]*KeepSet{}
	set := func(n string) *KeepSet {
		if out[n] == nil {
			out[n] = &KeepSet{}
		}
		return out[n]
	}
	rates := sampledChains(cfg, p)
	var errs []error
	for i := range p.Chains {
		pc := &p.Chains[i]
		c := baseChain(cfg, pc.Name)
		if c == nil || c.OAM == nil {
			continue
		}
		if c.OAM.Respond {
			for _, h := range pc.Hops {
				set(h.Node).Respond = true
			}
		}
		rate, ok := rates[pc.Name]
		if !ok {
			continue
		}
		key, err := ChainKeyOf(pc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sids := map[string][]netip.Addr{}
		for _, h := range pc.Hops {
			sids[h.Node] = append(sids[h.Node], h.SID)
		}
		nodes := map[string]KeptSample{}
		for n, s := range sids {
			nodes[n] = KeptSample{Chain: pc.Name, Key: key, Tap: true, SIDs: s}
		}
		h := nodes[pc.Ingress]
		h.Chain, h.Key, h.Rate = pc.Name, key, rate
		nodes[pc.Ingress] = h
		for n, ks := range nodes {
			set(n).Samples = append(set(n).Samples, ks)
		}
	}
	for _, s := range out {
		sort.Slice(s.Samples, func(i, j int) bool { return s.Samples[i].Chain < s.Samples[j].Chain })
	}
	return out, errors.Join(errs...)
}

// KeepResult is what KeepDomain did.
type KeepResult struct {
	// Kept: node → the chains it samples for and whether it responds.
	Kept map[string]KeepSet `json:"-"`
	// Unkept are the nodes that should keep something but have no agent
	// (a lab without agents: segchain trace --sample runs sampling there).
	Unkept []string `json:"unkept,omitempty"`
	// Skipped counts the agents not handed their set: they keep it
	// already (tests).
	Skipped int `json:"-"`
}

// KeepDomain hands every agent of d its set (destroy: every agent an
// empty one).
//
// kept, if set, is the digest each agent reported of the set it keeps
// (KeepSet.Digest; "" unknown): an agent that keeps its set already is
// not handed it again, unless the set has the responder, whose SIDs are
// read again by every Keep (an apply may have changed them).
func KeepDomain(ctx context.Context, d Domain, k Keeping, agents []string, destroy bool, kept func(node string) string) (*KeepResult, error) {
	want := map[string]*KeepSet{}
	// No plan: an apply that made none (a no-op, docs/scale.md "Session
	// 16"), which it does only for a domain without chains[].oam: every
	// set empty.
	if !destroy && d.Plan == nil && d.Config != nil {
		for name, c := range d.Config.Chains {
			if c != nil && c.OAM != nil && *c.OAM != (config.ChainOAM{}) {
				return nil, fmt.Errorf("chain %s: chains[].oam kept without a plan", name)
			}
		}
	}
	if !destroy && d.Plan != nil {
		var err error
		if want, err = KeepPlan(d.Config, d.Plan); err != nil {
			return nil, err
		}
	}
	r := &KeepResult{Kept: map[string]KeepSet{}}
	for n, s := range want {
		if (len(s.Samples) > 0 || s.Respond) && (k == nil || !k.Has(n)) {
			r.Unkept = append(r.Unkept, n)
		}
	}
	sort.Strings(r.Unkept)
	if k == nil {
		return r, nil
	}
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range agents {
		s := want[n]
		if s == nil {
			s = &KeepSet{}
		}
		if kept != nil && !s.Respond {
			if dg := kept(n); dg != "" && dg == s.Digest() {
				r.Kept[n] = *s
				r.Skipped++
				continue
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := k.Keep(ctx, n, *s)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			r.Kept[n] = *s
		}()
	}
	wg.Wait()
	return r, errors.Join(errs...)
}

// KeptHop is one hop of a kept sampling in status.
type KeptHop struct {
	Kind     string     `json:"kind"`
	Node     string     `json:"node"`
	SID      string     `json:"sid,omitempty"`
	Behavior string     `json:"behavior,omitempty"`
	Packets  uint64     `json:"packets"`
	StepUS   *Quantiles `json:"step_us,omitempty"`
	AtUS     *Quantiles `json:"at_us,omitempty"`
}

// KeptChain is a chain's kept sampling as status shows it: the marker's
// counts since apply kept it and, of the sampled packets the nodes still
// hold (their last KeepRing events), per hop how many arrived and their
// latency from the previous hop (STEP) and from the mark (AT).
type KeptChain struct {
	Chain   string `json:"chain"`
	Rate    uint32 `json:"rate"`
	Packets uint64 `json:"packets"`
	Marked  uint64 `json:"marked"`
	HMAC    uint64 `json:"hmac_unmarked,omitempty"`
	// Window: the marked packets paired (those the nodes still hold,
	// marked more than Settle ago); Incomplete: of those, not seen at
	// every hop.
	Window     uint64    `json:"window"`
	Incomplete uint64    `json:"incomplete"`
	Hops       []KeptHop `json:"hops"`
	// Problems: nodes that could not be read or do not keep the chain.
	Problems []string `json:"problems,omitempty"`
}

// Settle is how long a marked packet may be on its way: status leaves
// the packets marked later out of its window.
const Settle = 500 * time.Millisecond

// KeptSampling reads every sampled chain's sightings from its nodes'
// agents and pairs them.
func KeptSampling(ctx context.Context, d Domain, k Keeping) []KeptChain {
	rates := sampledChains(d.Config, d.Plan)
	var out []KeptChain
	for i := range d.Plan.Chains {
		pc := &d.Plan.Chains[i]
		rate, ok := rates[pc.Name]
		if !ok {
			continue
		}
		out = append(out, keptChain(ctx, pc, rate, k))
	}
	return out
}

func keptChain(ctx context.Context, pc *plan.Chain, rate uint32, k Keeping) KeptChain {
	kc := KeptChain{Chain: pc.Name, Rate: rate}
	tl := NewTimeline()
	var evs []SampleEvent
	var from, upTo time.Duration // wall time: the window
	upTo = 1 << 62
	nodes := append([]string{pc.Ingress}, segmentNodes(pc)...)
	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n] {
			continue
		}
		seen[n] = true
		if k == nil {
			kc.Problems = []string{"no node has an agent: kept sampling is the agents' (in a lab without agents, segchain trace --metrics-listen ADDR CHAIN runs the chain's declared sampling)"}
			break
		}
		if !k.Has(n) {
			kc.Problems = append(kc.Problems, fmt.Sprintf("%s: no agent", n))
			continue
		}
		r, err := k.Sightings(ctx, n, pc.Name, 0)
		if err != nil {
			kc.Problems = append(kc.Problems, err.Error())
			continue
		}
		if !r.Kept {
			kc.Problems = append(kc.Problems, fmt.Sprintf("%s: does not keep the chain's sampling (apply hands it)", n))
			continue
		}
		off := tl.Offset(r.Boot, r.Offset)
		if n == pc.Ingress {
			kc.Packets, kc.Marked, kc.HMAC = r.Counts.Seen, r.Counts.Marked, r.Counts.HMAC
			upTo = min(upTo, r.Now+off-Settle)
		}
		// A ring that let events go holds only what came after its
		// oldest: the window starts there.
		if r.Next > uint64(len(r.Events)) && len(r.Events) > 0 {
			from = max(from, r.Events[0].At+off)
		}
		for _, e := range r.Events {
			e.At += off
			e.Node = n
			evs = append(evs, e)
		}
	}
	// Marks outside the window are left out (their sightings may be gone,
	// or still on the way).
	var in []SampleEvent
	for _, e := range evs {
		if e.Kind == 1 && (e.At < from || e.At > upTo) {
			continue
		}
		in = append(in, e)
	}
	hops, incomplete := correlate(pc, in)
	kc.Incomplete = incomplete
	kc.Window = hops[0].Packets
	for _, h := range hops {
		kc.Hops = append(kc.Hops, KeptHop{Kind: h.Kind, Node: h.Node, SID: h.SID, Behavior: h.Behavior, Packets: h.Packets, StepUS: h.StepUS, AtUS: h.AtUS})
	}
	return kc
}

// FollowKept exports chain's kept sampling as it comes (segchain trace
// --metrics-listen without --sample): every o.Every it reads each node's
// new sightings (Sightings after the last), puts them on one wall-clock
// line and hands o.Window the packets seen at every hop, as a continuous
// run in a lab does. A node's events are used once every node has
// answered past them (the earliest node's clock less 100 ms: an agent
// moves its tap's events into its ring every 100 ms); a packet marked
// more than o.Settle before that and not seen at every hop is
// incomplete. The marker's counts are the headend's since apply kept it.
func FollowKept(ctx context.Context, d Domain, k Keeping, chain string, o ContinuousOptions) error {
	o.defaults()
	pc, _, err := findChain(d, chain)
	if err != nil {
		return err
	}
	if _, ok := sampledChains(d.Config, d.Plan)[pc.Name]; !ok {
		return fmt.Errorf("chain %s keeps no sampling (chains[].oam.sample); give --sample N to run one", chain)
	}
	nodes := []string{pc.Ingress}
	for _, n := range segmentNodes(pc) {
		if n != pc.Ingress {
			nodes = append(nodes, n)
		}
	}
	for _, n := range nodes {
		if k == nil || !k.Has(n) {
			return fmt.Errorf("chain %s: node %s has no agent (kept sampling is the agents')", chain, n)
		}
	}
	tl := NewTimeline()
	next := map[string]uint64{}
	var pending []SampleEvent
	c := &correlator{hops: sampleHops(pc), open: map[[48]byte]*openPkt{}}
	poll := func(first bool) (SampleCounts, time.Duration, error) {
		var counts SampleCounts
		wm := time.Duration(1 << 62)
		for _, n := range nodes {
			r, err := k.Sightings(ctx, n, pc.Name, next[n])
			if err != nil {
				return counts, 0, err
			}
			if !r.Kept {
				return counts, 0, fmt.Errorf("node %s does not keep chain %s's sampling (apply hands it)", n, pc.Name)
			}
			off := tl.Offset(r.Boot, r.Offset)
			next[n] = r.Next
			wm = min(wm, r.Now+off-100*time.Millisecond)
			if n == pc.Ingress {
				counts = r.Counts
			}
			if first {
				continue // what came before the exporter
			}
			for _, e := range r.Events {
				e.At += off
				e.Node = n
				pending = append(pending, e)
			}
		}
		return counts, wm, nil
	}
	if _, _, err := poll(true); err != nil {
		return err
	}
	if o.Started != nil {
		o.Started()
	}
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		counts, wm, err := poll(false)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		sort.SliceStable(pending, func(i, j int) bool { return pending[i].At < pending[j].At })
		n := sort.Search(len(pending), func(i int) bool { return pending[i].At > wm })
		w := SampleWindow{Chain: pc.Name, Hops: append([]SampleHop(nil), c.hops...), Counts: counts,
			StepUS: make([][]float64, len(c.hops)), AtUS: make([][]float64, len(c.hops))}
		c.add(pending[:n], &w)
		pending = append([]SampleEvent(nil), pending[n:]...)
		c.expire(wm-o.Settle, &w)
		if o.Window != nil {
			o.Window(w)
		}
	}
}

// DeclaredRate is chain's chains[].oam.sample (0: none).
func DeclaredRate(d Domain, chain string) (uint32, error) {
	pc, _, err := findChain(d, chain)
	if err != nil {
		return 0, err
	}
	return sampledChains(d.Config, d.Plan)[pc.Name], nil
}

// Digest identifies what a node keeps of s: equal digests, equal kept
// OAM (Keeper.Set keeps the same). The samples a node has nothing to do
// for (no rate, no tap) are left out, as Set leaves them. The agents
// report their Keeper's (Keeper.Digest) with their state's digest, so
// that apply hands a set only to the agents that do not keep it already.
func (s KeepSet) Digest() string {
	var lines []string
	for _, k := range s.Samples {
		if k.Rate == 0 && !k.Tap {
			continue
		}
		l := fmt.Sprintf("sample %q %x %x %d %t", k.Chain, k.Key.First, k.Key.Last, k.Rate, k.Tap)
		for _, a := range k.SIDs {
			l += " " + a.String()
		}
		lines = append(lines, l)
	}
	sort.Strings(lines)
	lines = append(lines, fmt.Sprintf("respond %t", s.Respond))
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:12])
}
