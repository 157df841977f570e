package nodestate

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Route.Key is built without fmt; it must say what the format
// "%s table %d metric %d" says, and Sort must order routes as a stable
// sort on it did.
func TestRouteKeyAndSort(t *testing.T) {
	routes := []Route{
		{Dst: netip.MustParsePrefix("fc00:2::/64")},
		{Dst: netip.MustParsePrefix("fc00:2::/64"), Table: 100, Metric: 5},
		{Dst: netip.MustParsePrefix("10.0.0.0/8"), Table: 254},
		{Dst: netip.MustParsePrefix("::ffff:10.0.0.0/104"), Metric: -1},
		{Dst: netip.MustParsePrefix("::/0"), Table: 7, Dev: "a"},
		{Dst: netip.MustParsePrefix("::/0"), Table: 7, Dev: "b"},
		{},
	}
	for _, r := range routes {
		if got, want := r.Key(), fmt.Sprintf("%s table %d metric %d", r.Dst, r.tableOrMain(), r.Metric); got != want {
			t.Errorf("Key() = %q, want %q", got, want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		rs := append([]Route(nil), routes...)
		rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		want := append([]Route(nil), rs...)
		sort.SliceStable(want, func(i, j int) bool { return want[i].Key() < want[j].Key() })
		n := &Node{Routes: rs}
		n.Sort()
		if diff := cmp.Diff(want, n.Routes, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Fatalf("Sort (-want +got):\n%s", diff)
		}
	}
}
