package plan

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nodestate"
)

// Summary is one block of routing.summaries as static routing uses it:
// its members keep a specific route to every prefix inside it, every other
// SR node routes the block as one prefix towards the nearest member.
type Summary struct {
	Prefix netip.Prefix `json:"prefix"`
	// Members are the nodes inside the block: those whose locator lies in
	// it, and those without a locator one of whose link addresses does.
	Members []string `json:"members"`
	// Covers is how many locators and link prefixes lie inside it: each
	// node outside the block has one route instead of these.
	Covers int `json:"covers"`
	// RoutedBy is how many SR nodes route the block as one prefix.
	RoutedBy int `json:"routed_by"`
	// AggregatedBy, under routing: bgp, are the routers (FRR) that
	// announce the block as one prefix to the neighbours outside it
	// (bgpsummaries.go).
	AggregatedBy []string `json:"aggregated_by,omitempty"`
	bgp          bool
}

// String is how plan explains the summary.
func (s Summary) String() string {
	if s.bgp {
		return s.aggregateNote()
	}
	return fmt.Sprintf("summary %s: %d member node(s), %d prefix(es) inside; %d node(s) route it as one prefix towards the nearest member",
		s.Prefix, len(s.Members), s.Covers, s.RoutedBy)
}

// summarizer decides, per node and destination of static routing, whether
// the destination is reached through a summary route.
//
// Why this is loop-free: a non-member routes the block to the first hop
// towards its nearest member, which is one hop nearer to a member; so the
// packet reaches a member. A member has a specific route to every prefix
// inside the block, along a shortest path; check refuses the plan when the
// first hop of such a path is outside the block (that node would send the
// packet back towards the block's nearest member).
type summarizer struct {
	b      *builder
	sums   []netip.Prefix
	member []map[string]bool // per summary
	in     []int             // per destination: the summary it lies in, or -1
	covers []int
	routed []int
	errs   config.ErrorList
	seen   map[string]bool
	// cands are, per summary, its members that forward, sorted: the same
	// for every node routing the block (computed once, not per node);
	// candIdx their indices in the builder's graph.
	cands   [][]string
	candIdx [][]int
}

func (b *builder) newSummarizer(ndest int, dest func(i int) (netip.Prefix, []string)) (*summarizer, error) {
	s := &summarizer{b: b, sums: b.d.SummaryPrefixes(), seen: map[string]bool{}}
	if len(s.sums) == 0 {
		return s, nil
	}
	s.member = make([]map[string]bool, len(s.sums))
	s.covers = make([]int, len(s.sums))
	s.routed = make([]int, len(s.sums))
	for k, sp := range s.sums {
		s.member[k] = map[string]bool{}
		for _, n := range b.d.NodeNames() {
			if loc := b.d.Nodes[n].Locator; loc != "" {
				if p, err := netip.ParsePrefix(loc); err == nil && inside(p.Masked(), sp) {
					s.member[k][n] = true
				}
			}
		}
	}
	for _, i := range b.ifs {
		if b.d.Nodes[i.Node].Locator != "" {
			continue
		}
		for _, a := range i.Addrs {
			for k, sp := range s.sums {
				if sp.Contains(a.Addr()) {
					s.member[k][i.Node] = true
				}
			}
		}
	}
	s.in = make([]int, ndest)
	for i := range s.in {
		s.in[i] = -1
		p, owners := dest(i)
		for k, sp := range s.sums {
			switch {
			case inside(p, sp):
				s.in[i] = k
				s.covers[k]++
			case p.Overlaps(sp):
				s.errs = append(s.errs, &config.FieldError{Path: s.path(k),
					Msg: fmt.Sprintf("%s lies inside %s of node %s: a summary must hold whole locators and link prefixes", sp, p, owners[0])})
			}
		}
	}
	for k := range s.sums {
		if len(s.member[k]) == 0 {
			s.errs = append(s.errs, &config.FieldError{Path: s.path(k), Msg: fmt.Sprintf("%s holds no node's locator or link address", s.sums[k])})
		}
	}
	if len(s.errs) > 0 {
		return nil, s.errs
	}
	return s, nil
}

