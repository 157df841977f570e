package userspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/userspace"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// NodeKind is the node half of the `userspace` service kind
// (local.ServiceKind). The data path belongs to the process that binds
// the SID; apply checks that it does, waiting for it.
type NodeKind struct{}

// Name is the kind's name.
func (NodeKind) Name() string { return userspace.Name }

func specOf(b srv6svc.Binding) userspace.Spec {
	return userspace.Spec{Name: b.Name, OnFailure: b.OnFailure, ASM: b.Kind == "End.ASM", USID: b.USID, StaleBypassRoute: b.StaleBypassRoute}
}

// Observe lists every binding's SIDs as services of the kind.
func (NodeKind) Observe(netns string) ([]nodestate.Service, error) {
	bs, err := srv6svc.Status(netns)
	if err != nil {
		return nil, err
	}
	var out []nodestate.Service
	for _, b := range bs {
		sp, _ := json.Marshal(specOf(b))
		for _, p := range b.SIDs {
			out = append(out, nodestate.Service{Kind: userspace.Name, SID: p, Spec: sp})
		}
	}
	return out, nil
}

// Faults: none the agent could repair (a process that died is shown by
// status as its binding's state and no-socket counters).
func (NodeKind) Faults(string) ([]string, error) { return nil, nil }

// Repair has nothing to repair.
func (NodeKind) Repair(string) error { return nil }

// Capacity: a namespace holds at most srv6svc.MaxServices bindings.
func (NodeKind) Capacity(_ string, want []nodestate.Service) error {
	names := map[string]bool{}
	for _, s := range want {
		sp, err := userspace.SpecOf(s)
		if err != nil {
			return err
		}
		names[sp.Name] = true
	}
	if len(names) > srv6svc.MaxServices {
		return fmt.Errorf("userspace: %d bindings, at most %d per node", len(names), srv6svc.MaxServices)
	}
	return nil
}

// pollEvery is how often Apply looks for the processes.
const pollEvery = 100 * time.Millisecond

// Apply waits (each service's wait, concurrently) until a live process
// serves every wanted SID with the planned name and on-failure policy,
// and fails naming each one that is still missing; it removes the
// bindings of old services no longer wanted unless a process still serves
// them (they then stay, observed as drift).
func (NodeKind) Apply(netns string, want, old []nodestate.Service, _ map[netip.Prefix]string) error {
	type need struct {
		s     nodestate.Service
		sp    userspace.Spec
		until time.Time
	}
	start := time.Now()
	var needs []need
	keep := map[string]bool{}
	for _, s := range want {
		sp, err := userspace.SpecOf(s)
		if err != nil {
			return err
		}
		needs = append(needs, need{s, sp, start.Add(time.Duration(sp.WaitMS) * time.Millisecond)})
		keep[sp.Name] = true
	}
	for len(needs) > 0 {
		bs, err := srv6svc.Status(netns)
		if err != nil {
			return err
		}
		var left []need
		var errs []error
		for _, n := range needs {
			problem := missing(bs, n.s.SID, n.sp)
			switch {
			case problem == "":
			case time.Now().After(n.until):
				errs = append(errs, fmt.Errorf("userspace service %s (%s): %s after waiting %s: start the process that binds it (pkg/srv6svc; docs/userspace.md)",
					n.s.SID, n.sp.Name, problem, time.Duration(n.sp.WaitMS)*time.Millisecond))
			default:
				left = append(left, n)
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
		needs = left
		if len(needs) > 0 {
			time.Sleep(pollEvery)
		}
	}
	for _, s := range old {
		sp, err := userspace.SpecOf(s)
		if err != nil || keep[sp.Name] {
			continue
		}
		_ = srv6svc.Unbind(netns, sp.Name) // refused while a process serves it
	}
	// A binding that drops on failure must not keep a bypass End route
	// an earlier binding left (observed as drift until removed).
	return srv6svc.RemoveStaleBypassRoutes(netns)
}

// missing says why sid is not served as sp wants ("" when it is).
func missing(bs []srv6svc.Binding, sid netip.Prefix, sp userspace.Spec) string {
	for _, b := range bs {
		for _, p := range b.SIDs {
			if p.Masked() != sid.Masked() {
				continue
			}
			switch {
			case b.Name != sp.Name:
				return fmt.Sprintf("bound by %q, not %q", b.Name, sp.Name)
			case b.OnFailure != sp.OnFailure:
				return fmt.Sprintf("bound with on-failure %s, want %s", b.OnFailure, sp.OnFailure)
			case b.USID != sp.USID && sp.USID != "":
				return fmt.Sprintf("bound as a full SID, want a uSID of format %s (bind it with srv6svc.Config.CSID, --usid f3216)", sp.USID)
			case b.USID != sp.USID:
				return fmt.Sprintf("bound as a uSID of format %s, want a full SID", b.USID)
			case b.State != "serving":
				return fmt.Sprintf("binding %q is %s (no live process)", b.Name, b.State)
			}
			return ""
		}
	}
	return "no process has bound it"
}

// Counters reports each bound SID.
func (NodeKind) Counters(netns string) ([]agent.SIDCounters, error) {
	bs, err := srv6svc.Status(netns)
	if err != nil {
		return nil, err
	}
	var out []agent.SIDCounters
	for _, b := range bs {
		for _, p := range b.SIDs {
			e := Entry(b, p)
			c := b.Counters
			// Owned: the binding is in segchain's own steering maps (the
			// domain's SID; status names the service from the plan).
			out = append(out, agent.SIDCounters{SID: p, Behavior: e.Behavior, Route: localsid.FormatEntry(e),
				Owned: true, Counted: true, Packets: c.Steered, Bytes: c.SteeredBytes,
				Errors: c.DropMalformed + c.DropBadVerdict + c.DropTxFull + c.NoSocketDrop + c.TooBig + c.CSIDPadding + c.DropHopLimit, Detail: e.Counters})
		}
	}
	return out, nil
}

// AttachNew: the steering program is attached by the binding process.
func (NodeKind) AttachNew(string) error { return nil }

// Purge removes the bindings of netns no process serves any more (their
// pins in bpffs would outlive the namespace); a binding whose process still
// runs is its process's to release.
func (NodeKind) Purge(netns string) error { return Extension{}.Flush(netns) }

// SIDExtension shows and removes bindings in `segchain sid`.
func (NodeKind) SIDExtension() localsid.Extension { return Extension{} }
