package ids

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Mode says what drop rules do.
type Mode uint8

const (
	// ModeIDS: every packet is forwarded; drop rules only alert
	// (EVE action "allowed").
	ModeIDS Mode = iota
	// ModeIPS: a packet matched by a drop rule (and no pass rule) is
	// dropped (EVE action "blocked").
	ModeIPS
)

func (m Mode) String() string {
	if m == ModeIPS {
		return "ips"
	}
	return "ids"
}

// Verdict is what the service does with the packet.
type Verdict uint8

const (
	Forward Verdict = iota // apply End: the packet continues on its chain
	Drop                   // drop the packet
)

func (v Verdict) String() string {
	if v == Drop {
		return "drop"
	}
	return "forward"
}

// Packet is what a SID-bound service hands the engine: the SRH metadata
// and the inner packet. Slices are only read, and only during Inspect.
type Packet struct {
	Time               time.Time // capture time for alerts; zero: now
	OuterSrc, OuterDst netip.Addr
	// Segments is the SRH segment list in SRH order: Segments[0] is the
	// last segment of the path, Segments[SL] the active one. nil when the
	// packet carried no SRH.
	Segments []netip.Addr
	SL       int
	Args     uint64 // ARGS bits of the active SID, as the binding defines them
	Tag      uint16 // the SRH's Tag field
	Inner    []byte // the inner IPv4 or IPv6 packet, from its IP header
}

// Options configure an Engine.
type Options struct {
	Mode Mode
	// Alerts receives one EVE JSON line per alert; nil discards them.
	Alerts io.Writer
	// DropUndecodable makes an IPS drop inner packets it cannot decode
	// (truncated, inconsistent headers, not IP) instead of forwarding
	// them uninspected. Ignored in IDS mode.
	DropUndecodable bool
}

// Stats are the engine's counters.
type Stats struct {
	Inspected   uint64 // packets given to Inspect/Match
	Alerts      uint64 // alert events produced (one per matching rule)
	Dropped     uint64 // packets with verdict Drop
	Passed      uint64 // packets a pass rule matched
	Undecodable uint64 // packets whose inner packet could not be decoded
	// UndecodableBy splits Undecodable by reason ("not-ip", "truncated",
	// "bad-header").
	UndecodableBy map[string]uint64
	WriteErrors   uint64 // alert lines the writer refused
}

// Engine inspects packets against a compiled rule set. It is safe for
// concurrent use by several worker queues.
type Engine struct {
	opts  Options
	rules []*Rule

	// One prefilter per packet class, over the fast patterns of the rules
	// that can match that class (Suricata's per-protocol signature
	// groups): a UDP packet is not scanned for the patterns of TCP rules.
	prefilters [numClasses]*prefilter

	// Header-only index for rules without a positive content: per packet
	// class, rules keyed by destination port and the rest.
	byPort  [numClasses]map[uint16][]int32
	generic [numClasses][]int32

	pool sync.Pool
	eve  *eveWriter

	inspected, alerts, dropped, passed, undecodable atomic.Uint64
	undecodableBy                                   [numDecodeErrors]atomic.Uint64
}

// New compiles rules (as Parse returns them) into an Engine.
func New(rules []*Rule, o Options) (*Engine, error) {
	e := &Engine{opts: o, rules: rules}
	if o.Alerts != nil {
		e.eve = &eveWriter{w: o.Alerts}
	}
	var groups [numClasses]prefilterBuilder
	for i, r := range rules {
		if r == nil {
			return nil, fmt.Errorf("rule %d is nil", i)
		}
		if fp := r.FastPattern(); fp >= 0 {
			for _, c := range r.Proto.classes() {
				groups[c].add(r.Contents[fp].Pattern, int32(i))
			}
			continue
		}
		for _, c := range r.Proto.classes() {
			ports, ok := singlePorts(&r.DstPort)
			if ok && !r.Bidir && (c == classTCP || c == classUDP) {
				if e.byPort[c] == nil {
					e.byPort[c] = map[uint16][]int32{}
				}
				for _, p := range ports {
					e.byPort[c][p] = append(e.byPort[c][p], int32(i))
				}
				continue
			}
			e.generic[c] = append(e.generic[c], int32(i))
		}
	}
	for c := range groups {
		pf, err := groups[c].build()
		if err != nil {
			return nil, err
		}
		e.prefilters[c] = pf
	}
	n := len(rules)
	e.pool.New = func() any { return &scratch{mark: make([]uint32, n)} }
	return e, nil
}

// prefilter is an automaton over fast patterns and, per pattern, the
// rules it makes candidates.
type prefilter struct {
	ac       *acMatcher
	patRules [][]int32 // pattern id -> rule indexes
}

