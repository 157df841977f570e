package controller

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/srunaware"
)

func TestConflicts(t *testing.T) {
	end := func(dst string) nodestate.Route {
		return nodestate.Route{Dst: netip.MustParsePrefix(dst), Seg6Local: &nodestate.Seg6Local{Action: "End"}}
	}
	desired := &nodestate.Node{Name: "n", Routes: []nodestate.Route{end("fc00:2::1/128"), end("fc00:2::2/128")}}
	observed := &nodestate.Node{Name: "n", Foreign: []nodestate.ForeignRoute{
		{Route: end("fc00:2::1/128"), Protocol: nodestate.ProtoManual},
		{Route: end("fc00:2::2/128"), Protocol: 4},
		{Route: end("fc00:2::3/128"), Protocol: nodestate.ProtoManual}, // no domain SID there
	}}
	d := Compute(observed, desired)
	if len(d.Conflicts) != 2 {
		t.Fatalf("conflicts %q, want 2", d.Conflicts)
	}
	if !strings.Contains(d.Conflicts[0], "made by hand") || !strings.Contains(d.Conflicts[1], "another tool (route protocol 4)") {
		t.Errorf("conflicts %q", d.Conflicts)
	}
	for _, op := range d.Ops() {
		if strings.Contains(op.String(), "fc00:2::3") {
			t.Errorf("diff touches a SID the domain does not own: %s", op)
		}
	}
	if err := (&Result{Diffs: []Diff{d}}).blockers(); err == nil || !strings.Contains(err.Error(), "node n: sid fc00:2::1/128") {
		t.Errorf("conflicts error: %v", err)
	}
}

// TestConflictsEBPF: a hand-made proxy or firewall SID where the domain
// wants one of its own is a conflict too.
func TestConflictsEBPF(t *testing.T) {
	sid := netip.MustParsePrefix("fc00:2::a1/128")
	desired := &nodestate.Node{Name: "n", Services: proxies(srunaware.Proxy{SID: sid, Behavior: "End.AD"})}
	observed := &nodestate.Node{Name: "n", Foreign: []nodestate.ForeignRoute{
		{Route: nodestate.Route{Dst: sid, Seg6Local: &nodestate.Seg6Local{Action: "End.AS"}}, Protocol: nodestate.ProtoManual},
	}}
	if c := Conflicts(observed, desired); len(c) != 1 || !strings.Contains(c[0], "made by hand") {
		t.Errorf("conflicts %q", c)
	}
}
