package config

import (
	"net/netip"
	"sort"
	"strings"
)

// bindingBehaviors are the behaviours that steer a packet into a SID list of
// their own (a binding SID): a list that reaches the binding SID again never
// terminates, the packet loops until its hop limit or the MTU drops it.
var bindingBehaviors = []string{"End.B6", "End.B6.Encaps"}

func isBinding(behavior string) bool {
	for _, b := range bindingBehaviors {
		if strings.EqualFold(b, behavior) {
			return true
		}
	}
	return false
}

// bindingLoops rejects binding SIDs whose segment lists lead back to
// themselves, directly or through other binding SIDs, with the cycle's path
// (bsa → bsb → bsa). Segments name services or are addresses; an address
// equal to a service's SID counts as that service (when the SIDs can be
// allocated, i.e. once the rest of the file is valid).
func (v *validator) bindingLoops() {
	bySID := map[netip.Addr]string{}
	if len(v.errs) == 0 {
		if sids, err := v.d.SIDs(); err == nil {
			for name, a := range sids {
				bySID[a] = name
			}
		}
	}
	next := map[string][]string{}
	var names []string
	for name, s := range v.d.Services {
		if s == nil || !isBinding(s.Behavior) {
			continue
		}
		names = append(names, name)
		for _, seg := range s.Segs {
			if a, err := netip.ParseAddr(seg); err == nil {
				seg = bySID[a]
			}
			if t, ok := v.d.Services[seg]; ok && t != nil && isBinding(t.Behavior) {
				next[name] = append(next[name], seg)
			}
		}
	}
	sort.Strings(names)
	const (
		unseen = iota
		onStack
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(n string)
	visit = func(n string) {
		state[n] = onStack
		stack = append(stack, n)
		for _, m := range next[n] {
			switch state[m] {
			case unseen:
				visit(m)
			case onStack:
				i := len(stack) - 1
				for stack[i] != m {
					i--
				}
				cycle := append(append([]string(nil), stack[i:]...), m)
				v.errf("services."+m+".segs", "binding SID loop: %s: a packet steered into %s comes back to it and never leaves the loop",
					strings.Join(cycle, " → "), m)
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
	}
	for _, n := range names {
		if state[n] == unseen {
			visit(n)
		}
	}
}

// locatorsOffLinks rejects a locator that overlaps a link prefix: addresses
// in it would be both SIDs (local, seg6local) and link addresses (on-link
// neighbours), and one of the two routes would shadow the other.
//
// Comparing every locator with every link took seconds on large domains:
// the locators are indexed by family and length instead (all have
// sid.locator_bits in a valid file). A link prefix at least as long as a
// group's locators overlaps only the locator it falls in (a map lookup); a
// shorter one overlaps the locators inside it, consecutive in address
// order (a binary search).
func (v *validator) locatorsOffLinks() {
	type located struct {
		loc  netip.Prefix // as written
		node string
	}
	type group struct {
		bits   int
		by     map[netip.Prefix][]located // by masked locator
		sorted []netip.Prefix
	}
	groups := map[[2]int]*group{}
	var keys [][2]int
	for _, node := range sortedKeys(v.d.Nodes) {
		n := v.d.Nodes[node]
		if n == nil || n.Locator == "" {
			continue
		}
		loc, err := netip.ParsePrefix(n.Locator)
		if err != nil {
			continue // reported by nodes()
		}
		key := [2]int{loc.Addr().BitLen(), loc.Bits()}
		g := groups[key]
		if g == nil {
			g = &group{bits: loc.Bits(), by: map[netip.Prefix][]located{}}
			groups[key] = g
			keys = append(keys, key)
		}
		m := loc.Masked()
		if g.by[m] == nil {
			g.sorted = append(g.sorted, m)
		}
		g.by[m] = append(g.by[m], located{loc, node})
	}
	for _, g := range groups {
		sort.Slice(g.sorted, func(i, j int) bool { return g.sorted[i].Addr().Less(g.sorted[j].Addr()) })
	}
	type hit struct {
		located
		link int
		p    netip.Prefix
	}
	var hits []hit
	for i, l := range v.d.Links {
		if l == nil {
			continue
		}
		for _, pfx := range []string{l.IPv6, l.IPv4} {
			p, err := netip.ParsePrefix(pfx)
			if err != nil {
				continue
			}
			pm := p.Masked()
			for _, key := range keys {
				g := groups[key]
				if key[0] != pm.Addr().BitLen() {
					continue
				}
				var in []netip.Prefix
				if pm.Bits() >= g.bits {
					if m := netip.PrefixFrom(pm.Addr(), g.bits).Masked(); g.by[m] != nil {
						in = append(in, m)
					}
				} else {
					k := sort.Search(len(g.sorted), func(k int) bool { return !g.sorted[k].Addr().Less(pm.Addr()) })
					for ; k < len(g.sorted) && pm.Contains(g.sorted[k].Addr()); k++ {
						in = append(in, g.sorted[k])
					}
				}
				for _, m := range in {
					for _, x := range g.by[m] {
						hits = append(hits, hit{x, i, p})
					}
				}
			}
		}
	}
	// Reported by node, then link (the order of the former nested loops).
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].node != hits[j].node {
			return hits[i].node < hits[j].node
		}
		return hits[i].link < hits[j].link
	})
	for _, h := range hits {
		v.errf("nodes."+h.node+".locator", "locator %s overlaps links[%d] prefix %s: an address there would be both a SID and a link address", h.loc, h.link, h.p)
	}
}

// checkLoopsAndOverlaps runs the checks of this file (one call in validate).
func (v *validator) checkLoopsAndOverlaps() {
	v.locatorsOffLinks()
	v.bindingLoops()
}
