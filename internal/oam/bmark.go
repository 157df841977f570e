package oam

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
)

// Marking in the boundary filter (docs/oam.md "O-flag sampling"): the
// headend's boundary_in gives 1 in Rate of the chain's packets a mark; a
// rule "<the chain's selectors> fwmark M lookup M", one priority before
// the chain's own, sends them to table M, a copy of the chain's table
// whose route puts the O-flag in the SRH. The kernel encapsulates (and
// signs) the marked packet as any other: no program on the way out, and
// an HMAC chain can be sampled.

// ProtoSample stamps the O-flagged tables' routes and rules: neither the
// domain's (nodestate.Proto) nor another kind's, so apply's observation
// never takes them for drift; their sampler owns them.
const ProtoSample = 0xcd // 205

// sampleMarkBase is the top byte of the marks (and table numbers) of
// O-flagged tables: mark = base | slot<<16 | the chain's table.
const sampleMarkBase = 0x2a000000

func sampleMark(slot uint32, table int) uint32 {
	return sampleMarkBase | slot<<16 | uint32(table)&0xffff
}

// errFallback wraps why a headend samples with the TCX marker instead.
var errFallback = errors.New("boundary marking unavailable")

// bnode is one namespace's boundary sampling, shared by the samplers of
// this process (an agent keeps several chains): one reader of the ring
// buffer, the selectors read, changed and written under bmu.
type bnode struct {
	samp *boundary.Sampling
	ifs  []int
	rd   *ringbuf.Reader
	mu   sync.Mutex // subs, between the reader and the samplers (bmu may be held)
	subs map[uint32]func(boundary.SampleEvent)
	refs int
	done chan struct{}
	lock *sampleLock // this process's hold on the node's sampling (samplelock.go)
	// drained, while drain waits, is closed by the reader once it has
	// handed out every record written before the flush (bn.mu).
	drained chan struct{}
	// watch triggers the markers' resyncs (bwatch.go); nil: the
	// subscription failed and the markers poll every second.
	watch *rtWatch
	kicks map[uint32]chan struct{} // each marker's trigger, by slot (bn.mu)
	// resyncs counts the markers' reads of the routes and rules after
	// their start (BoundaryResyncs).
	resyncs atomic.Uint64
}

