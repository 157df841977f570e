package plan

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/segchain/segchain/internal/config"
)

// bgpSummaries applies routing.summaries under routing: bgp. A block's
// members are those of static routing (summaries.go: a locator inside it,
// or without a locator a link address inside it). Every FRR router that is
// a member announces the block as one prefix (aggregate-address) and,
// towards each neighbour that is not a member, only that: the prefixes
// inside the block stay among its members. So a leaf of another pod learns
// one prefix per pod, over every spine (ECMP as for any prefix), and the
// members keep their specific routes, which is what lets a spine that lost
// its link to one leaf still reach it (through another leaf of the pod):
// the aggregate does not black-hole it (docs/routing.md).
//
// GoBGP speakers (the agents) do not aggregate: they announce their own
// prefixes as before, which forwards correctly, only less compactly.
//
// A block whose members are not connected among themselves is refused: a
// member announcing the aggregate could not reach the members it cannot
// learn specifics from, as non-members hear only the aggregate.
func (b *builder) bgpSummaries() error {
	sums := b.d.SummaryPrefixes()
	if len(sums) == 0 {
		return nil
	}
	// The destinations BGP announces: link prefixes and locators (the
	// refusals of a block inside one, or of an empty block, are static
	// routing's; f3216, whose uSID blocks routedDests adds, is refused
	// under bgp).
	dests := b.routedDests()
	s, err := b.newSummarizer(len(dests), func(i int) (netip.Prefix, []string) { return dests[i].prefix, dests[i].owners })
	if err != nil {
		return err
	}
	var errs config.ErrorList
	for k, sp := range s.sums {
		if m, other, ok := b.membersConnected(s.member[k]); !ok {
			errs = append(errs, &config.FieldError{Path: s.path(k),
				Msg: fmt.Sprintf("under routing.mode: bgp a block's members must be linked among themselves: %s cannot reach %s inside %s without leaving it (its aggregate would black-hole what it cannot learn)", m, other, sp)})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	aggregated := make([][]string, len(s.sums))
	for n, in := range b.p.FRR {
		for k, sp := range s.sums {
			if !s.member[k][n] {
				continue
			}
			outside := false
			for i := range in.Neighbors {
				if !s.member[k][in.Neighbors[i].Node] {
					in.Neighbors[i].Summarised = append(in.Neighbors[i].Summarised, sp)
					outside = true
				}
			}
			if outside {
				in.Aggregates = append(in.Aggregates, sp)
				aggregated[k] = append(aggregated[k], n)
			}
		}
		in.Sort()
	}
	for k, sp := range s.sums {
		var ms []string
		for m := range s.member[k] {
			ms = append(ms, m)
		}
		sort.Strings(ms)
		sort.Strings(aggregated[k])
		b.p.Summaries = append(b.p.Summaries, Summary{Prefix: sp, Members: ms, Covers: s.covers[k], AggregatedBy: aggregated[k], bgp: true})
	}
	return nil
}

// membersConnected reports whether the speakers among members are linked
// among themselves (through members only); if not, one that cannot reach
// another.
func (b *builder) membersConnected(members map[string]bool) (from, to string, ok bool) {
	var sp []string
	for m := range members {
		if b.isSR(m) {
			sp = append(sp, m)
		}
	}
	if len(sp) < 2 {
		return "", "", true
	}
	sort.Strings(sp)
	reached := map[string]bool{sp[0]: true}
	q := []string{sp[0]}
	for len(q) > 0 {
		x := q[0]
		q = q[1:]
		for _, e := range b.adj[x] {
			y := e.iface.PeerNode
			if members[y] && b.isSR(y) && !reached[y] {
				reached[y] = true
				q = append(q, y)
			}
		}
	}
	for _, m := range sp {
		if !reached[m] {
			return sp[0], m, false
		}
	}
	return "", "", true
}

// aggregateNote is plan's explanation of a block under routing: bgp.
func (s Summary) aggregateNote() string {
	return fmt.Sprintf("summary %s: %d member node(s), %d prefix(es) inside; aggregated (one BGP prefix to non-members) by %d router(s)",
		s.Prefix, len(s.Members), s.Covers, len(s.AggregatedBy))
}
