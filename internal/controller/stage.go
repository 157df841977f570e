package controller

import (
	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// Proxies and firewalls change in two steps, so that a SID keeps working
// until no headend steers traffic to it any more (make-before-break):
//
//  1. with the adds: the union of the desired instances and the observed
//     ones whose SID is not desired any more (a new or changed instance is
//     installed beside the old one; a proxy SID change hands the IFACE-IN
//     over to the new SID, see proxy.Apply);
//  2. with the deletes, after the policies: the desired instances alone.
//
// Either op is nil when it would change nothing.
func stage[T any](observed, desired []T, sid func(T) string, same func(a, b []T) bool, op func(now, old []T) agent.Op) (add, del *agent.Op) {
	if same(observed, desired) {
		return nil, nil
	}
	want := map[string]bool{}
	for _, x := range desired {
		want[sid(x)] = true
	}
	union := append([]T(nil), desired...)
	for _, x := range observed {
		if !want[sid(x)] {
			union = append(union, x)
		}
	}
	if len(desired) > 0 && !same(observed, union) {
		o := op(union, observed)
		add = &o
	} else {
		union = observed
	}
	if !same(union, desired) {
		o := op(desired, union)
		del = &o
	}
	return add, del
}

func stageProxies(observed, desired []nodestate.Proxy) (add, del *agent.Op) {
	return stage(observed, desired, func(p nodestate.Proxy) string { return p.SID.String() }, sameProxies,
		func(now, old []nodestate.Proxy) agent.Op {
			return agent.Op{Kind: agent.KindProxies, Action: agent.ActSet,
				Proxies: append([]nodestate.Proxy(nil), now...), OldProxies: append([]nodestate.Proxy(nil), old...)}
		})
}

func stageFirewalls(observed, desired []nodestate.Firewall) (add, del *agent.Op) {
	return stage(observed, desired, func(f nodestate.Firewall) string { return f.SID.Masked().String() }, sameFirewalls,
		func(now, old []nodestate.Firewall) agent.Op {
			return agent.Op{Kind: agent.KindFirewalls, Action: agent.ActSet,
				Firewalls: append([]nodestate.Firewall(nil), now...), OldFirewalls: append([]nodestate.Firewall(nil), old...)}
		})
}