// kickAll triggers every marker's resync; a marker already triggered
// stays so once (a burst is one trigger).
func (bn *bnode) kickAll(bool) {
	bn.mu.Lock()
	defer bn.mu.Unlock()
	for _, k := range bn.kicks {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

// BoundaryResyncs is how many times this process's boundary markers in
// ns read the chains' routes and rules again since the first of them
// started there (ok false: none marks in ns now). A test's window on
// following by notification: nothing changed, nothing read.
func BoundaryResyncs(ns string) (n uint64, ok bool) {
	bmu.Lock()
	defer bmu.Unlock()
	bn := bnodes[ns]
	if bn == nil {
		return 0, false
	}
	return bn.resyncs.Load(), true
}

// drain hands out every record already in the ring buffer (bmu held):
// a sampler that stops must get the marks of its last packets before
// it unsubscribes — bulk TCP's last marks were lost so.
func (bn *bnode) drain() {
	d := make(chan struct{})
	bn.mu.Lock()
	bn.drained = d
	bn.mu.Unlock()
	if bn.rd.Flush() != nil {
		return
	}
	select {
	case <-d:
	case <-bn.done: // the reader ended
	case <-time.After(time.Second):
	}
}

var (
	bmu    sync.Mutex
	bnodes = map[string]*bnode{}
)

// boundaryMarker is one chain's marking in a headend's boundary filter.
type boundaryMarker struct {
	ns     string
	key    ChainKey
	rate   uint32
	slot   uint32
	cur    markState // what it holds
	last   SampleCounts
	closed bool
	kick   chan struct{} // a route or rule changed (bnode.kickAll)
	stop   chan struct{} // ends follow
	done   chan struct{}
	once   sync.Once
}

// routeKey is the ChainKey of a headend route's SRH and whether its
// mode can be marked at ingress (L2 modes: the frame, not an IP packet,
// is what the filter would match).
func routeKey(e *nodestate.Seg6Encap) (k ChainKey, ok bool) {
	segs := e.Segs
	switch e.Mode {
	case "encap.red":
		if len(segs) < 2 {
			return k, false
		}
		segs = segs[1:]
	case "encap", "inline":
	default:
		return k, false
	}
	if len(segs) == 0 {
		return k, false
	}
	k.First = segs[0].As16()
	if e.Mode != "inline" {
		k.Last = segs[len(segs)-1].As16()
	}
	return k, true
}

// markState is what one chain's marking holds on its headend: the
// O-flagged copies of its routes, the rules into them (narrowed by
// marks[i]) and its selectors in the filter.
type markState struct {
	routes []nodestate.Route
	rules  []nodestate.Rule
	marks  []uint32
	sels   []boundary.SampleSel
}

func (w markState) routeKeys() map[string]nodestate.Route {
	out := map[string]nodestate.Route{}
	for _, r := range w.routes {
		out[r.String()] = r
	}
	return out
}

func (w markState) ruleKeys() map[string]int {
	out := map[string]int{}
	for i, r := range w.rules {
		out[fmt.Sprintf("%s fwmark %#x", r, w.marks[i])] = i
	}
	return out
}

// same reports whether w and o hold the same routes, rules and selectors:
// what install compares (a route's or a rule's whole text, its O-rule's
// mark included), whatever order the rules were read in; the selectors
// in order (the filter takes the first that matches).
func (w markState) same(o markState) bool {
	return sameKeys(w.routeKeys(), o.routeKeys()) && sameKeys(w.ruleKeys(), o.ruleKeys()) && slices.Equal(w.sels, o.sels)
}

func sameKeys[V any](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// desired reads, in h's namespace, the headend routes whose SRH is key's
// and the rules into their tables (the chain's selectors), and returns
// what marking them in slot at rate holds. An error wrapping errFallback:
// the filter cannot mark this chain.
func desired(h *dataplane.Handle, key ChainKey, rate, slot uint32, ifs []int) (markState, error) {
	var w markState
	routes, err := h.Routes()
	if err != nil {
		return w, err
	}
	tables := map[int]uint32{} // chain table → id offset
	for _, r := range routes {
		if r.Seg6 == nil {
			continue
		}
		k, ok := routeKey(r.Seg6)
		if k != key {
			continue
		}
		if !ok {
			return w, fmt.Errorf("%w: %s is an L2 encapsulation", errFallback, r)
		}
		tables[r.Table] = 0
		if r.Seg6.Mode == "inline" {
			tables[r.Table] = 40 // H.Insert: the taps report the bytes after the SRH, the transport header
		}
	}
	if len(tables) == 0 {
		return w, fmt.Errorf("%w: no headend route with the chain's SRH", errFallback)
	}
	rules, err := h.Rules()
	if err != nil {
		return w, err
	}
	for _, r := range rules {
		if _, ok := tables[r.Table]; !ok || r.Table == 0 {
			continue
		}
		mark := sampleMark(slot, r.Table)
		c, err := selectorOf(h, r, slot, mark)
		if err != nil {
			return w, err
		}
		if c.Ifindex != 0 && !slices.Contains(ifs, c.Ifindex) {
			return w, fmt.Errorf("%w: no boundary filter on %s, the chain's iif", errFallback, r.Iif)
		}
		c.Rate, c.IDOff = rate, tables[r.Table]
		w.sels = append(w.sels, c)
		o := r
		o.Priority-- // before the chain's own, as pools' rules (mine.Priority above: the chain's own)
		o.Table = int(mark)
		o.Proto = ProtoSample
		w.rules = append(w.rules, o)
		w.marks = append(w.marks, mark)
	}
	if len(w.rules) == 0 {
		return w, fmt.Errorf("%w: no rule selects the chain", errFallback)
	}
	// A bridge's or a bond's port hands what it receives to its master,
	// where the packet passes the filter again (the rules' iif: the
	// master): a selector without iif counted it twice, so a port whose
	// master the filter covers too counts nothing. (A VRF's port is not
	// one: the packet does not pass the VRF device's TCX.)
	fams := map[int]bool{}
	for _, c := range w.sels {
		if c.Ifindex == 0 {
			fams[c.Family] = true
		}
	}
	for _, ix := range ifs {
		if len(fams) == 0 {
			break
		}
		m, kind, err := h.LinkMaster(ix)
		if err != nil {
			return w, err
		}
		if m == 0 || (kind != "bridge" && kind != "bond" && kind != "team") || !slices.Contains(ifs, m) {
			continue
		}
		for _, f := range []int{4, 6} {
			if fams[f] {
				w.sels = append(w.sels, boundary.SampleSel{Family: f, Ifindex: ix, Slot: boundary.SkipSlot, Mark: slot})
			}
		}
	}
	// Another chain's rule that comes first for some of this chain's
	// packets: a selector that stops the search, so that they are not
	// counted (they leave by that chain's table).
	for _, r := range rules {
		if _, ok := tables[r.Table]; ok || r.Table == 0 || r.Protocol() != nodestate.Proto {
			continue
		}
		for _, mine := range w.rules {
			if r.Priority <= mine.Priority && rulesOverlap(r, mine) {
				c, err := selectorOf(h, r, boundary.SkipSlot, slot)
				if err != nil {
					return w, err
				}
				w.sels = append(w.sels, c)
				break
			}
		}
	}
	for _, r := range routes {
		if _, ok := tables[r.Table]; !ok {
			continue
		}
		o := r
		o.Table = int(sampleMark(slot, r.Table))
		o.Proto, o.Owner = 0, ""
		if r.Seg6 != nil {
			e := *r.Seg6
			e.OFlag = true
			o.Seg6 = &e
		}
		w.routes = append(w.routes, o)
	}
	return w, nil
}

// startBoundaryMarker marks 1 in rate of the packets of the chain whose
// headend routes in ns have key (their tables' rules are the chain's
// selectors), reporting each marked packet to onMark, and follows the
// chain's routes and rules (an apply that changes them: the namespace's
// route and rule notifications trigger a resync, follow). An
// error wrapping errFallback: the TCX marker is the way (no boundary
// filter that marks on this node, an L2 chain, too many selectors).
func startBoundaryMarker(ns string, key ChainKey, rate uint32, onMark func(boundary.SampleEvent)) (*boundaryMarker, error) {
	h, err := dataplane.Open(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	// Before the filter: a chain it cannot mark falls back at once.
	if _, err := desired(h, key, rate, 0, nil); err != nil && errors.Is(err, errFallback) && !strings.Contains(err.Error(), "iif") {
		return nil, err
	}

	bmu.Lock()
	defer bmu.Unlock()
	bn := bnodes[ns]
	if bn == nil {
		// One process samples a headend at a time (its agent, or
		// segchain trace in a lab without agents): another one's
		// sampling falls back to the TCX marker rather than clear it.
		lock, err := lockSampling(ns)
		if errors.Is(err, errSampledElsewhere) {
			return nil, fmt.Errorf("%w: %w", errFallback, err)
		}
		if err != nil {
			return nil, err
		}
		samp, ifs, err := boundary.OpenSampling(ns)
		if err != nil {
			lock.unlock()
			if errors.Is(err, boundary.ErrNoSampling) {
				return nil, fmt.Errorf("%w: %w", errFallback, err)
			}
			return nil, err
		}
		// The first sampler of this process on the node: what a sampler
		// that died left (its selectors, rules and tables) goes.
		if err := samp.Set(nil); err != nil {
			samp.Close()
			lock.unlock()
			return nil, err
		}
		if err := removeSampleState(h); err != nil {
			samp.Close()
			lock.unlock()
			return nil, err
		}
		bn = &bnode{samp: samp, ifs: ifs, subs: map[uint32]func(boundary.SampleEvent){}, done: make(chan struct{}), lock: lock,
			kicks: map[uint32]chan struct{}{}}
		if bn.rd, err = ringbuf.NewReader(samp.Events()); err != nil {
			samp.Close()
			lock.unlock()
			return nil, fmt.Errorf("boundary sampling ring buffer: %w", err)
		}
		// Subscribed before any marker reads the chain: a change after
		// that read is a trigger. Without it: polled (follow).
		bn.watch, _ = watchRoutes(ns, bn.kickAll)
		go bn.read()
		bnodes[ns] = bn
	}
	bn.refs++
	m := &boundaryMarker{ns: ns, key: key, rate: rate, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			bn.release(ns)
		}
	}()
	cur, err := bn.samp.Get()
	if err != nil {
		return nil, err
	}
	used := map[uint32]bool{}
	for _, c := range cur {
		used[c.Owner()] = true
	}
	bn.mu.Lock()
	for s := range bn.subs {
		used[s] = true
	}
	bn.mu.Unlock()
	m.slot = boundary.MaxSampleSels
	for s := uint32(0); s < boundary.MaxSampleSels; s++ {
		if !used[s] {
			m.slot = s
			break
		}
	}
	if m.slot == boundary.MaxSampleSels {
		return nil, fmt.Errorf("%w: the boundary filter samples %d chains already", errFallback, boundary.MaxSampleSels)
	}
	// Triggered from before the read: a change after it is followed.
	bn.mu.Lock()
	bn.kicks[m.slot] = m.kick
	bn.mu.Unlock()
	w, err := desired(h, key, rate, m.slot, bn.ifs)
	if err != nil {
		bn.mu.Lock()
		delete(bn.kicks, m.slot)
		bn.mu.Unlock()
		return nil, err
	}
	bn.mu.Lock()
	bn.subs[m.slot] = onMark
	bn.mu.Unlock()
	if err := m.install(h, bn, w); err != nil {
		bn.mu.Lock()
		delete(bn.subs, m.slot)
		delete(bn.kicks, m.slot)
		bn.mu.Unlock()
		m.cur = w // what of it was added goes
		m.undo(h)
		return nil, err
	}
	ok = true
	go m.follow(bn.watch != nil)
	return m, nil
}

// install makes w what m holds (bmu held): the new tables and rules
// first, then the selectors, then what w no longer has goes — a marked
// packet always finds its table.
func (m *boundaryMarker) install(h *dataplane.Handle, bn *bnode, w markState) error {
	var errs []error
	oldRoutes, newRoutes := m.cur.routeKeys(), w.routeKeys()
	oldRules, newRules := m.cur.ruleKeys(), w.ruleKeys()
	for k, r := range newRoutes {
		if _, ok := oldRoutes[k]; ok {
			continue
		}
		if err := h.ReplaceRouteAs(r, ProtoSample); err != nil {
			return err
		}
	}
	for k, i := range newRules {
		if _, ok := oldRules[k]; ok {
			continue
		}
		if err := h.AddMarkRule(w.rules[i], w.marks[i]); err != nil {
			return err
		}
	}
	cur, err := bn.samp.Get()
	if err != nil {
		return err
	}
	var sels []boundary.SampleSel
	for _, c := range cur {
		if c.Owner() != m.slot {
			sels = append(sels, c)
		}
	}
	sels = append(sels, w.sels...)
	if len(sels) > boundary.MaxSampleSels {
		return fmt.Errorf("%w: %d sampled selectors on the node, at most %d", errFallback, len(sels), boundary.MaxSampleSels)
	}
	sort.SliceStable(sels, func(i, j int) bool { return sels[i].Prio < sels[j].Prio })
	if err := bn.samp.Set(sels); err != nil {
		return err
	}
	for k, i := range oldRules {
		if _, ok := newRules[k]; !ok {
			errs = append(errs, h.DeleteMarkRule(m.cur.rules[i], m.cur.marks[i]))
		}
	}
	place := func(r nodestate.Route) string { return fmt.Sprintf("%d %s %d", r.Table, r.Dst, r.Metric) }
	kept := map[string]bool{}
	for _, r := range newRoutes {
		kept[place(r)] = true
	}
	for _, r := range oldRoutes {
		// A route replaced in place (same table, destination and
		// metric) is the new one: deleting it would delete that.
		if kept[place(r)] {
			continue
		}
		if err := h.DeleteRouteAs(r, ProtoSample); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, err)
		}
	}
	m.cur = w
	return errors.Join(errs...)
}

// Following the chain: a burst of notifications (an apply rewriting a
// chain's routes and rules) is one resync once they have been quiet for
// settleQuiet (at most settleMax after the first); a safety resync every
// safetyResync catches what a notification could not say.
const (
	settleQuiet  = 100 * time.Millisecond
	settleMax    = time.Second
	safetyResync = 30 * time.Second
	pollResync   = time.Second // without notifications (the subscription failed)
)

// follow makes the O-flagged copies follow the chain's routes and rules
// until Close (an apply that changed the chain's SIDs, next hop or
// selectors without changing its key): on a notification (events), or
// every second without.
func (m *boundaryMarker) follow(events bool) {
	defer close(m.done)
	every := safetyResync
	if !events {
		every = pollResync
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
			_ = m.resync()
		case <-m.kick:
			if !m.settle() {
				return
			}
			_ = m.resync()
			t.Reset(every)
		}
	}
}

