package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/kinds"
)

// ObjectKind names the kind of node object an Op changes (not to be
// confused with a service kind, nodestate.Service.Kind).
type ObjectKind string

// Kinds of managed node objects.
const (
	KindSysctl ObjectKind = "sysctl"
	KindHMAC   ObjectKind = "hmac"
	KindTunSrc ObjectKind = "tunsrc"
	KindRoute  ObjectKind = "route"
	KindRule   ObjectKind = "rule"
	// KindServices sets the node's whole list of services of one service
	// kind (Op.Service) at once.
	KindServices ObjectKind = "services"
	// KindBoundary sets (or, with a nil Boundary, removes) the node's SR
	// domain boundary filter.
	KindBoundary ObjectKind = "boundary"
	// KindBGP sets (or, with a nil BGP, stops) the node's BGP speaker
	// (routing: bgp): served by a segchain agent, which runs it.
	KindBGP ObjectKind = "bgp"
)

// Action says what an Op does to its object.
type Action string

// Op actions. Set covers sysctls, HMAC keys and the tunnel source: writes
// that replace a value; Replace installs or atomically replaces a route.
const (
	ActSet     Action = "set"
	ActReplace Action = "replace"
	ActAdd     Action = "add"
	ActDelete  Action = "delete"
)

// Op is one change to a node's kernel state. It carries the old value so that
// it can be inverted for rollback, and is plain data so that a remote agent
// can receive it over the wire.
type Op struct {
	Kind   ObjectKind `json:"kind"`
	Action Action     `json:"action"`

	Route    *nodestate.Route   `json:"route,omitempty"`
	OldRoute *nodestate.Route   `json:"old_route,omitempty"`
	Rule     *nodestate.Rule    `json:"rule,omitempty"`
	Sysctl   *nodestate.Sysctl  `json:"sysctl,omitempty"`
	OldValue string             `json:"old_value,omitempty"`
	HMAC     *nodestate.HMACKey `json:"hmac,omitempty"` // nil Secret with ActDelete removes the key
	OldHMAC  *nodestate.HMACKey `json:"old_hmac,omitempty"`
	TunSrc   string             `json:"tunsrc,omitempty"`
	OldTun   string             `json:"old_tunsrc,omitempty"`
	// Service is the service kind (nodestate.Service.Kind) of a
	// KindServices op; Services is the node's complete desired list of
	// that kind's services (ActSet; empty removes them all), OldServices
	// the list it replaces (services in it but not in Services are
	// removed; a failed op is undone by applying OldServices again).
	Service     string              `json:"service,omitempty"`
	Services    []nodestate.Service `json:"services,omitempty"`
	OldServices []nodestate.Service `json:"old_services,omitempty"`
	// Boundary is the node's desired boundary filter (KindBoundary, with
	// ActSet; nil removes it), OldBoundary the one it replaces.
	Boundary    *nodestate.Boundary `json:"boundary,omitempty"`
	OldBoundary *nodestate.Boundary `json:"old_boundary,omitempty"`
	// BGP is the node's desired BGP speaker intent (KindBGP, ActSet; nil
	// stops the speaker and removes its routes), OldBGP the one it
	// replaces.
	BGP    *nodestate.BGP `json:"bgp,omitempty"`
	OldBGP *nodestate.BGP `json:"old_bgp,omitempty"`
	// Faults (KindServices) are the broken eBPF objects of the service
	// kind observed: the op repairs them even when the lists are equal.
	Faults []string `json:"faults,omitempty"`
}

