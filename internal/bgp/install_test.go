package bgp

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	api "github.com/osrg/gobgp/v3/api"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

func prefixPath(t *testing.T, p string, withdraw bool) *api.Path {
	t.Helper()
	pp := netip.MustParsePrefix(p)
	nlri, err := anypb.New(&api.IPAddressPrefix{Prefix: pp.Addr().String(), PrefixLen: uint32(pp.Bits())})
	if err != nil {
		t.Fatal(err)
	}
	return &api.Path{Family: ipv6Unicast, Nlri: nlri, IsWithdraw: withdraw}
}

// A table event names the prefixes to recompute; a withdrawal among them
// wakes the recomputation at once; a path whose prefix cannot be read, a
// session or carrier change (poke) make it every prefix.
func TestPokePaths(t *testing.T) {
	s := New("", t.TempDir(), nil)
	s.pokePaths([]*api.Path{prefixPath(t, "fc00:2::/64", false), prefixPath(t, "fc00:3::1/128", false)})
	if len(s.urgent) != 0 || len(s.kick) != 1 {
		t.Errorf("new paths: urgent %d kick %d, want a coalesced wake-up", len(s.urgent), len(s.kick))
	}
	s.pokePaths([]*api.Path{prefixPath(t, "fc00:4::/64", true)})
	if len(s.urgent) != 1 {
		t.Error("a withdrawal did not wake the recomputation at once")
	}
	all, dsts := s.takeDirty()
	var got []string
	for d := range dsts {
		got = append(got, d.String())
	}
	if all || len(got) != 3 || !dsts[netip.MustParsePrefix("fc00:3::1/128")] || !dsts[netip.MustParsePrefix("fc00:4::/64")] {
		t.Errorf("dirty: all %v, %v; want the three prefixes", all, got)
	}
	if all, dsts := s.takeDirty(); all || len(dsts) != 0 {
		t.Errorf("taken twice: all %v, %v", all, dsts)
	}
	s.pokePaths([]*api.Path{{Family: ipv6Unicast}})
	if all, _ := s.takeDirty(); !all {
		t.Error("a path without a readable prefix did not make it every prefix")
	}
	s.poke()
	if all, _ := s.takeDirty(); !all {
		t.Error("poke did not make it every prefix")
	}
}

// A recomputation of some prefixes changes only those: a route it does
// not cover stays even though it is no longer wanted, a covered one that
// is no longer wanted goes, a changed one is replaced; the record matches
// the kernel's table after. A recomputation of every prefix reads the
// kernel's table and removes what nothing wants, also a route put there
// behind the speaker's back.
func TestInstallPartial(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.UniqueName("sct-bgpi-")
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
	s := New(ns, t.TempDir(), nil)
	t.Cleanup(s.closeHandle)
	kernel := func() string {
		rs, err := s.Installed()
		if err != nil {
			t.Fatal(err)
		}
		var l []string
		for _, r := range rs {
			l = append(l, r.String())
		}
		return strings.Join(l, "; ")
	}
	record := func() string {
		var l []string
		rs := make([]Route, 0, len(s.routes))
		for _, r := range s.routes {
			rs = append(rs, r)
		}
		sortRoutes(rs)
		for _, r := range rs {
			l = append(l, r.String())
		}
		return strings.Join(l, "; ")
	}

	// step recomputes only (nil: every prefix) from learned and checks
	// the kernel's table and the speaker's record after.
	step := func(what string, learned map[netip.Prefix][]Candidate, only map[netip.Prefix]bool, want string) {
		t.Helper()
		if err := s.install(in, learned, up, only); err != nil {
			t.Fatal(err)
		}
		if got := kernel(); got != want {
			t.Fatalf("kernel after %s:\n got %s\nwant %s", what, got, want)
		}
		if got := record(); got != want {
			t.Errorf("record after %s:\n got %s\nwant %s", what, got, want)
		}
	}
	step("the first recomputation", map[netip.Prefix][]Candidate{
		p("fc00:2::/64"): {{Neighbor: a, ASPath: 2}},
		p("fc00:3::/64"): {{Neighbor: a, ASPath: 2}, {Neighbor: b, ASPath: 2}},
		p("fc00:4::/64"): {{Neighbor: b, ASPath: 1}},
	}, nil, "fc00:2::/64 via fc00:99::2 dev ia; fc00:3::/64 via fc00:98::2 dev ib nexthop via fc00:99::2 dev ia; fc00:4::/64 via fc00:98::2 dev ib")
	// Some prefixes: fc00:2 moves to b, fc00:3 is gone (covered), fc00:4
	// is gone too but not covered: it stays until a full recomputation.
	learned := map[netip.Prefix][]Candidate{p("fc00:2::/64"): {{Neighbor: b, ASPath: 3}}}
	step("a partial recomputation", learned, map[netip.Prefix]bool{p("fc00:2::/64"): true, p("fc00:3::/64"): true},
		"fc00:2::/64 via fc00:98::2 dev ib; fc00:4::/64 via fc00:98::2 dev ib")
	// Behind the speaker's back: a route of its protocol and metric, and
	// routes an agent before the metric's change left (metric 20, one of
	// them to a prefix the speaker wants).
	testutil.Exec(t, ns, "ip", "-6", "route", "add", "fc00:7::/64", "via", "fc00:99::2", "dev", "ia", "proto", "199", "metric", strconv.Itoa(Metric))
	testutil.Exec(t, ns, "ip", "-6", "route", "add", "fc00:2::/64", "via", "fc00:99::2", "dev", "ia", "proto", "199", "metric", "20")
	testutil.Exec(t, ns, "ip", "-6", "route", "add", "fc00:8::/64", "via", "fc00:99::2", "dev", "ia", "proto", "199", "metric", "20")
	step("a full recomputation", learned, nil, "fc00:2::/64 via fc00:98::2 dev ib")
	if got := testutil.Exec(t, ns, "ip", "-6", "route", "show", "proto", "199"); strings.Contains(got, "metric 20 ") || strings.Contains(got, "fc00:8::") {
		t.Errorf("legacy metric-20 routes left after a full recomputation:\n%s", got)
	}
	testutil.Exec(t, ns, "ip", "-6", "route", "add", "fc00:9::/64", "via", "fc00:99::2", "dev", "ia", "proto", "199", "metric", "20")
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.Exec(t, ns, "ip", "-6", "route", "show", "proto", "199"); got != "" {
		t.Errorf("routes left after flush:\n%s", got)
	}
}

