package firewall

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/testutil"
)

// bigSet is a valid 4096-rule set whose fields admit different groups of
// rules (a source per rule, a destination per 4, ports per pair): about
// 9200 bitmaps, so it fits the pool alone but not next to another such set.
func bigSet(t *testing.T, seed int) []fwrule.Rule {
	t.Helper()
	var rules []fwrule.Rule
	for i := range MaxRules {
		r, err := fwrule.Parse(strings.Fields(fmt.Sprintf("-s fc00:%x::%x/128 -d fc00:d::%x/128 -p udp --sport %d --dport %d -j DROP",
			seed, i+1, i%1024+1, 1000+i%2048, 1000+i/2)), fwrule.IPv6)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	return rules
}

func TestFirstFit(t *testing.T) {
	for _, tc := range []struct {
		used  []span
		count int
		at    uint32
		ok    bool
	}{
		{nil, 10, 0, true},
		{[]span{{0, 5}}, 10, 5, true},
		{[]span{{20, 30}, {0, 5}}, 10, 5, true},
		{[]span{{0, 5}, {8, 30}}, 10, 30, true},
		{[]span{{0, 95}}, 10, 95, false},
	} {
		at, ok := firstFit(tc.used, tc.count, 100)
		if ok != tc.ok || (ok && at != tc.at) {
			t.Errorf("firstFit(%v, %d) = %d %v, want %d %v", tc.used, tc.count, at, ok, tc.at, tc.ok)
		}
	}
}

// TestCapacityReportedBeforeChange: a 4096-rule set that fits the pool
// alone cannot replace another such set (both live during the swap). Check
// says so, naming the numbers, without changing anything; Apply fails the
// same way and leaves the installed set in place; a set that fits passes
// Check and installs.
func TestCapacityReportedBeforeChange(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "h13fc")
	sid := netip.MustParsePrefix("fc00:2::f1:0/112")
	a := Instance{SID: sid, ArgsBits: 16, Policy: fwrule.Accept, Rules: bigSet(t, 0xa)}
	b := Instance{SID: sid, ArgsBits: 16, Policy: fwrule.Accept, Rules: bigSet(t, 0xb)}
	need, _, err := Need(b)
	if err != nil {
		t.Fatal(err)
	}
	if need <= maxBitmaps/2 || need > maxBitmaps {
		t.Fatalf("the set takes %d bitmaps: the test needs more than half the pool (%d) and at most all of it", need, maxBitmaps)
	}
	if err := CheckCapacity(ns, []Instance{a}); err != nil {
		t.Fatalf("Check on an empty node: %v", err)
	}
	if err := Apply(ns, a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Flush(ns) })
	err = CheckCapacity(ns, []Instance{b})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("needs %d bitmaps", need)) {
		t.Fatalf("Check(replacement) = %v, want the bitmap shortage reported", err)
	}
	t.Logf("reported: %v", err)
	if err := Apply(ns, b); err == nil {
		t.Fatal("Apply of the replacement succeeded: Check was wrong")
	}
	got, ok, err := Get(ns, sid)
	if err != nil || !ok || len(got.Rules) != MaxRules || got.Rules[0].String() != a.Rules[0].String() {
		t.Fatalf("after the refused replacement: ok %v err %v, %d rules", ok, err, len(got.Rules))
	}
	small := Instance{SID: sid, ArgsBits: 16, Policy: fwrule.Accept, Rules: b.Rules[:1000]}
	if err := CheckCapacity(ns, []Instance{small}); err != nil {
		t.Fatalf("Check(a set that fits): %v", err)
	}
	if err := Apply(ns, small); err != nil {
		t.Fatalf("Apply(a set that fits): %v", err)
	}
}
