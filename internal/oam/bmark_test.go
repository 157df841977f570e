package oam

import (
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/nodestate"
)

// markState.same says whether a resync has anything to install: the
// same routes, rules and selectors, whatever order desired read the rules
// in and whatever their Seg6 pointers; a selector or an SRH that differs
// is a change.
func TestMarkStateSame(t *testing.T) {
	seg := func(oflag bool, segs ...string) *nodestate.Seg6Encap {
		e := &nodestate.Seg6Encap{Mode: "encap", OFlag: oflag}
		for _, s := range segs {
			e.Segs = append(e.Segs, netip.MustParseAddr(s))
		}
		return e
	}
	route := func(e *nodestate.Seg6Encap) nodestate.Route {
		return nodestate.Route{Dst: netip.MustParsePrefix("fc00:4d::/64"), Table: 0x2a001234, Dev: "eth-r1", Seg6: e}
	}
	rule := func(prio int, dport uint16) nodestate.Rule {
		return nodestate.Rule{Family: 6, Priority: prio, Dst: netip.MustParsePrefix("fc00:4d::/64"), IPProto: 17,
			Dport: nodestate.PortRange{From: dport}, Table: 0x2a001234, Proto: ProtoSample}
	}
	sel := func(prio uint32) boundary.SampleSel {
		return boundary.SampleSel{Family: 6, Dst: netip.MustParsePrefix("fc00:4d::/64"), Proto: 17, Slot: 1, Rate: 10, Mark: 0x2a011234, Prio: prio}
	}
	base := markState{
		routes: []nodestate.Route{route(seg(true, "fc00:2::1", "fc00:4::1"))},
		rules:  []nodestate.Rule{rule(99, 7000), rule(199, 8000)},
		marks:  []uint32{0x2a011234, 0x2a011234},
		sels:   []boundary.SampleSel{sel(100), sel(200)},
	}
	for _, tc := range []struct {
		name string
		o    markState
		want bool
	}{
		{"equal, other pointers", markState{
			routes: []nodestate.Route{route(seg(true, "fc00:2::1", "fc00:4::1"))},
			rules:  []nodestate.Rule{rule(99, 7000), rule(199, 8000)},
			marks:  []uint32{0x2a011234, 0x2a011234},
			sels:   []boundary.SampleSel{sel(100), sel(200)},
		}, true},
		{"rules read in another order", markState{
			routes: base.routes,
			rules:  []nodestate.Rule{rule(199, 8000), rule(99, 7000)},
			marks:  []uint32{0x2a011234, 0x2a011234},
			sels:   base.sels,
		}, true},
		{"another SID", markState{
			routes: []nodestate.Route{route(seg(true, "fc00:3::1", "fc00:4::1"))},
			rules:  base.rules, marks: base.marks, sels: base.sels,
		}, false},
		{"a rule's port", markState{
			routes: base.routes,
			rules:  []nodestate.Rule{rule(99, 7001), rule(199, 8000)},
			marks:  base.marks, sels: base.sels,
		}, false},
		{"a selector's priority", markState{
			routes: base.routes, rules: base.rules, marks: base.marks,
			sels: []boundary.SampleSel{sel(100), sel(201)},
		}, false},
		{"a rule fewer", markState{
			routes: base.routes, rules: base.rules[:1], marks: base.marks[:1], sels: base.sels,
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := base.same(tc.o); got != tc.want {
				t.Errorf("same = %v, want %v", got, tc.want)
			}
			if got := tc.o.same(base); got != tc.want {
				t.Errorf("same (reversed) = %v, want %v", got, tc.want)
			}
		})
	}
}