// settle waits until the notifications have been quiet for settleQuiet,
// at most settleMax; false: the marker is closing.
func (m *boundaryMarker) settle() bool {
	quiet, most := time.NewTimer(settleQuiet), time.NewTimer(settleMax)
	defer quiet.Stop()
	defer most.Stop()
	for {
		select {
		case <-m.stop:
			return false
		case <-m.kick:
			quiet.Reset(settleQuiet)
		case <-quiet.C:
			return true
		case <-most.C:
			return true
		}
	}
}

func (m *boundaryMarker) resync() error {
	h, err := dataplane.Open(m.ns)
	if err != nil {
		return err
	}
	defer h.Close()
	bmu.Lock()
	defer bmu.Unlock()
	bn := bnodes[m.ns]
	if m.closed || bn == nil {
		return nil
	}
	bn.resyncs.Add(1)
	w, err := desired(h, m.key, m.rate, m.slot, bn.ifs)
	if err != nil || w.same(m.cur) {
		return err // the chain gone: its copies stay until the sampler stops
	}
	return m.install(h, bn, w)
}

// rulesOverlap reports whether some packet matches both rules.
func rulesOverlap(a, b nodestate.Rule) bool {
	pfx := func(x, y netip.Prefix) bool { return !x.IsValid() || !y.IsValid() || x.Overlaps(y) }
	prt := func(x, y nodestate.PortRange) bool {
		if x.IsZero() || y.IsZero() {
			return true
		}
		xp, yp := ports(x), ports(y)
		return xp[0] <= yp[1] && yp[0] <= xp[1]
	}
	return a.Family == b.Family && pfx(a.Src, b.Src) && pfx(a.Dst, b.Dst) &&
		(a.IPProto == 0 || b.IPProto == 0 || a.IPProto == b.IPProto) &&
		prt(a.Sport, b.Sport) && prt(a.Dport, b.Dport) && (a.Iif == "" || b.Iif == "" || a.Iif == b.Iif)
}

