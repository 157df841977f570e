package config

import (
	"fmt"
	"math/rand"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The indexed locator/link overlap check finds exactly the pairs that
// comparing every locator with every link prefix finds, on random
// prefixes of mixed lengths and families.
func TestLocatorsOffLinksMatchesPairwise(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	pfx := func() netip.Prefix {
		if r.Intn(8) == 0 {
			a := netip.AddrFrom4([4]byte{10, byte(r.Intn(4)), byte(r.Intn(4)), 0})
			return netip.PrefixFrom(a, []int{8, 16, 24}[r.Intn(3)])
		}
		b := [16]byte{0xfc, 0, 0, byte(r.Intn(4)), 0, byte(r.Intn(4))}
		return netip.PrefixFrom(netip.AddrFrom16(b), []int{16, 32, 40, 48, 64}[r.Intn(5)])
	}
	pairs := 0
	for round := 0; round < 200; round++ {
		d := &Domain{Nodes: map[string]*Node{}}
		for i := 0; i < 1+r.Intn(12); i++ {
			d.Nodes[fmt.Sprintf("n%d", i)] = &Node{Locator: pfx().String()}
		}
		for i := 0; i < 1+r.Intn(12); i++ {
			l := &Link{IPv6: pfx().String()}
			if r.Intn(3) == 0 {
				l.IPv4 = pfx().String()
			}
			d.Links = append(d.Links, l)
		}
		var want []string
		for _, node := range sortedKeys(d.Nodes) {
			loc := netip.MustParsePrefix(d.Nodes[node].Locator)
			for i, l := range d.Links {
				for _, s := range []string{l.IPv6, l.IPv4} {
					if p, err := netip.ParsePrefix(s); err == nil && p.Overlaps(loc) {
						want = append(want, fmt.Sprintf("nodes.%s.locator: locator %s overlaps links[%d] prefix %s", node, loc, i, p))
					}
				}
			}
		}
		v := &validator{d: d, f: d.Format()}
		v.locatorsOffLinks()
		var got []string
		for _, e := range v.errs {
			var loc, p string
			var i int
			fmt.Sscanf(e.Msg, "locator %s overlaps links[%d] prefix %s", &loc, &i, &p)
			got = append(got, fmt.Sprintf("%s: locator %s overlaps links[%d] prefix %s", e.Path, loc, i, p[:len(p)-1]))
		}
		pairs += len(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d (-pairwise +indexed):\n%s", round, diff)
		}
	}
	if pairs < 100 {
		t.Fatalf("only %d overlapping pairs in all rounds: the test proves little", pairs)
	}
}