type prefilterBuilder struct {
	ids      map[string]int32 // case-folded pattern -> id
	patterns [][]byte
	patRules [][]int32
}

func (b *prefilterBuilder) add(p []byte, rule int32) {
	if b.ids == nil {
		b.ids = map[string]int32{}
	}
	key := string(fold(p))
	id, ok := b.ids[key]
	if !ok {
		id = int32(len(b.patterns))
		b.ids[key] = id
		b.patterns = append(b.patterns, p)
		b.patRules = append(b.patRules, nil)
	}
	b.patRules[id] = append(b.patRules[id], rule)
}

func (b *prefilterBuilder) build() (*prefilter, error) {
	if len(b.patterns) == 0 {
		return nil, nil
	}
	ac, err := newACMatcher(b.patterns)
	if err != nil {
		return nil, err
	}
	return &prefilter{ac: ac, patRules: b.patRules}, nil
}

func fold(p []byte) []byte {
	out := make([]byte, len(p))
	for i, c := range p {
		out[i] = foldTable[c]
	}
	return out
}

// Rules returns the engine's rules in file order.
func (e *Engine) Rules() []*Rule { return e.rules }

// Mode returns the engine's mode.
func (e *Engine) Mode() Mode { return e.opts.Mode }

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	s := Stats{
		Inspected:   e.inspected.Load(),
		Alerts:      e.alerts.Load(),
		Dropped:     e.dropped.Load(),
		Passed:      e.passed.Load(),
		Undecodable: e.undecodable.Load(),
	}
	for d := DecodeNotIP; d < numDecodeErrors; d++ {
		if n := e.undecodableBy[d].Load(); n > 0 {
			if s.UndecodableBy == nil {
				s.UndecodableBy = map[string]uint64{}
			}
			s.UndecodableBy[d.String()] = n
		}
	}
	if e.eve != nil {
		s.WriteErrors = e.eve.errors.Load()
	}
	return s
}

// Patterns returns, summed over the per-class prefilters, the number of
// distinct fast patterns and of automaton states.
func (e *Engine) Patterns() (patterns, states int) {
	for _, pf := range e.prefilters {
		if pf != nil {
			patterns += len(pf.patRules)
			states += pf.ac.states()
		}
	}
	return patterns, states
}

// scratch is per-call working memory, pooled so that a packet that matches
// nothing allocates nothing.
type scratch struct {
	f       flow
	mark    []uint32 // rule index -> gen when already a candidate
	gen     uint32
	cands   []int32
	matched []*Rule
	latin   []byte // the payload in Latin-1, for pcre (pcreFind)
}

func (s *scratch) reset() {
	s.gen++
	if s.gen == 0 { // wrapped: clear stale marks
		clear(s.mark)
		s.gen = 1
	}
	s.cands = s.cands[:0]
	s.matched = s.matched[:0]
}

func (s *scratch) add(i int32) {
	if s.mark[i] != s.gen {
		s.mark[i] = s.gen
		s.cands = append(s.cands, i)
	}
}

// Inspect decides the packet's verdict, writes its alerts as EVE lines to
// Options.Alerts and counts it. A packet that matches no rule takes no
// allocation.
func (e *Engine) Inspect(p *Packet) Verdict {
	s := e.pool.Get().(*scratch)
	v := e.match(p, s)
	if len(s.matched) > 0 && e.eve != nil {
		e.eve.write(p, &s.f, s.matched, e.opts.Mode)
	}
	e.pool.Put(s)
	return v
}

// Match is Inspect without writing alerts: it appends the rules that fire
// (drop rules first, then by priority, then file order; none when a pass
// rule matched) to dst.
func (e *Engine) Match(p *Packet, dst []*Rule) (Verdict, []*Rule) {
	s := e.pool.Get().(*scratch)
	v := e.match(p, s)
	dst = append(dst, s.matched...)
	e.pool.Put(s)
	return v, dst
}

