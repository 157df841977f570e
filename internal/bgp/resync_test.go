package bgp

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// The periodic resync recomputes every prefix (reading GoBGP's whole RIB)
// only when the kernel's table has drifted from the speaker's record: an
// idle speaker whose routes are as it installed them marks nothing; a
// route deleted, added or changed behind its back, or a legacy-metric
// route, marks every prefix.
func TestResyncOnlyOnDrift(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.UniqueName("sct-bgpr-")
	if err := nsutil.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsutil.Delete(ns) })
	testutil.Exec(t, ns, "ip", "link", "add", "ia", "type", "veth", "peer", "name", "ib")
	testutil.Exec(t, ns, "ip", "link", "set", "ia", "up")
	testutil.Exec(t, ns, "ip", "link", "set", "ib", "up")
	testutil.Exec(t, ns, "ip", "-6", "addr", "add", "fc00:99::1/64", "dev", "ia", "nodad")
	testutil.Exec(t, ns, "ip", "-6", "addr", "add", "fc00:98::1/64", "dev", "ib", "nodad")

	a, b := netip.MustParseAddr("fc00:99::2"), netip.MustParseAddr("fc00:98::2")
	in := &nodestate.BGP{Neighbors: []nodestate.BGPNeighbor{{Addr: a, Dev: "ia"}, {Addr: b, Dev: "ib"}}}
	up := func(netip.Addr) bool { return true }
	p := netip.MustParsePrefix
	learned := map[netip.Prefix][]Candidate{
		p("fc00:2::/64"):   {{Neighbor: a, ASPath: 2}},
		p("fc00:3::/64"):   {{Neighbor: a, ASPath: 2}, {Neighbor: b, ASPath: 2}},
		p("fc00:4::1/128"): {{Neighbor: b, ASPath: 1}},
	}
	s := New(ns, t.TempDir(), nil)
	t.Cleanup(s.closeHandle)

	tick := func() bool {
		t.Helper()
		s.takeDirty()
		s.resyncTick()
		all, _ := s.takeDirty()
		return all
	}
	if !tick() {
		t.Error("no record yet: the resync did not mark every prefix")
	}
	install := func() {
		t.Helper()
		if err := s.install(in, learned, up, nil); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if tick() {
				t.Fatalf("resync %d of an idle speaker whose table is as installed marked every prefix", i)
			}
		}
	}
	install()
	for _, c := range []struct {
		what string
		cmd  []string
	}{
		{"a route deleted", []string{"ip", "-6", "route", "del", "fc00:2::/64", "proto", "199", "metric", strconv.Itoa(Metric)}},
		{"a route added", []string{"ip", "-6", "route", "add", "fc00:7::/64", "via", "fc00:99::2", "dev", "ia", "proto", "199", "metric", strconv.Itoa(Metric)}},
		{"a route changed", []string{"ip", "-6", "route", "replace", "fc00:4::1/128", "via", "fc00:99::2", "dev", "ia", "proto", "199", "metric", strconv.Itoa(Metric)}},
		{"a legacy route", []string{"ip", "-6", "route", "add", "fc00:8::/64", "via", "fc00:99::2", "dev", "ia", "proto", "199", "metric", "20"}},
	} {
		testutil.Exec(t, ns, c.cmd...)
		if !tick() {
			t.Errorf("%s behind the speaker's back: the resync did not mark every prefix", c.what)
		}
		install() // the full recomputation mends it; idle again
	}
}
