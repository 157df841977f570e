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
func (v *validator) locatorsOffLinks() {
	for _, node := range sortedKeys(v.d.Nodes) {
		n := v.d.Nodes[node]
		if n == nil || n.Locator == "" {
			continue
		}
		loc, err := netip.ParsePrefix(n.Locator)
		if err != nil {
			continue // reported by nodes()
		}
		for i, l := range v.d.Links {
			if l == nil {
				continue
			}
			for _, pfx := range []string{l.IPv6, l.IPv4} {
				p, err := netip.ParsePrefix(pfx)
				if err == nil && p.Overlaps(loc) {
					v.errf("nodes."+node+".locator", "locator %s overlaps links[%d] prefix %s: an address there would be both a SID and a link address", loc, i, p)
				}
			}
		}
	}
}

// checkLoopsAndOverlaps runs the checks of this file (one call in validate).
func (v *validator) checkLoopsAndOverlaps() {
	v.locatorsOffLinks()
	v.bindingLoops()
}
