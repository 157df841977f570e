package controller

import (
	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service"
)

// Services (proxies, firewalls ...) change in two steps, so that a SID keeps working
// until no headend steers traffic to it any more (make-before-break):
//
//  1. with the adds: the union of the desired instances and the observed
//     ones whose SID is not desired any more (a new or changed instance is
//     installed beside the old one; a proxy SID change hands the IFACE-IN
//     over to the new SID, see srunaware.Apply);
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

// stageServices stages the services of one kind.
func stageServices(reg *service.Registry, kind string, observed, desired []nodestate.Service) (add, del *agent.Op) {
	return stage(observed, desired, func(s nodestate.Service) string { return s.SID.Masked().String() }, reg.Same,
		func(now, old []nodestate.Service) agent.Op { return servicesOp(kind, now, old) })
}

// servicesOp sets the node's services of kind to now, replacing old.
func servicesOp(kind string, now, old []nodestate.Service) agent.Op {
	return agent.Op{Kind: agent.KindServices, Action: agent.ActSet, Service: kind,
		Services: append([]nodestate.Service(nil), now...), OldServices: append([]nodestate.Service(nil), old...)}
}