// A session that leaves established marks for recomputation only the
// prefixes the speaker installed over that neighbour, at once; one that
// comes up marks nothing (its paths arrive as table events); an
// unreadable neighbour address, or no record of what is installed, make
// it every prefix. Fails when a session's change marks every prefix (as
// until session 18: each flap recomputed the whole table, an unrelated
// prefix included).
func TestPeerDownMarksItsPrefixes(t *testing.T) {
	s := New("", t.TempDir(), nil)
	a, b := netip.MustParseAddr("fc00:99::2"), netip.MustParseAddr("fc00:98::2")
	p := netip.MustParsePrefix
	s.routes = map[netip.Prefix]Route{
		p("fc00:2::/64"):   {Dst: p("fc00:2::/64"), Hops: []Hop{{Via: a, Dev: "ia"}}},
		p("fc00:3::/64"):   {Dst: p("fc00:3::/64"), Hops: []Hop{{Via: b, Dev: "ib"}, {Via: a, Dev: "ia"}}},
		p("fc00:4::1/128"): {Dst: p("fc00:4::1/128"), Hops: []Hop{{Via: b, Dev: "ib"}}},
	}
	s.peerEvent(a.String(), true)
	if all, dsts := s.takeDirty(); all || len(dsts) != 0 || len(s.urgent) != 0 {
		t.Errorf("a session established: all %v, %v, urgent %d; want nothing marked", all, dsts, len(s.urgent))
	}
	s.peerEvent(a.String(), false)
	if len(s.urgent) != 1 {
		t.Error("a session down did not wake the recomputation at once")
	}
	all, dsts := s.takeDirty()
	if all || len(dsts) != 2 || !dsts[p("fc00:2::/64")] || !dsts[p("fc00:3::/64")] {
		t.Errorf("a session down: all %v, %v; want the two prefixes routed over %s", all, dsts, a)
	}
	if dsts[p("fc00:4::1/128")] {
		t.Errorf("a session down marked fc00:4::1/128, routed over %s only", b)
	}
	s.peerEvent("not an address", false)
	if all, _ := s.takeDirty(); !all {
		t.Error("an unreadable neighbour address did not make it every prefix")
	}
	s.routes = nil
	s.peerEvent(b.String(), false)
	if all, _ := s.takeDirty(); !all {
		t.Error("no record of the installed routes: a session down did not make it every prefix")
	}
}