func ports(p nodestate.PortRange) [2]uint16 {
	from, to := p.Bounds()
	return [2]uint16{from, to}
}

// selectorOf is the filter's selector of rule r (its iif resolved in h's
// namespace) for slot, with mark.
func selectorOf(h *dataplane.Handle, r nodestate.Rule, slot, mark uint32) (boundary.SampleSel, error) {
	c := boundary.SampleSel{Family: r.Family, Src: r.Src, Dst: r.Dst, Proto: r.IPProto,
		Sport: ports(r.Sport), Dport: ports(r.Dport), Slot: slot, Mark: mark, Prio: uint32(r.Priority)}
	if r.Iif != "" {
		ix, err := h.LinkIndex(r.Iif)
		if err != nil {
			return c, err
		}
		c.Ifindex = ix
	}
	return c, nil
}

// undo removes the rules and routes m holds (what a failed install
// added: every protocol-205 rule and table of m's slot).
func (m *boundaryMarker) undo(h *dataplane.Handle) error {
	var errs []error
	for i, r := range m.cur.rules {
		errs = append(errs, h.DeleteMarkRule(r, m.cur.marks[i]))
	}
	for _, r := range m.cur.routes {
		errs = append(errs, h.DeleteRouteAs(r, ProtoSample))
	}
	m.cur = markState{}
	return errors.Join(errs...)
}

