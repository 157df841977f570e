package dataplane

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPrivilegedMainRoutes6 reads a main table with a connected route, a
// multipath route (one next hop without carrier), a blackhole and a
// seg6local SID, all of other protocols than segchain's.
func TestPrivilegedMainRoutes6(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newRouteNetns(t)
	for _, c := range [][]string{
		{"ip", "link", "add", "dp2", "type", "veth", "peer", "name", "dp3"},
		{"ip", "link", "set", "dp2", "up"}, // dp3 stays down: dp2 has no carrier
		{"ip", "addr", "add", "fc00:13::1/64", "dev", "dp2", "nodad"},
		{"ip", "-6", "route", "add", "fc00:4::/64", "proto", "199", "metric", "20",
			"nexthop", "via", "fc00:12::5", "dev", "dp0", "nexthop", "via", "fc00:13::6", "dev", "dp2"},
		{"ip", "-6", "route", "add", "blackhole", "fc00:9::/64", "proto", "186"},
		{"ip", "-6", "route", "add", "fc00:7::1/128", "encap", "seg6local", "action", "End", "dev", "lo"},
	} {
		testutil.Exec(t, ns, c...)
	}
	h, err := Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	routes, err := h.MainRoutes6()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]nodestate.FIBRoute{}
	for _, r := range routes {
		got[r.Dst.String()] = r
	}
	want := map[string]nodestate.FIBRoute{
		"fc00:12::/64": {Dst: pfx("fc00:12::/64"), Protocol: 2, Type: "unicast", Metric: 256, NextHops: []nodestate.FIBNextHop{{Dev: "dp0"}}},
		"fc00:4::/64": {Dst: pfx("fc00:4::/64"), Protocol: 199, Type: "unicast", Metric: 20, NextHops: []nodestate.FIBNextHop{
			{Via: ip("fc00:12::5"), Dev: "dp0"}, {Via: ip("fc00:13::6"), Dev: "dp2", LinkDown: true}}},
		"fc00:9::/64":   {Dst: pfx("fc00:9::/64"), Protocol: 186, Type: "blackhole", Metric: 1024, NextHops: []nodestate.FIBNextHop{{Dev: "lo"}}},
		"fc00:7::1/128": {Dst: pfx("fc00:7::1/128"), Protocol: 3, Type: "unicast", Metric: 1024, Encap: "seg6local", NextHops: []nodestate.FIBNextHop{{Dev: "lo"}}},
	}
	for k, w := range want {
		if diff := cmp.Diff(w, got[k], cmpOpts); diff != "" {
			t.Errorf("route %s (-want +got):\n%s\nall: %v", k, diff, routes)
		}
	}
}
