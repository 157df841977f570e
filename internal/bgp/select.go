package bgp

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/segchain/segchain/internal/nodestate"
)

// Candidate is one path to a prefix learned from a neighbor.
type Candidate struct {
	Neighbor netip.Addr
	ASPath   int // AS_PATH length
	Origin   int // 0 IGP, 1 EGP, 2 INCOMPLETE
}

// Hop is one next hop of an installed route.
type Hop struct {
	Via netip.Addr
	Dev string
}

// Route is a best path as installed: one hop, or several for ECMP.
type Route struct {
	Dst  netip.Prefix
	Hops []Hop
}

func (r Route) String() string {
	h := make([]string, len(r.Hops))
	for i, x := range r.Hops {
		h[i] = "via " + x.Via.String() + " dev " + x.Dev
	}
	return r.Dst.String() + " " + strings.Join(h, " nexthop ")
}

// Select computes the routes to install from the learned paths: per
// prefix, the paths from neighbors whose session is established and whose
// link has carrier, the shortest AS_PATH, then the lowest ORIGIN; every
// path left is an equal-cost next hop (eBGP multipath across neighbor
// ASNs, as FRR's as-path multipath-relax). Prefixes the node originates
// itself or has connected (skip) are never installed: a connected route
// is the kernel's, and replacing it would cut the link.
func Select(in *nodestate.BGP, learned map[netip.Prefix][]Candidate, usable func(netip.Addr) bool, skip func(netip.Prefix) bool) []Route {
	own := map[netip.Prefix]bool{}
	for _, p := range in.Prefixes {
		own[p] = true
	}
	var out []Route
	for dst, cands := range learned {
		if own[dst] || (skip != nil && skip(dst)) {
			continue
		}
		var best []Candidate
		for _, c := range cands {
			if _, ok := in.Neighbor(c.Neighbor); !ok || !usable(c.Neighbor) {
				continue
			}
			switch {
			case len(best) == 0 || c.ASPath < best[0].ASPath || (c.ASPath == best[0].ASPath && c.Origin < best[0].Origin):
				best = []Candidate{c}
			case c.ASPath == best[0].ASPath && c.Origin == best[0].Origin:
				best = append(best, c)
			}
		}
		if len(best) == 0 {
			continue
		}
		r := Route{Dst: dst}
		seen := map[netip.Addr]bool{}
		for _, c := range best {
			if seen[c.Neighbor] {
				continue
			}
			seen[c.Neighbor] = true
			n, _ := in.Neighbor(c.Neighbor)
			r.Hops = append(r.Hops, Hop{Via: n.Addr, Dev: n.Dev})
		}
		sort.Slice(r.Hops, func(i, j int) bool { return r.Hops[i].Via.Less(r.Hops[j].Via) })
		out = append(out, r)
	}
	sortRoutes(out)
	return out
}

// sortRoutes orders routes by destination.
func sortRoutes(rs []Route) {
	sort.Slice(rs, func(i, j int) bool { return prefixLess(rs[i].Dst, rs[j].Dst) })
}

func prefixLess(a, b netip.Prefix) bool {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c < 0
	}
	return a.Bits() < b.Bits()
}

// parsePrefix reads GoBGP's destination prefix ("fc00:2::/64").
func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bgp destination %q: %w", s, err)
	}
	return p.Masked(), nil
}
