package dataplane

import (
	"fmt"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPrivilegedLegacyProtocol: routes and rules an older segchain
// stamped with nodestate.ProtoLegacy (197) are observed as the domain's
// with Proto set, a ReplaceRoute of the same route renumbers it in place
// (one route, never none), AddRule then DeleteRule renumbers a rule, and
// DeleteRoute / DeleteRule of an observed legacy object remove it. Other
// protocols (hand-made, BGP, foreign) stay unobserved.
func TestPrivilegedLegacyProtocol(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.UniqueName("pr-dpl-")
	if err := nsutil.Create(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nsutil.Delete(ns); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	for _, c := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", "dp0", "type", "veth", "peer", "name", "dp1"},
		{"ip", "link", "set", "dp0", "up"},
		{"ip", "link", "set", "dp1", "up"},
		{"ip", "addr", "add", "10.0.0.1/24", "dev", "dp0"},
		{"ip", "addr", "add", "fc00:12::1/64", "dev", "dp0", "nodad"},
	} {
		testutil.Exec(t, ns, c...)
	}
	old := fmt.Sprint(nodestate.ProtoLegacy)
	for _, c := range [][]string{
		{"-6", "route", "add", "fc00:3::/64", "via", "fc00:12::2", "dev", "dp0", "proto", old},
		{"-4", "route", "add", "10.3.0.0/16", "via", "10.0.0.2", "dev", "dp0", "proto", old},
		{"-6", "route", "add", "local", "fc00:2::1/128", "encap", "seg6local", "action", "End", "dev", "lo", "table", "main", "proto", old},
		{"-6", "route", "add", "fc00:4::/64", "encap", "seg6", "mode", "encap", "segs", "fc00:2::1", "dev", "dp0", "table", "100", "proto", old},
		{"-6", "rule", "add", "pref", "100", "from", "fc00:a::/64", "lookup", "100", "proto", old},
		// not the domain's: stay unobserved
		{"-6", "route", "add", "fc00:5::/64", "via", "fc00:12::2", "dev", "dp0", "proto", fmt.Sprint(nodestate.ProtoManualLegacy)},
		{"-6", "route", "add", "fc00:6::/64", "via", "fc00:12::2", "dev", "dp0", "proto", fmt.Sprint(nodestate.ProtoBGP)},
		{"-6", "rule", "add", "pref", "101", "from", "fc00:b::/64", "lookup", "100", "proto", "196"},
	} {
		testutil.Exec(t, ns, append([]string{"ip"}, c...)...)
	}
	h := openT(t, ns)
	routes, err := h.Routes()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := h.Rules()
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 4 || len(rules) != 1 {
		t.Fatalf("observed %d routes, %d rules, want 4 and 1: %v %v", len(routes), len(rules), routes, rules)
	}
	for _, r := range routes {
		if r.Proto != nodestate.ProtoLegacy {
			t.Errorf("route %s: Proto = %d, want %d", r, r.Proto, nodestate.ProtoLegacy)
		}
	}
	if rules[0].Proto != nodestate.ProtoLegacy {
		t.Errorf("rule %s: Proto = %d, want %d", rules[0], rules[0].Proto, nodestate.ProtoLegacy)
	}
	_, sids, err := h.RoutesAndLocalSIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(sids) != 1 || !nodestate.Owned(sids[0].Protocol) {
		t.Errorf("local SIDs %v: want the legacy SID, owned", sids)
	}

	// Renumber: routes replaced in place, the rule added anew then the
	// old one deleted.
	for _, r := range routes {
		n := r
		n.Proto = 0
		if err := h.ReplaceRoute(n); err != nil {
			t.Fatal(err)
		}
	}
	n := rules[0]
	n.Proto = 0
	if err := h.AddRule(n); err != nil {
		t.Fatalf("add the renumbered rule next to the old one: %v", err)
	}
	if err := h.DeleteRule(rules[0]); err != nil {
		t.Fatal(err)
	}
	all := testutil.Exec(t, ns, "sh", "-c", "ip -N -6 route show table all; ip -N -4 route show table all; ip -N -6 rule show")
	if c := strings.Count(all, " proto "+old); c != 0 {
		t.Errorf("protocol %s left after renumbering:\n%s", old, all)
	}
	if c := strings.Count(all, fmt.Sprintf(" proto %d", nodestate.Proto)); c != 5 {
		t.Errorf("%d objects of protocol %d after renumbering, want 5:\n%s", c, nodestate.Proto, all)
	}
	for _, dst := range []string{"fc00:3::/64", "fc00:2::1", "fc00:4::/64"} {
		c := 0
		for _, l := range strings.Split(all, "\n") {
			f := strings.Fields(l)
			if len(f) > 1 && (f[0] == dst || f[1] == dst) { // ip -N prints a local route's type first
				c++
			}
		}
		if c != 1 {
			t.Errorf("%s: %d routes after renumbering, want 1:\n%s", dst, c, all)
		}
	}

	// Delete legacy objects: back to 197, then DeleteRoute / DeleteRule
	// of what Routes and Rules report.
	for _, r := range routes {
		if err := h.ReplaceRouteAs(r, nodestate.ProtoLegacy); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.AddRule(rules[0]); err != nil {
		t.Fatal(err)
	}
	if err := h.DeleteRule(n); err != nil {
		t.Fatal(err)
	}
	if routes, err = h.Routes(); err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if err := h.DeleteRoute(r); err != nil {
			t.Fatal(err)
		}
	}
	if rules, err = h.Rules(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if err := h.DeleteRule(r); err != nil {
			t.Fatal(err)
		}
	}
	all = testutil.Exec(t, ns, "sh", "-c", "ip -N -6 route show table all; ip -N -4 route show table all; ip -N -6 rule show")
	for _, p := range []int{nodestate.Proto, nodestate.ProtoLegacy} {
		if strings.Contains(all, fmt.Sprintf(" proto %d", p)) {
			t.Errorf("protocol %d left after deleting:\n%s", p, all)
		}
	}
	for _, p := range []int{nodestate.ProtoManualLegacy, nodestate.ProtoBGP, 196} {
		if !strings.Contains(all, fmt.Sprintf(" proto %d", p)) {
			t.Errorf("protocol %d (not the domain's) removed:\n%s", p, all)
		}
	}
}
