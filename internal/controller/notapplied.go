package controller

import (
	"slices"

	"github.com/segchain/segchain/internal/nodestate"
)

// Node and chain states in Status (NodeStatus.State, ChainStatus.State).
const (
	// StateInSync: the node holds what the plan installs; for a chain,
	// every node it crosses does.
	StateInSync = "in-sync"
	// StateDrift: something the plan installs is missing, differs or is
	// extra (a node), or a node the chain crosses lacks something (a chain).
	StateDrift = "drift"
	// StateNotApplied: nothing segchain installs is on the node (never
	// applied, or destroyed); for a chain, on none of the nodes it crosses.
	StateNotApplied = "not-applied"
	// StateUnknown: the node could not be read (its Error says why); for a
	// chain, one of its nodes could not.
	StateUnknown = "unknown"
)

// holdsNothing reports whether observation found nothing of segchain's on
// a node: no owned route or rule, service, boundary filter, HMAC key,
// tunnel source or BGP speaker. Sysctls do not count: a lab (or the
// distribution) enables forwarding before any apply.
func holdsNothing(n *nodestate.Node) bool {
	return len(n.Routes) == 0 && len(n.Rules) == 0 && len(n.Services) == 0 &&
		len(n.HMACKeys) == 0 && n.Boundary == nil && n.TunSrc == "" && n.BGP == nil
}

// nodeState is a node's state from its observation (nil: not read) and
// its diff against the plan.
func nodeState(got *nodestate.Node, d Diff) string {
	switch {
	case got == nil:
		return StateUnknown
	case d.Empty():
		return StateInSync
	case len(d.Deletes) == 0 && holdsNothing(got):
		return StateNotApplied
	}
	return StateDrift
}

// chainState is a chain's state from the states of the nodes it crosses
// (state: node → NodeStatus.State) and whether any of them lacks something
// the chain needs (broken).
func chainState(nodes []string, state map[string]string, broken bool) string {
	var seen []string
	for _, n := range nodes {
		if s, ok := state[n]; ok {
			seen = append(seen, s)
		}
	}
	switch {
	case slices.Contains(seen, StateUnknown):
		return StateUnknown
	case len(seen) > 0 && !slices.ContainsFunc(seen, func(s string) bool { return s != StateNotApplied }):
		return StateNotApplied
	case broken || slices.Contains(seen, StateNotApplied):
		return StateDrift
	}
	return StateInSync
}
