package controller

import (
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// TestNodeAndChainState: a node that holds nothing of segchain's (only
// sysctls) is not applied, one with something of it drifted; a chain is
// not applied only when every node it crosses is.
func TestNodeAndChainState(t *testing.T) {
	pending := Diff{Adds: []agent.Op{{Kind: agent.KindSysctl}}}
	bare := &nodestate.Node{Sysctls: []nodestate.Sysctl{{Key: "net.ipv6.conf.all.forwarding", Value: "1"}}}
	some := &nodestate.Node{TunSrc: "fc00:1::1"}
	for _, tc := range []struct {
		name string
		got  *nodestate.Node
		d    Diff
		want string
	}{
		{"unread", nil, pending, StateUnknown},
		{"in sync", some, Diff{}, StateInSync},
		{"bare", bare, pending, StateNotApplied},
		{"something", some, pending, StateDrift},
		{"bare with extras", bare, Diff{Deletes: pending.Adds}, StateDrift},
	} {
		if got := nodeState(tc.got, tc.d); got != tc.want {
			t.Errorf("%s: node state %q, want %q", tc.name, got, tc.want)
		}
	}
	state := map[string]string{"a": StateNotApplied, "b": StateNotApplied, "c": StateInSync, "x": StateUnknown}
	for _, tc := range []struct {
		nodes  []string
		broken bool
		want   string
	}{
		{[]string{"a", "b"}, true, StateNotApplied},
		{[]string{"a", "c"}, true, StateDrift},
		{[]string{"a", "c"}, false, StateDrift},
		{[]string{"c"}, false, StateInSync},
		{[]string{"c"}, true, StateDrift},
		{[]string{"a", "x"}, true, StateUnknown},
		{[]string{"a", "empty"}, true, StateNotApplied}, // a node with nothing planned says nothing
	} {
		if got := chainState(tc.nodes, state, tc.broken); got != tc.want {
			t.Errorf("chain over %v (broken %v): %q, want %q", tc.nodes, tc.broken, got, tc.want)
		}
	}
}