// String renders the op the way plan prints it: "+" adds, "-" removes, "~"
// changes in place.
func (o Op) String() string {
	switch o.Kind {
	case KindSysctl:
		return fmt.Sprintf("~ sysctl %s: %s -> %s", o.Sysctl.Key, orNone(o.OldValue), o.Sysctl.Value)
	case KindTunSrc:
		return fmt.Sprintf("~ tunsrc: %s -> %s", orNone(o.OldTun), orNone(o.TunSrc))
	case KindHMAC:
		if o.Action == ActDelete {
			return "- " + o.HMAC.String()
		}
		if o.OldHMAC != nil {
			return "~ " + o.HMAC.String()
		}
		return "+ " + o.HMAC.String()
	case KindRoute:
		switch {
		case o.Action == ActDelete:
			return "- route " + o.Route.String()
		case o.OldRoute != nil:
			return "~ route " + o.OldRoute.String() + "\n    -> " + o.Route.String()
		default:
			return "+ route " + o.Route.String()
		}
	case KindRule:
		if o.Action == ActDelete {
			return "- " + o.Rule.String()
		}
		return "+ " + o.Rule.String()
	case KindServices:
		var b strings.Builder
		b.WriteString(servicesString(o.Service, o.OldServices, o.Services))
		writeFaults(&b, o.Faults)
		return b.String()
	case KindBoundary:
		switch {
		case o.Boundary == nil:
			return "- " + o.OldBoundary.String()
		case o.OldBoundary == nil:
			return "+ " + o.Boundary.String()
		default:
			return "~ " + o.OldBoundary.String() + "\n    -> " + o.Boundary.String()
		}
	case KindBGP:
		return bgpString(o.OldBGP, o.BGP)
	}
	return "? " + string(o.Kind)
}

// bgpString renders a KindBGP op: the speaker's head, then the neighbors
// and prefixes added (+) and removed (-).
func bgpString(old, now *nodestate.BGP) string {
	var b strings.Builder
	switch {
	case now == nil:
		return "- " + old.Head()
	case old == nil:
		b.WriteString("+ " + now.Head())
	case old.Head() != now.Head():
		b.WriteString("~ " + old.Head() + " -> " + now.Head())
	default:
		b.WriteString("~ " + now.Head())
	}
	was, is := map[string]bool{}, map[string]bool{}
	ol, nl := old.Lines(), now.Lines()
	for _, l := range ol {
		was[l] = true
	}
	for _, l := range nl[1:] {
		is[l] = true
		if !was[l] {
			b.WriteString("\n    + " + l)
		}
	}
	if len(ol) > 0 {
		for _, l := range ol[1:] {
			if !is[l] {
				b.WriteString("\n    - " + l)
			}
		}
	}
	return b.String()
}

// servicesString renders a KindServices op: the count, then the services
// added (+, with their detail lines) and removed (-) by canonical form.
func servicesString(kind string, old, now []nodestate.Service) string {
	reg := kinds.Registry()
	var b strings.Builder
	fmt.Fprintf(&b, "~ %s: %d -> %d", reg.Plural(kind), len(old), len(now))
	was := map[string]bool{}
	for _, s := range old {
		was[reg.Canonical(s)] = true
	}
	is := map[string]bool{}
	for _, s := range now {
		k := reg.Canonical(s)
		is[k] = true
		if was[k] {
			continue
		}
		for i, l := range reg.Lines(s) {
			if i == 0 {
				b.WriteString("\n    + " + l)
			} else {
				b.WriteString("\n      " + l)
			}
		}
	}
	for _, s := range old {
		if !is[reg.Canonical(s)] {
			b.WriteString("\n    - " + reg.Lines(s)[0])
		}
	}
	return b.String()
}

