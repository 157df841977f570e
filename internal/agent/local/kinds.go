package local

import (
	"context"
	"errors"
	"fmt"
	pooldp "github.com/segchain/segchain/internal/pool/datapath"
	"net/netip"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/dataplane/firewall"
	"github.com/segchain/segchain/internal/dataplane/netfilter"
	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/dataplane/userspace"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/nodestate"
)

// ServiceKind is the node half of a service kind (its intent half is
// internal/service.Kind): what the in-namespace agent does with the kind's
// services. The kind's data-path package implements it; netns "" is the
// current namespace.
type ServiceKind interface {
	// Name is the kind's name (nodestate.Service.Kind).
	Name() string
	// Observe returns every service of the kind installed in netns
	// (hand-made ones included: the agent drops those), creating nothing.
	Observe(netns string) ([]nodestate.Service, error)
	// Faults lists what is broken in the eBPF objects behind the services
	// (a program not attached, a pin missing or foreign ...): drift even
	// when the services match.
	Faults(netns string) ([]string, error)
	// Repair drops what Faults found broken, so that Apply installs it
	// again.
	Repair(netns string) error
	// Apply makes the kind's services of netns want: old is the list it
	// replaces (the op's rollback value) and handMade the SIDs made by
	// hand with `segchain sid add`, which must stay.
	Apply(netns string, want, old []nodestate.Service, handMade map[netip.Prefix]string) error
	// Capacity tells, changing nothing, whether want fits the node's
	// shared tables (nil when the kind has no such limit).
	Capacity(netns string, want []nodestate.Service) error
	// Counters reports every service of the kind as a local SID.
	Counters(netns string) ([]agent.SIDCounters, error)
	// AttachNew attaches the kind's programs to interfaces created since
	// they were attached (the service loop device).
	AttachNew(netns string) error
	// Purge removes every trace of the kind from netns, hand-made SIDs
	// included (before the namespace is deleted: pins in bpffs would
	// outlive it).
	Purge(netns string) error
	// SIDExtension is the kind's `segchain sid` syntax: the behaviours it
	// serves, with add, del, show, flush and clear-counters (nil: the kind
	// has no hand-made SIDs).
	SIDExtension() localsid.Extension
}

// serviceKinds lists the node halves of every service kind: one line per
// kind, in the order of internal/service/kinds.
func serviceKinds() []ServiceKind {
	return []ServiceKind{
		srunaware.NodeKind{},
		firewall.NodeKind{},
		netfilter.NodeKind{},
		userspace.NodeKind{},
		pooldp.NodeKind{},
	}
}

// Purge removes everything segchain keeps for netns outside the namespace
// itself (the service kinds' and the boundary filter's pins in bpffs, the
// hand-made SID records), before the namespace is deleted. It tries all
// and returns every failure.
func Purge(netns string) error {
	var errs []error
	for _, k := range serviceKinds() {
		if err := k.Purge(netns); err != nil {
			errs = append(errs, fmt.Errorf("remove %s services of %s: %w", k.Name(), netns, err))
		}
	}
	if err := boundary.Remove(netns); err != nil {
		errs = append(errs, fmt.Errorf("remove boundary of %s: %w", netns, err))
	}
	if err := localsid.ForgetHandMade(netns); err != nil {
		errs = append(errs, fmt.Errorf("forget hand-made SIDs of %s: %w", netns, err))
	}
	return errors.Join(errs...)
}

// SIDExtensions returns the `segchain sid` extensions of the service
// kinds (the behaviours the kernel lacks that their data paths serve).
func SIDExtensions() []localsid.Extension {
	var out []localsid.Extension
	for _, k := range serviceKinds() {
		if e := k.SIDExtension(); e != nil {
			out = append(out, e)
		}
	}
	return out
}

func serviceKind(name string) (ServiceKind, bool) {
	for _, k := range serviceKinds() {
		if k.Name() == name {
			return k, true
		}
	}
	return nil, false
}

// Check implements agent.Checker: the services of every KindServices op
// must fit the node's tables when installed in order.
func (l *Local) Check(_ context.Context, ops []agent.Op) error {
	var errs []error
	for _, op := range ops {
		if op.Kind != agent.KindServices {
			continue
		}
		k, ok := serviceKind(op.Service)
		if !ok {
			return fmt.Errorf("node %s: unknown service kind %q", l.name, op.Service)
		}
		if err := k.Capacity(l.netns, op.Services); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", l.name, err))
		}
	}
	return errors.Join(errs...)
}
