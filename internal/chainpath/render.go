package chainpath

import (
	"fmt"
	"slices"
	"strings"
)

// Render is a chain's path on one line, the headend first, each SID's
// node followed by the SID and its behaviour, equal-cost alternatives in
// braces, a branch that stops short marked ✗:
//
//	ingress → r1 → nfv1 (fc00:2::100 End) → egress (fc00:4::d6 End.DX6)
//	ingress → {r1 → nfv1 | r2 → nfv2} → egress (fc00:4::d6 End.DX6)
func Render(headend string, segs []Segment) string {
	var b strings.Builder
	b.WriteString(headend)
	for _, s := range segs {
		var tails [][]string
		for _, br := range s.Hops {
			if len(br) > 0 {
				tails = append(tails, br[1:]) // the start is already written
			}
		}
		shown := false // the SID's node is the last node written
		switch {
		case len(tails) == 1:
			writeNodes(&b, tails[0])
			last := s.Hops[0][len(s.Hops[0])-1]
			if shown = last == s.Node; !shown {
				b.WriteString(" ✗")
			}
		case len(tails) > 1:
			n := commonSuffix(tails)
			var alts []string
			for i, t := range tails {
				br := s.Hops[i]
				alts = append(alts, alternative(t[:len(t)-n], br[len(br)-1] == s.Node))
				shown = shown || (n == 0 && len(t) > 0 && t[len(t)-1] == s.Node)
			}
			b.WriteString(" → {" + strings.Join(alts, " | ") + "}")
			suffix := tails[0][len(tails[0])-n:]
			writeNodes(&b, suffix)
			if n > 0 {
				shown = suffix[n-1] == s.Node
			}
		}
		if !shown {
			// The rest of the chain from the SID's node, for the
			// packets that get there.
			b.WriteString(" … " + s.Node)
		}
		fmt.Fprintf(&b, " (%s %s)", s.SID, s.Behavior)
	}
	return b.String()
}

// writeNodes writes " → a → b".
func writeNodes(b *strings.Builder, nodes []string) {
	for _, n := range nodes {
		b.WriteString(" → " + n)
	}
}

// alternative renders one branch's own part inside braces; a branch that
// does not reach the SID's node ends with ✗.
func alternative(nodes []string, reached bool) string {
	s := strings.Join(nodes, " → ")
	switch {
	case reached && s == "":
		return "direct"
	case reached:
		return s
	case s == "":
		return "✗"
	}
	return s + " ✗"
}

// commonSuffix is the length of the longest suffix every list shares,
// leaving each list at least one node of its own when they differ.
func commonSuffix(lists [][]string) int {
	shortest := len(lists[0])
	for _, l := range lists {
		shortest = min(shortest, len(l))
	}
	n := 0
	for ; n < shortest; n++ {
		e := lists[0][len(lists[0])-1-n]
		if !slices.ContainsFunc(lists, func(l []string) bool { return l[len(l)-1-n] != e }) {
			continue
		}
		break
	}
	return n
}