func (e *Engine) match(p *Packet, s *scratch) Verdict {
	e.inspected.Add(1)
	s.reset()
	f := &s.f
	if derr := f.decode(p.Inner); derr != decodeOK {
		e.undecodable.Add(1)
		e.undecodableBy[derr].Add(1)
		if e.opts.Mode == ModeIPS && e.opts.DropUndecodable {
			e.dropped.Add(1)
			return Drop
		}
		return Forward
	}
	// Candidates: the prefilter over the payload, then the header index.
	c := f.class()
	if pf := e.prefilters[c]; pf != nil && len(f.payload) > 0 {
		pf.scan(f.payload, s)
	}
	if c == classTCP || c == classUDP {
		if idx := e.byPort[c]; idx != nil {
			for _, ri := range idx[f.dport] {
				s.add(ri)
			}
		}
	}
	for _, ri := range e.generic[c] {
		s.add(ri)
	}
	if len(s.cands) == 0 {
		return Forward
	}
	pass, drop := false, false
	for _, ri := range s.cands {
		r := e.rules[ri]
		if !r.matches(f, p, &s.latin) {
			continue
		}
		if r.Action == ActionPass {
			pass = true
			break // nothing else matters
		}
		drop = drop || r.Action == ActionDrop
		s.matched = append(s.matched, r)
	}
	if pass {
		s.matched = s.matched[:0]
		e.passed.Add(1)
		return Forward
	}
	if len(s.matched) == 0 {
		return Forward
	}
	sortMatches(s.matched)
	e.alerts.Add(uint64(len(s.matched)))
	if drop && e.opts.Mode == ModeIPS {
		e.dropped.Add(1)
		return Drop
	}
	return Forward
}

// scan runs the automaton over the payload and makes candidates of the
// rules whose fast pattern occurs (acMatcher.scan's loop, inlined: no call
// per hit).
//
// At the root state, bytes that start no pattern are skipped by a tight
// loop without the DFA's load-to-load dependency (most payload bytes, for
// most rule sets).
func (pf *prefilter) scan(payload []byte, s *scratch) {
	m := pf.ac
	delta, class, stay := m.delta, &m.class, &m.stay
	row := int32(0)
	for i := 0; i < len(payload); i++ {
		if row == 0 {
			for i < len(payload) && stay[payload[i]] {
				i++
			}
			if i == len(payload) {
				return
			}
		}
		row = delta[row+int32(class[payload[i]])]
		if row < 0 {
			row = ^row
			for _, id := range m.output(row) {
				for _, ri := range pf.patRules[id] {
					s.add(ri)
				}
			}
		}
	}
}

// sortMatches orders fired rules: drop before alert, then priority (1
// first), then file order (insertion sort: the list is short).
func sortMatches(m []*Rule) {
	less := func(a, b *Rule) bool {
		if a.Action != b.Action {
			return a.Action == ActionDrop
		}
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	}
	for i := 1; i < len(m); i++ {
		for j := i; j > 0 && less(m[j], m[j-1]); j-- {
			m[j], m[j-1] = m[j-1], m[j]
		}
	}
}

// matches evaluates every condition of r on the packet; lat is pcre's
// working buffer (nil: allocate when needed).
func (r *Rule) matches(f *flow, p *Packet, lat *[]byte) bool {
	if !r.Proto.match(f) {
		return false
	}
	if !r.headerMatch(f.src, f.sport, f.dst, f.dport) &&
		!(r.Bidir && r.headerMatch(f.dst, f.dport, f.src, f.sport)) {
		return false
	}
	if r.SR.any() && !r.SR.match(p) {
		return false
	}
	if r.Dsize != nil && !r.Dsize.match(uint64(len(f.payload))) {
		return false
	}
	if r.IType != nil || r.ICode != nil {
		if c := f.class(); c != classICMP4 && c != classICMP6 ||
			r.IType != nil && !r.IType.match(uint64(f.icmpType)) ||
			r.ICode != nil && !r.ICode.match(uint64(f.icmpCd)) {
			return false
		}
	}
	if len(r.Contents) > 0 {
		// As in Suricata, content and pcre (negated ones too) need a
		// payload: an empty one matches no such rule.
		if len(f.payload) == 0 {
			return false
		}
		m := contentMatcher{buf: f.payload, budget: maxContentSteps, lat: lat}
		return m.match(r.Contents, 0)
	}
	return true
}

func (r *Rule) headerMatch(src netip.Addr, sport uint16, dst netip.Addr, dport uint16) bool {
	if !r.Src.Contains(src) || !r.Dst.Contains(dst) {
		return false
	}
	if r.Proto.hasPorts() {
		return r.SrcPort.Contains(sport) && r.DstPort.Contains(dport)
	}
	return true
}

