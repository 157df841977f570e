package controller

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// What an older segchain installed with protocol 197 (and 198 for
// hand-made SIDs) is renumbered by apply: a route by one replace (same
// key, in place), a rule by an add (with the adds) and a delete (with the
// deletes), a hand-made SID by a replace to ProtoManual. destroy removes
// legacy routes and rules like current ones.
func TestComputeRenumbersLegacy(t *testing.T) {
	p := netip.MustParsePrefix
	route := nodestate.Route{Dst: p("fc00:3::/64"), Via: netip.MustParseAddr("fc00:12::2"), Dev: "eth0"}
	sid := nodestate.Route{Dst: p("fc00:2::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End"}}
	hand := nodestate.Route{Dst: p("fc00:2::99/128"), Seg6Local: &nodestate.Seg6Local{Action: "End"}}
	rule := nodestate.Rule{Family: 6, Priority: 100, Src: p("fc00:a::/64"), Table: 100}
	legacy := func(r nodestate.Route) nodestate.Route { r.Proto = nodestate.ProtoLegacy; return r }
	oldRule := rule
	oldRule.Proto = nodestate.ProtoLegacy

	desired := &nodestate.Node{Name: "n", Routes: []nodestate.Route{route, sid}, Rules: []nodestate.Rule{rule}}
	observed := &nodestate.Node{Name: "n", Routes: []nodestate.Route{legacy(route), legacy(sid)}, Rules: []nodestate.Rule{oldRule},
		Foreign: []nodestate.ForeignRoute{{Route: hand, Protocol: nodestate.ProtoManualLegacy}}}
	d := Compute(observed, desired)
	hNew, hOld := hand, hand
	hNew.Proto, hOld.Proto = nodestate.ProtoManual, nodestate.ProtoManualLegacy
	lr, ls := legacy(route), legacy(sid)
	want := Diff{Node: "n",
		Adds: []agent.Op{
			{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &route, OldRoute: &lr},
			{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &sid, OldRoute: &ls},
			{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &hNew, OldRoute: &hOld},
			{Kind: agent.KindRule, Action: agent.ActAdd, Rule: &rule},
		},
		Deletes: []agent.Op{{Kind: agent.KindRule, Action: agent.ActDelete, Rule: &oldRule}},
	}
	opStrings := func(ops []agent.Op) []string {
		var out []string
		for _, op := range ops {
			s := op.String()
			if op.OldRoute != nil {
				s += " (was " + op.OldRoute.String() + ")"
			}
			out = append(out, s)
		}
		return out
	}
	if diff := cmp.Diff(opStrings(want.Adds), opStrings(d.Adds)); diff != "" {
		t.Errorf("Compute adds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(opStrings(want.Deletes), opStrings(d.Deletes)); diff != "" {
		t.Errorf("Compute deletes (-want +got):\n%s", diff)
	}

	// Renumbered: nothing to do.
	observed = &nodestate.Node{Name: "n", Routes: []nodestate.Route{route, sid}, Rules: []nodestate.Rule{rule},
		Foreign: []nodestate.ForeignRoute{{Route: hand, Protocol: nodestate.ProtoManual}}}
	if d := Compute(observed, desired); !d.Empty() {
		t.Errorf("after renumbering: %+v, want no ops", d)
	}

	// A domain SID where a legacy hand-made one is: a conflict, no renumbering.
	desired.Routes = append(desired.Routes, hand)
	observed.Foreign[0].Protocol = nodestate.ProtoManualLegacy
	d = Compute(observed, desired)
	if len(d.Conflicts) != 1 {
		t.Errorf("conflicts %v, want the hand-made SID", d.Conflicts)
	}
	for _, op := range d.Adds {
		if op.Route != nil && op.Route.Proto != 0 {
			t.Errorf("renumbering a SID the domain wants: %v", op)
		}
	}

	// destroy: legacy and current alike.
	observed = &nodestate.Node{Name: "n", Routes: []nodestate.Route{route, legacy(sid)}, Rules: []nodestate.Rule{oldRule}}
	td := Teardown(observed, desired, nil)
	var dels []string
	for _, op := range td.Deletes {
		switch {
		case op.Route != nil:
			dels = append(dels, op.Route.String())
		case op.Rule != nil:
			dels = append(dels, op.Rule.String())
		}
	}
	wantDels := []string{oldRule.String(), route.String(), legacy(sid).String()}
	if diff := cmp.Diff(wantDels, dels); diff != "" {
		t.Errorf("Teardown deletes (-want +got):\n%s", diff)
	}
}