// writeFaults lists the broken eBPF objects an op repairs.
func writeFaults(b *strings.Builder, faults []string) {
	for _, f := range faults {
		b.WriteString("\n    ! repair: " + f)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Inverse returns the op that undoes o, given that o succeeded.
func (o Op) Inverse() Op {
	switch o.Kind {
	case KindSysctl:
		return Op{Kind: KindSysctl, Action: ActSet, Sysctl: &nodestate.Sysctl{Key: o.Sysctl.Key, Value: o.OldValue}, OldValue: o.Sysctl.Value}
	case KindTunSrc:
		return Op{Kind: KindTunSrc, Action: ActSet, TunSrc: o.OldTun, OldTun: o.TunSrc}
	case KindHMAC:
		if o.OldHMAC == nil {
			return Op{Kind: KindHMAC, Action: ActDelete, HMAC: o.HMAC}
		}
		return Op{Kind: KindHMAC, Action: ActSet, HMAC: o.OldHMAC, OldHMAC: o.HMAC}
	case KindRoute:
		switch {
		case o.Action == ActDelete:
			return Op{Kind: KindRoute, Action: ActReplace, Route: o.Route}
		case o.OldRoute != nil:
			return Op{Kind: KindRoute, Action: ActReplace, Route: o.OldRoute, OldRoute: o.Route}
		default:
			return Op{Kind: KindRoute, Action: ActDelete, Route: o.Route}
		}
	case KindRule:
		if o.Action == ActDelete {
			return Op{Kind: KindRule, Action: ActAdd, Rule: o.Rule}
		}
		return Op{Kind: KindRule, Action: ActDelete, Rule: o.Rule}
	case KindServices:
		return Op{Kind: KindServices, Action: ActSet, Service: o.Service, Services: o.OldServices, OldServices: o.Services}
	case KindBoundary:
		return Op{Kind: KindBoundary, Action: ActSet, Boundary: o.OldBoundary, OldBoundary: o.Boundary}
	case KindBGP:
		return Op{Kind: KindBGP, Action: ActSet, BGP: o.OldBGP, OldBGP: o.BGP}
	}
	return o
}

// Agent programs one node. The controller computes every change; an agent
// only observes and executes, so the same interface can be served locally
// (in-process, per namespace) or remotely (an agent daemon on the node).
type Agent interface {
	// Node is the domain's name of the node.
	Node() string
	// Observe returns what segchain manages on the node now: its routes and
	// rules, the HMAC keys, the tunnel source, the services, and the
	// current values of the sysctl keys that want names.
	Observe(ctx context.Context, want *nodestate.Node) (*nodestate.Node, error)
	// Execute runs ops in order and stops at the first failure, returning
	// how many succeeded.
	Execute(ctx context.Context, ops []Op) (int, error)
	// Counters returns every local SID of the node with its counters,
	// the services' SIDs included.
	Counters(ctx context.Context) ([]SIDCounters, error)
	// Forget drops what the agent remembers about the node (saved original
	// sysctl values) once the node has been destroyed.
	Forget(ctx context.Context) error
	// Originals returns the sysctl values the node had before segchain
	// first changed them.
	Originals(ctx context.Context) (map[string]string, error)
	// Caps declares what else the agent can do (caps.go): callers ask
	// it instead of asserting types.
	Caps() Caps
}

// SIDCounters is one local SID as status shows it.
type SIDCounters struct {
	SID      netip.Prefix `json:"sid"`
	Behavior string       `json:"behavior"`
	Route    string       `json:"route"`
	Owned    bool         `json:"owned"`            // installed by the domain (segchain apply)
	Origin   string       `json:"origin,omitempty"` // "domain", "hand-made" (segchain sid add) or "" (nodestate.Origin)
	Counted  bool         `json:"counted"`
	Packets  uint64       `json:"packets"`
	Bytes    uint64       `json:"bytes"`
	Errors   uint64       `json:"errors"`
	// Detail is an eBPF behaviour's counters beyond the totals: each
	// direction (in-/out-packets, in-/out-drops) and every drop reason
	// (drop-<reason>), as `sid show` names them.
	Detail map[string]uint64 `json:"detail,omitempty"`
}

// Journal keeps each op of an apply or destroy on stable storage before
// it runs, per node, so that a command killed half-way can be undone by
// the next one (internal/journal is the on-disk one; controller.Journal
// and the agent's journal on its host are this). The controller calls it
// for several nodes at once: implementations must be safe for that.
type Journal interface {
	// Record must be durable when it returns: the op runs after it.
	Record(node string, op Op) error
	// Clear forgets node's journal: its ops are complete, or undone.
	Clear(node string) error
	// Unfinished returns the ops recorded on node by a command that did
	// not finish (none: nothing to recover), and who that command was.
	Unfinished(node string) (ops []Op, who string, err error)
}

// BatchJournal is a Journal that records several ops of a node with one
// sync (journal.Disk): durable when it returns, the ops run after it, in
// order. Recovery undoes a journal's ops in reverse, whether they ran or
// not; the undo of an op that never ran finds the object as the op would
// have found it and changes nothing (or fails and is skipped).
type BatchJournal interface {
	RecordAll(node string, ops []Op) error
}

// MarshalOps is the wire form of a batch of ops (for logs and remote agents).
func MarshalOps(ops []Op) ([]byte, error) { return json.Marshal(ops) }

// ErrTooOld is returned (wrapped) by a remote agent's client when the
// agent's build lacks an RPC the controller asked for: the caller reports
// what it cannot show instead of failing.
var ErrTooOld = errors.New("agent too old")
