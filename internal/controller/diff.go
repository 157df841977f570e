package controller

import (
	"bytes"
	"reflect"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/kinds"
)

// Diff is what must change on one node, split so that the controller can
// add everything everywhere before it removes anything (make-before-break).
type Diff struct {
	Node    string     `json:"node"`
	Adds    []agent.Op `json:"adds,omitempty"`
	Deletes []agent.Op `json:"deletes,omitempty"`
	// Conflicts are objects the domain wants but another owner holds (a
	// SID made by hand with segchain sid add): apply refuses to run.
	Conflicts []string `json:"conflicts,omitempty"`
	// Unsupported is what the node's kernel cannot install, found by its
	// feature probe (agent.FeatureChecker): apply refuses to run.
	Unsupported []string `json:"unsupported,omitempty"`
}

// Empty reports whether the node is already as desired.
func (d Diff) Empty() bool { return len(d.Adds) == 0 && len(d.Deletes) == 0 }

// Ops returns every op in execution order.
func (d Diff) Ops() []agent.Op { return append(append([]agent.Op(nil), d.Adds...), d.Deletes...) }

// Compute diffs observed against desired state. Adds come in dependency
// order: settings, keys, endpoints and static routes, then headend policies,
// then the rules that steer traffic into them; deletes in the reverse order.
func Compute(observed, desired *nodestate.Node) Diff {
	d := Diff{Node: desired.Name, Conflicts: Conflicts(observed, desired)}

	obsSys := map[string]string{}
	for _, s := range observed.Sysctls {
		obsSys[s.Key] = s.Value
	}
	for _, s := range desired.Sysctls {
		if obsSys[s.Key] != s.Value {
			s := s
			d.Adds = append(d.Adds, agent.Op{Kind: agent.KindSysctl, Action: agent.ActSet, Sysctl: &s, OldValue: obsSys[s.Key]})
		}
	}

	obsKeys := map[uint32]nodestate.HMACKey{}
	for _, k := range observed.HMACKeys {
		obsKeys[k.ID] = k
	}
	for _, k := range desired.HMACKeys {
		k := k
		old, ok := obsKeys[k.ID]
		switch {
		case !ok:
			d.Adds = append(d.Adds, agent.Op{Kind: agent.KindHMAC, Action: agent.ActSet, HMAC: &k})
		case old.Alg != k.Alg || !bytes.Equal(old.Secret, k.Secret):
			d.Adds = append(d.Adds, agent.Op{Kind: agent.KindHMAC, Action: agent.ActSet, HMAC: &k, OldHMAC: &old})
		}
	}

	if desired.TunSrc != "" && desired.TunSrc != observed.TunSrc {
		d.Adds = append(d.Adds, agent.Op{Kind: agent.KindTunSrc, Action: agent.ActSet, TunSrc: desired.TunSrc, OldTun: observed.TunSrc})
	}

	// The boundary filter first: nothing the domain installs is reachable
	// from outside before it is in place. Removing it comes last.
	var boundaryDel *agent.Op
	if !reflect.DeepEqual(observed.Boundary, desired.Boundary) && observed.Boundary.String() != desired.Boundary.String() {
		op := agent.Op{Kind: agent.KindBoundary, Action: agent.ActSet, Boundary: desired.Boundary, OldBoundary: observed.Boundary}
		if desired.Boundary == nil {
			boundaryDel = &op
		} else {
			d.Adds = append(d.Adds, op)
		}
	}

	// The BGP speaker (routing: bgp) comes up with the settings, before
	// anything is steered over the paths it learns, and stops last: its
	// routes carry a metric of their own (internal/bgp), so static routes
	// and BGP routes to the same prefix coexist while a domain switches.
	var bgpDel *agent.Op
	if observed.BGP.String() != desired.BGP.String() {
		op := agent.Op{Kind: agent.KindBGP, Action: agent.ActSet, BGP: desired.BGP, OldBGP: observed.BGP}
		if desired.BGP == nil {
			bgpDel = &op
		} else {
			d.Adds = append(d.Adds, op)
		}
	}

	obsRoutes := map[string]nodestate.Route{}
	for _, r := range observed.Routes {
		obsRoutes[r.Key()] = r
	}
	wantRoutes := map[string]bool{}
	var endpointAdds, policyAdds []agent.Op
	for _, r := range desired.Routes {
		r := r
		wantRoutes[r.Key()] = true
		op := agent.Op{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &r}
		if old, ok := obsRoutes[r.Key()]; ok {
			if sameRoute(old, r) {
				continue
			}
			op.OldRoute = &old
		}
		if r.Seg6 != nil {
			policyAdds = append(policyAdds, op)
		} else {
			endpointAdds = append(endpointAdds, op)
		}
	}
	// Hand-made SIDs an older segchain stamped with FRR's protocol 198
	// (nodestate.ProtoManualLegacy) are renumbered in place, nothing else
	// about them changes; one the domain wants to replace is a conflict.
	for _, f := range observed.Foreign {
		if f.Protocol != nodestate.ProtoManualLegacy || wantRoutes[f.Route.Key()] {
			continue
		}
		old, r := f.Route, f.Route
		old.Proto, r.Proto = nodestate.ProtoManualLegacy, nodestate.ProtoManual
		endpointAdds = append(endpointAdds, agent.Op{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &r, OldRoute: &old})
	}
	d.Adds = append(d.Adds, endpointAdds...)
	// Services (proxies, firewalls ...) are endpoints too: in place before
	// the policies steer traffic into them, make-before-break (stage), one
	// op pair per service kind in registry order. Broken eBPF objects
	// behind them (observed faults) are drift too: the first op repairs
	// them, or an op of its own when nothing else changes.
	reg := kinds.Registry()
	var svcDels []agent.Op
	for _, k := range reg.Kinds() {
		kind := k.Name()
		obs, want := nodestate.ServicesOf(observed.Services, kind), nodestate.ServicesOf(desired.Services, kind)
		add, del := stageServices(reg, kind, obs, want)
		add, del = withFaults(add, del, observed.Faults[kind], len(want) == 0, func() agent.Op {
			return servicesOp(kind, want, obs)
		})
		if add != nil {
			d.Adds = append(d.Adds, *add)
		}
		if del != nil {
			svcDels = append(svcDels, *del)
		}
	}
	d.Adds = append(d.Adds, policyAdds...)

	obsRules := map[string]bool{}
	for _, r := range observed.Rules {
		obsRules[r.Key()] = true
	}
	wantRules := map[string]bool{}
	for _, r := range desired.Rules {
		r := r
		wantRules[r.Key()] = true
		if !obsRules[r.Key()] {
			d.Adds = append(d.Adds, agent.Op{Kind: agent.KindRule, Action: agent.ActAdd, Rule: &r})
		}
	}

	for _, r := range observed.Rules {
		r := r
		if !wantRules[r.Key()] {
			d.Deletes = append(d.Deletes, agent.Op{Kind: agent.KindRule, Action: agent.ActDelete, Rule: &r})
		}
	}
	var policyDels, endpointDels []agent.Op
	for _, r := range observed.Routes {
		r := r
		if wantRoutes[r.Key()] {
			continue
		}
		op := agent.Op{Kind: agent.KindRoute, Action: agent.ActDelete, Route: &r}
		if r.Seg6 != nil {
			policyDels = append(policyDels, op)
		} else {
			endpointDels = append(endpointDels, op)
		}
	}
	d.Deletes = append(d.Deletes, policyDels...)
	d.Deletes = append(d.Deletes, svcDels...)
	d.Deletes = append(d.Deletes, endpointDels...)
	if bgpDel != nil {
		d.Deletes = append(d.Deletes, *bgpDel)
	}
	if boundaryDel != nil {
		d.Deletes = append(d.Deletes, *boundaryDel)
	}
	return d
}

