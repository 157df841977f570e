package firewall

import (
	"fmt"
	"net/netip"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/firewall"
)

// NodeKind is the firewall kind's node half (local.ServiceKind): the
// End.AN.FW instances of a namespace, served by this package's tc program.
type NodeKind struct{}

// Name is the kind's name.
func (NodeKind) Name() string { return firewall.Name }

// SpecOf converts an installed instance to its plain-data form (rules in
// canonical syntax, the effective ARGS table).
func SpecOf(in Instance) firewall.Spec {
	args := in.Args
	if args == nil {
		args = fwrule.DefaultArgs()
	}
	f := firewall.SpecFrom(in.SID.Masked(), in.ArgsBits, firewall.Resolved{Rules: in.Rules, Policy: in.Policy, Args: args})
	f.CSIDLBLen, f.CSIDNFLen = in.CSIDLBLen, in.CSIDNFLen
	return f
}

// InstanceOf parses a plain-data instance into what Apply installs.
func InstanceOf(s nodestate.Service) (Instance, error) {
	f, err := firewall.SpecOf(s)
	if err != nil {
		return Instance{}, err
	}
	r, err := f.Parse()
	if err != nil {
		return Instance{}, err
	}
	return Instance{SID: f.SID.Masked(), ArgsBits: f.ArgsBits, Policy: r.Policy, Rules: r.Rules, Args: r.Args,
		CSIDLBLen: f.CSIDLBLen, CSIDNFLen: f.CSIDNFLen}, nil
}

// Observe reads the firewall instances of netns.
func (NodeKind) Observe(netns string) ([]nodestate.Service, error) {
	sts, err := List(netns)
	if err != nil {
		return nil, err
	}
	var out []nodestate.Service
	for _, st := range sts {
		out = append(out, SpecOf(st.Instance).Service())
	}
	return out, nil
}

// SIDExtension is the kind's `segchain sid` syntax (Extension).
func (NodeKind) SIDExtension() localsid.Extension { return Extension{} }

// Purge removes every firewall instance of netns (Flush).
func (NodeKind) Purge(netns string) error { return Flush(netns) }

// Faults lists the broken eBPF objects behind the instances (Check).
func (NodeKind) Faults(netns string) ([]string, error) { return Check(netns) }

// Repair drops what Faults found broken, so that Apply installs it again.
func (NodeKind) Repair(netns string) error { return Repair(netns) }

// AttachNew attaches the firewall program to interfaces created since.
func (NodeKind) AttachNew(netns string) error { return AttachNew(netns) }

// Apply installs (or atomically replaces) every wanted instance, then
// removes those of old that are no longer wanted. Hand-made instances are
// never in old, so they stay.
func (NodeKind) Apply(netns string, want, old []nodestate.Service, _ map[netip.Prefix]string) error {
	keep := map[netip.Prefix]bool{}
	for _, s := range want {
		in, err := InstanceOf(s)
		if err != nil {
			return err
		}
		if err := Apply(netns, in); err != nil {
			return fmt.Errorf("firewall %s: %w", s.SID, err)
		}
		keep[in.SID] = true
	}
	for _, s := range old {
		if keep[s.SID.Masked()] {
			continue
		}
		if _, err := Remove(netns, s.SID); err != nil {
			return fmt.Errorf("remove firewall %s: %w", s.SID, err)
		}
	}
	return nil
}

// Capacity tells whether want fits the node's shared pools.
func (NodeKind) Capacity(netns string, want []nodestate.Service) error {
	var ins []Instance
	for _, s := range want {
		in, err := InstanceOf(s)
		if err != nil {
			return err
		}
		ins = append(ins, in)
	}
	if err := CheckCapacity(netns, ins); err != nil {
		return fmt.Errorf("firewall %w", err)
	}
	return nil
}

// Counters reports every firewall instance as a local SID.
func (NodeKind) Counters(netns string) ([]agent.SIDCounters, error) {
	sts, err := List(netns)
	if err != nil {
		return nil, err
	}
	var out []agent.SIDCounters
	for _, st := range sts {
		var drops uint64
		for _, v := range st.Counters.Drops {
			drops += v
		}
		d := map[string]uint64{}
		for r, v := range st.Counters.Drops {
			d["drop-"+r] = v
		}
		out = append(out, agent.SIDCounters{SID: st.Instance.SID, Behavior: firewall.Behavior,
			Route: SpecOf(st.Instance).String(), Owned: true, Counted: true,
			Packets: st.Counters.Packets, Bytes: st.Counters.Bytes, Errors: drops, Detail: d})
	}
	return out, nil
}