// Counts are the packets of the chain the filter counted and marked
// (after close: the last read).
func (m *boundaryMarker) Counts() (SampleCounts, error) {
	bmu.Lock()
	defer bmu.Unlock()
	if m.closed {
		return m.last, nil
	}
	bn := bnodes[m.ns]
	if bn == nil {
		return m.last, nil
	}
	seen, marked, err := bn.samp.Counts(m.slot)
	if err != nil {
		return SampleCounts{}, err
	}
	m.last = SampleCounts{Seen: seen, Marked: marked}
	return m.last, nil
}

// Close stops marking: the selectors out of the filter first, then the
// rules and the tables.
func (m *boundaryMarker) Close() error {
	m.once.Do(func() {
		close(m.stop)
		<-m.done
	})
	if _, err := m.Counts(); err != nil {
		return err
	}
	bmu.Lock()
	defer bmu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	if bn := bnodes[m.ns]; bn != nil {
		if cur, err := bn.samp.Get(); err == nil {
			var keep []boundary.SampleSel
			for _, c := range cur {
				if c.Owner() != m.slot {
					keep = append(keep, c)
				}
			}
			errs = append(errs, bn.samp.Set(keep))
		} else {
			errs = append(errs, err)
		}
		bn.drain() // no new mark now: the last ones reach this sampler
		bn.mu.Lock()
		delete(bn.subs, m.slot)
		delete(bn.kicks, m.slot)
		bn.mu.Unlock()
		defer bn.release(m.ns)
	}
	h, err := dataplane.Open(m.ns)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer h.Close()
	return errors.Join(append(errs, m.undo(h))...)
}