func (m *SRMatch) match(p *Packet) bool {
	has := p.Segments != nil
	if m.Present != nil && *m.Present != has {
		return false
	}
	if !has {
		// The other srv6.* conditions need an SRH; a negated one holds.
		for _, pc := range []*PrefixCond{m.Segment, m.Active, m.Last} {
			if pc != nil && !pc.Negated {
				return false
			}
		}
		if m.SL != nil || m.Args != nil || m.NumSegs != nil || m.Tag != nil {
			return false
		}
	} else {
		if m.Segment != nil {
			any := false
			for _, a := range p.Segments {
				if m.Segment.contains(a) {
					any = true
					break
				}
			}
			if any == m.Segment.Negated {
				return false
			}
		}
		if m.Active != nil {
			in := p.SL >= 0 && p.SL < len(p.Segments) && m.Active.contains(p.Segments[p.SL])
			if in == m.Active.Negated {
				return false
			}
		}
		if m.Last != nil {
			in := len(p.Segments) > 0 && m.Last.contains(p.Segments[0])
			if in == m.Last.Negated {
				return false
			}
		}
		if m.SL != nil && (p.SL < 0 || !m.SL.match(uint64(p.SL))) {
			return false
		}
		if m.NumSegs != nil && !m.NumSegs.match(uint64(len(p.Segments))) {
			return false
		}
		if m.Args != nil && !m.Args.match(p.Args) {
			return false
		}
		if m.Tag != nil && !m.Tag.match(uint64(p.Tag)) {
			return false
		}
	}
	if m.OuterSrc != nil && m.OuterSrc.contains(p.OuterSrc) == m.OuterSrc.Negated {
		return false
	}
	return true
}

// maxContentSteps bounds the backtracking of relative content matches on
// one rule (Suricata has the same kind of inspection-recursion limit): a
// rule that needs more does not match.
const maxContentSteps = 1024

// contentMatcher evaluates a rule's content sequence on one payload.
type contentMatcher struct {
	buf    []byte
	budget int
	lat    *[]byte
}

// match reports whether cs[0:] match the payload, the previous content's
// match having ended at prevEnd.
func (m *contentMatcher) match(cs []Content, prevEnd int) bool {
	if len(cs) == 0 {
		return true
	}
	m.budget--
	if m.budget < 0 {
		return false
	}
	buf := m.buf
	c := &cs[0]
	start, end := c.Offset, len(buf)
	if c.Relative {
		start = prevEnd + c.Distance
		if c.HasWithin {
			end = min(end, prevEnd+c.Distance+c.Within)
		}
	} else if c.HasDepth {
		end = min(end, c.Offset+c.Depth)
	}
	start = max(start, 0)
	// Only a relative successor can make a later occurrence succeed where
	// an earlier one failed.
	retry := len(cs) > 1 && cs[1].Relative
	if c.Regex != nil {
		if c.Negated {
			found := start <= end && pcreFind(c.Regex, buf[start:end], m.lat) != nil
			return !found && m.match(cs[1:], prevEnd)
		}
		// Suricata searches again from one byte after the start of the
		// previous match when what follows fails.
		// The search runs on buf[start:end], which is what PCRE sees as
		// the subject; a retry looks at buf[at:end], at being the
		// previous match's start, for a match starting after at.
		if start > end {
			return false
		}
		loc := pcreFind(c.Regex, buf[start:end], m.lat)
		if loc != nil {
			loc[0] += start
			loc[1] += start
		}
		for loc != nil {
			if m.match(cs[1:], loc[1]) {
				return true
			}
			// (A hand-built Content has no retry expression.)
			if !retry || c.anchored || c.retry == nil || m.budget < 0 || loc[0] >= end {
				return false
			}
			at := loc[0]
			loc = pcreFindGroup(c.retry, buf[at:end], m.lat, true)
			if loc != nil {
				loc[0] += at
				loc[1] += at
			}
		}
		return false
	}
	if c.EndsWith {
		// Only one place can match: the end of the payload.
		at := len(buf) - len(c.Pattern)
		found := at >= start && at+len(c.Pattern) <= end && index(buf[at:], c.Pattern, c.NoCase) == 0
		if c.Negated {
			return !found && m.match(cs[1:], prevEnd)
		}
		return found && m.match(cs[1:], len(buf))
	}
	if c.Negated {
		if start <= end && index(buf[start:end], c.Pattern, c.NoCase) >= 0 {
			return false
		}
		return m.match(cs[1:], prevEnd)
	}
	for start <= end {
		i := index(buf[start:end], c.Pattern, c.NoCase)
		if i < 0 {
			return false
		}
		at := start + i
		if m.match(cs[1:], at+len(c.Pattern)) {
			return true
		}
		if !retry || m.budget < 0 {
			return false
		}
		start = at + 1
	}
	return false
}

// index finds p in h, ASCII case-insensitively when nocase.
func index(h, p []byte, nocase bool) int {
	if len(p) > len(h) {
		return -1
	}
	if !nocase {
		return bytes.Index(h, p)
	}
	f0 := foldTable[p[0]]
outer:
	for i := 0; i+len(p) <= len(h); i++ {
		if foldTable[h[i]] != f0 {
			continue
		}
		for j := 1; j < len(p); j++ {
			if foldTable[h[i+j]] != foldTable[p[j]] {
				continue outer
			}
		}
		return i
	}
	return -1
}
