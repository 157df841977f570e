package agenttest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// Agent is a node in memory. Set its exported fields before it is used;
// while it is (a controller's goroutines, a gRPC server), read it through
// its methods, which lock.
type Agent struct {
	// Name is the node's name.
	Name string
	// State is what the node holds: Observe reports its routes, rules,
	// HMAC keys, services and tunnel source, and its sysctls (keys it
	// lacks read "0"); Execute changes it (BGP and boundary ops are only
	// logged).
	State nodestate.Node
	// FailOn, if set, fails Execute at the first op that is not a delete
	// and whose rendering (op.String()) contains it: "injected failure".
	FailOn string
	// Log is the rendering of every op executed, in order.
	Log []string
	// All, if set, is a log shared by several agents ("node: op"), to
	// check the order across nodes. The agents append to it each under
	// its own lock: agents run at once need one more (a wrapper's).
	All *[]string
	// Orig is what Originals returns: each sysctl's value before its
	// first set (Forget empties it).
	Orig map[string]string
	// SIDs is what Counters returns.
	SIDs []agent.SIDCounters
	// With is what Caps returns: none unless a test plugs some in.
	With agent.Caps

	mu       sync.Mutex
	ops      []agent.Op
	observed int
}

// New is an agent of node name holding nothing.
func New(name string) *Agent {
	return &Agent{Name: name, Orig: map[string]string{}}
}

// Node implements agent.Agent.
func (a *Agent) Node() string { return a.Name }

// Caps implements agent.Agent: a.With.
func (a *Agent) Caps() agent.Caps { return a.With }

// Observe implements agent.Agent.
func (a *Agent) Observe(_ context.Context, want *nodestate.Node) (*nodestate.Node, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.observed++
	st := &a.State
	got := nodestate.Node{Name: a.Name, TunSrc: st.TunSrc}
	got.Routes = append(got.Routes, st.Routes...)
	got.Rules = append(got.Rules, st.Rules...)
	got.HMACKeys = append(got.HMACKeys, st.HMACKeys...)
	got.Services = append(got.Services, st.Services...)
	if want != nil {
		vals := map[string]string{}
		for _, s := range st.Sysctls {
			vals[s.Key] = s.Value
		}
		for _, s := range want.Sysctls {
			v, ok := vals[s.Key]
			if !ok {
				v = "0"
			}
			got.Sysctls = append(got.Sysctls, nodestate.Sysctl{Key: s.Key, Value: v})
		}
	}
	got.Sort()
	return &got, nil
}

// Execute implements agent.Agent.
func (a *Agent) Execute(_ context.Context, ops []agent.Op) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, op := range ops {
		s := op.String()
		if a.FailOn != "" && strings.Contains(s, a.FailOn) && op.Action != agent.ActDelete {
			return i, errors.New("injected failure")
		}
		a.ops = append(a.ops, op)
		a.Log = append(a.Log, s)
		if a.All != nil {
			*a.All = append(*a.All, a.Name+": "+s)
		}
		a.apply(op)
	}
	return len(ops), nil
}

func (a *Agent) apply(op agent.Op) {
	st := &a.State
	switch op.Kind {
	case agent.KindSysctl:
		if a.Orig == nil {
			a.Orig = map[string]string{}
		}
		if _, ok := a.Orig[op.Sysctl.Key]; !ok {
			a.Orig[op.Sysctl.Key] = op.OldValue
		}
		st.Sysctls = without(st.Sysctls, func(s nodestate.Sysctl) bool { return s.Key == op.Sysctl.Key })
		st.Sysctls = append(st.Sysctls, *op.Sysctl)
	case agent.KindTunSrc:
		st.TunSrc = op.TunSrc
	case agent.KindHMAC:
		st.HMACKeys = without(st.HMACKeys, func(k nodestate.HMACKey) bool { return k.ID == op.HMAC.ID })
		if op.Action != agent.ActDelete {
			st.HMACKeys = append(st.HMACKeys, *op.HMAC)
		}
	case agent.KindRoute:
		st.Routes = without(st.Routes, func(r nodestate.Route) bool { return r.Key() == op.Route.Key() })
		if op.Action != agent.ActDelete {
			r := *op.Route
			r.Owner = "" // the kernel does not keep it
			st.Routes = append(st.Routes, r)
		}
	case agent.KindRule:
		st.Rules = without(st.Rules, func(r nodestate.Rule) bool { return r.Key() == op.Rule.Key() })
		if op.Action != agent.ActDelete {
			r := *op.Rule
			r.Owner = ""
			st.Rules = append(st.Rules, r)
		}
	case agent.KindServices:
		st.Services = without(st.Services, func(s nodestate.Service) bool { return s.Kind == op.Service })
		st.Services = append(st.Services, op.Services...)
	}
	st.Sort()
}

// without is xs but those that match; nil when none is left (as a
// node's observed state has it).
func without[T any](xs []T, match func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if !match(x) {
			out = append(out, x)
		}
	}
	return out
}

// Counters implements agent.Agent: a.SIDs.
func (a *Agent) Counters(context.Context) ([]agent.SIDCounters, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.SIDs), nil
}

// Forget implements agent.Agent.
func (a *Agent) Forget(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.Orig = map[string]string{}
	return nil
}

// Originals implements agent.Agent: a.Orig.
func (a *Agent) Originals(context.Context) (map[string]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.Orig, nil
}

// Executed returns the ops executed so far, in order.
func (a *Agent) Executed() []agent.Op {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.ops)
}

// Observed returns how many times the node was observed.
func (a *Agent) Observed() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.observed
}

// Snapshot returns the node's state now.
func (a *Agent) Snapshot() nodestate.Node {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.State
	st.Routes = slices.Clone(st.Routes)
	st.Rules = slices.Clone(st.Rules)
	st.HMACKeys = slices.Clone(st.HMACKeys)
	st.Services = slices.Clone(st.Services)
	st.Sysctls = slices.Clone(st.Sysctls)
	return st
}

// Drift changes the node's state behind segchain's back (a link went
// down, someone deleted a route), under the agent's lock.
func (a *Agent) Drift(change func(st *nodestate.Node)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	change(&a.State)
}