// sameRoute reports whether two routes render the same (String, which
// leaves Owner out): equal fields say so without rendering both, which
// a no-op apply would otherwise do for every route of every node.
func sameRoute(a, b nodestate.Route) bool {
	a.Owner, b.Owner = "", ""
	return reflect.DeepEqual(a, b) || a.String() == b.String()
}

// Teardown is the diff that removes everything segchain installed on a node:
// every owned rule and route, the domain's HMAC keys, the tunnel source it
// set, and the sysctls it changed (restored to their original values).
func Teardown(observed, planned *nodestate.Node, originals map[string]string) Diff {
	d := Compute(observed, &nodestate.Node{Name: planned.Name})
	obsKeys := map[uint32]nodestate.HMACKey{}
	for _, k := range observed.HMACKeys {
		obsKeys[k.ID] = k
	}
	for _, k := range planned.HMACKeys {
		if old, ok := obsKeys[k.ID]; ok {
			old := old
			d.Deletes = append(d.Deletes, agent.Op{Kind: agent.KindHMAC, Action: agent.ActDelete, HMAC: &old, OldHMAC: &old})
		}
	}
	if planned.TunSrc != "" && observed.TunSrc == planned.TunSrc {
		d.Deletes = append(d.Deletes, agent.Op{Kind: agent.KindTunSrc, Action: agent.ActSet, TunSrc: "", OldTun: observed.TunSrc})
	}
	obsSys := map[string]string{}
	for _, s := range observed.Sysctls {
		obsSys[s.Key] = s.Value
	}
	for _, s := range planned.Sysctls {
		orig, ok := originals[s.Key]
		if !ok || obsSys[s.Key] == orig || obsSys[s.Key] == "" {
			continue
		}
		d.Deletes = append(d.Deletes, agent.Op{Kind: agent.KindSysctl, Action: agent.ActSet,
			Sysctl: &nodestate.Sysctl{Key: s.Key, Value: orig}, OldValue: obsSys[s.Key]})
	}
	return d
}

// withFaults hands observed faults to the first of a staged pair of ops
// (the agent repairs before it applies), or makes a repair op of its own
// (a delete when nothing is desired any more) when nothing else changes.
func withFaults(add, del *agent.Op, faults []string, noneDesired bool, mk func() agent.Op) (*agent.Op, *agent.Op) {
	if len(faults) == 0 {
		return add, del
	}
	switch {
	case add != nil:
		add.Faults = faults
	case del != nil:
		del.Faults = faults
	default:
		op := mk()
		op.Faults = faults
		if noneDesired {
			del = &op
		} else {
			add = &op
		}
	}
	return add, del
}