// release drops a reference to bn (bmu held); the last closes it.
func (bn *bnode) release(ns string) {
	if bn.refs--; bn.refs > 0 {
		return
	}
	delete(bnodes, ns)
	if bn.watch != nil {
		bn.watch.close()
	}
	_ = bn.rd.Flush()
	bn.rd.Close()
	<-bn.done
	bn.samp.Close()
	bn.lock.unlock() // every marker undid its state before its release
}

// read hands each marked packet to its slot's sampler.
func (bn *bnode) read() {
	defer close(bn.done)
	for {
		rec, err := bn.rd.Read()
		if err != nil {
			if errors.Is(err, ringbuf.ErrFlushed) {
				bn.mu.Lock()
				if bn.drained != nil {
					close(bn.drained)
					bn.drained = nil
				}
				bn.mu.Unlock()
				continue
			}
			return
		}
		ev, ok := boundary.DecodeEvent(rec.RawSample)
		if !ok {
			continue
		}
		bn.mu.Lock()
		f := bn.subs[ev.Slot]
		bn.mu.Unlock()
		if f != nil {
			f(ev)
		}
	}
}

// BoundaryMark is marking in a headend's boundary filter alone, its
// marks counted (segchain perf oam's T.Encaps+boundary+mark-1000 arm).
type BoundaryMark struct {
	m     *boundaryMarker
	marks atomic.Uint64
}

// MarkAtBoundary marks 1 in rate of the packets of the chain whose
// headend route in ns has key, in ns's boundary filter (the O-rule and
// the O-flagged table included).
func MarkAtBoundary(ns string, key ChainKey, rate uint32) (*BoundaryMark, error) {
	b := &BoundaryMark{}
	m, err := startBoundaryMarker(ns, key, rate, func(boundary.SampleEvent) { b.marks.Add(1) })
	if err != nil {
		return nil, err
	}
	b.m = m
	return b, nil
}

// Counts are the filter's counts.
func (b *BoundaryMark) Counts() (SampleCounts, error) { return b.m.Counts() }

// Close stops marking.
func (b *BoundaryMark) Close() error { return b.m.Close() }

// removeSampleState deletes every rule and route of protocol ProtoSample
// in h's namespace.
func removeSampleState(h *dataplane.Handle) error {
	return h.DeleteProto(ProtoSample)
}