func (s *summarizer) path(k int) string {
	// SummaryPrefixes keeps the file's order; every entry parsed (validated).
	return "routing.summaries[" + strconv.Itoa(k) + "]"
}

// inside: p is a subnet of (or equal to) block.
func inside(p, block netip.Prefix) bool {
	return p.Bits() >= block.Bits() && block.Contains(p.Addr())
}

// memberships are, per summary, whether src is a member: looked up once
// per node instead of once per node and destination (a thousand nodes
// have millions of those).
func (s *summarizer) memberships(src string) []bool {
	if len(s.sums) == 0 {
		return nil
	}
	m := make([]bool, len(s.sums))
	for k := range s.sums {
		m[k] = s.member[k][src]
	}
	return m
}

// summarisedFor: src, a member of the summaries mine says, reaches
// destination i through a summary route.
func (s *summarizer) summarisedFor(mine []bool, i int) bool {
	if len(s.sums) == 0 {
		return false
	}
	k := s.in[i]
	return k >= 0 && !mine[k]
}

// check records an error when member src's shortest path to destination i
// inside its block leaves the block at its first hop.
func (s *summarizer) check(src string, i int, hop string, owners []string) {
	if len(s.sums) == 0 || s.in[i] < 0 {
		return
	}
	k := s.in[i]
	if s.member[k][hop] || contains(owners, hop) {
		return
	}
	key := strconv.Itoa(k)
	if s.seen[key] {
		return // one example per block is enough
	}
	s.seen[key] = true
	s.errs = append(s.errs, &config.FieldError{Path: s.path(k),
		Msg: fmt.Sprintf("member %s reaches %s inside %s through %s, which is outside it (its summary route would send the packet back): a block's members must reach what is inside it among themselves", src, owners[0], s.sums[k], hop)})
}

// routes adds src's summary routes: one per block src is not a member of
// (mine: memberships), towards the nearest member that forwards.
func (s *summarizer) routes(src string, mine []bool) {
	for k, sp := range s.sums {
		if mine[k] {
			continue
		}
		if s.cands == nil {
			s.cands = make([][]string, len(s.sums))
			s.candIdx = make([][]int, len(s.sums))
		}
		if s.cands[k] == nil {
			cands := []string{}
			for m := range s.member[k] {
				if s.b.forwards(m) {
					cands = append(cands, m)
				}
			}
			sort.Strings(cands)
			s.cands[k] = cands
			idx := make([]int, len(cands))
			for i, c := range cands {
				if j, ok := s.b.idx[c]; ok {
					idx[i] = j
				} else {
					idx[i] = -1
				}
			}
			s.candIdx[k] = idx
		}
		m := s.b.nearestSorted(src, s.cands[k], s.candIdx[k])
		if m == "" {
			continue
		}
		e, _ := s.b.firstHop(src, m)
		via, ok := addrOfFamily(e.peerAddr, false)
		if !ok {
			continue
		}
		s.b.addRoute(src, nodestate.Route{Dst: sp, Via: via, Dev: e.iface.Name, Owner: "routing summary"})
		s.routed[k]++
	}
}

// err is the refusals found; on success the summaries go into the plan.
func (s *summarizer) err() error {
	if len(s.errs) > 0 {
		return s.errs
	}
	for k, sp := range s.sums {
		var ms []string
		for m := range s.member[k] {
			ms = append(ms, m)
		}
		sort.Strings(ms)
		s.b.p.Summaries = append(s.b.p.Summaries, Summary{Prefix: sp, Members: ms, Covers: s.covers[k], RoutedBy: s.routed[k]})
	}
	return nil
}

// summariseBoundary replaces, in the boundary filter's protected prefixes,
// the locators inside a routing.summaries block by the block itself: the
// block holds only the domain's own locators and link addresses (a host's
// link inside it would be cut off from outside), so that the filter, like
// the routes, grows with the pods rather than the nodes.
func (b *builder) summariseBoundary(locators []netip.Prefix) []netip.Prefix {
	sums := b.d.SummaryPrefixes()
	if len(sums) == 0 {
		return locators
	}
	out := append([]netip.Prefix(nil), sums...)
	for _, l := range locators {
		in := false
		for _, s := range sums {
			in = in || inside(l, s)
		}
		if !in {
			out = append(out, l)
		}
	}
	return out
}
