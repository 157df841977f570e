package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/fw"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/proxy"
	"github.com/segchain/segchain/internal/usvc"
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
	// SIDExtension is the kind's `segchain sid` syntax: the behaviours it
	// serves, with add, del, show, flush and clear-counters (nil: the kind
	// has no hand-made SIDs).
	SIDExtension() localsid.Extension
}

// serviceKinds lists the node halves of every service kind: one line per
// kind, in the order of internal/service/kinds.
func serviceKinds() []ServiceKind {
	return []ServiceKind{
		proxy.NodeKind{},
		fw.NodeKind{},
		usvc.NodeKind{},
	}
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
