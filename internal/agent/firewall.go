package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/segchain/segchain/internal/fw"
	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/nodestate"
)

// FirewallOf converts an installed firewall instance to its plain-data
// form (rules in canonical syntax, the effective ARGS table).
func FirewallOf(in fw.Instance) nodestate.Firewall {
	f := nodestate.Firewall{SID: in.SID.Masked(), ArgsBits: in.ArgsBits, Policy: in.Policy.String(), Args: map[uint32]string{}}
	for _, r := range in.Rules {
		f.Rules = append(f.Rules, r.String())
	}
	args := in.Args
	if args == nil {
		args = fwrule.DefaultArgs()
	}
	for k, v := range args {
		f.Args[k] = v.String()
	}
	return f
}

// InstanceOf parses a plain-data firewall into what internal/fw installs.
func InstanceOf(f nodestate.Firewall) (fw.Instance, error) {
	in := fw.Instance{SID: f.SID.Masked(), ArgsBits: f.ArgsBits}
	var err error
	if in.Policy, err = fwrule.ParseTargetKind(f.Policy); err != nil {
		return fw.Instance{}, fmt.Errorf("firewall %s: policy: %w", f.SID, err)
	}
	for i, line := range f.Rules {
		r, err := fwrule.ParseLine(line, fwrule.IPv6)
		if err != nil {
			return fw.Instance{}, fmt.Errorf("firewall %s: rule %d: %w", f.SID, i+1, err)
		}
		in.Rules = append(in.Rules, r)
	}
	if len(f.Args) == 0 {
		in.Args = fwrule.DefaultArgs()
	} else {
		in.Args = map[uint32]fwrule.TargetKind{}
		for k, v := range f.Args {
			if in.Args[k], err = fwrule.ParseTargetKind(v); err != nil {
				return fw.Instance{}, fmt.Errorf("firewall %s: args %d: %w", f.SID, k, err)
			}
		}
	}
	return in, nil
}

// CanonicalFirewall is the firewall's canonical text (rules re-parsed and
// printed, the default ARGS table made explicit), so equal instances
// spelled differently compare equal.
func CanonicalFirewall(f nodestate.Firewall) string {
	in, err := InstanceOf(f)
	if err != nil {
		return strings.Join(f.Lines(), "\n")
	}
	return strings.Join(FirewallOf(in).Lines(), "\n")
}

// ObserveFirewalls reads the firewall instances of netns.
func ObserveFirewalls(netns string) ([]nodestate.Firewall, error) {
	sts, err := fw.List(netns)
	if err != nil {
		return nil, err
	}
	var out []nodestate.Firewall
	for _, st := range sts {
		out = append(out, FirewallOf(st.Instance))
	}
	return out, nil
}

// applyFirewalls installs (or atomically replaces) every wanted instance,
// then removes those of old that are no longer wanted.
func applyFirewalls(netns string, want, old []nodestate.Firewall) error {
	keep := map[netip.Prefix]bool{}
	for _, f := range want {
		in, err := InstanceOf(f)
		if err != nil {
			return err
		}
		if err := fw.Apply(netns, in); err != nil {
			return fmt.Errorf("firewall %s: %w", f.SID, err)
		}
		keep[in.SID] = true
	}
	for _, f := range old {
		if keep[f.SID.Masked()] {
			continue
		}
		if _, err := fw.Remove(netns, f.SID); err != nil {
			return fmt.Errorf("remove firewall %s: %w", f.SID, err)
		}
	}
	return nil
}

// Check implements Checker: the firewall sets of every KindFirewalls op
// must fit the node's pools when installed in order.
func (l *Local) Check(_ context.Context, ops []Op) error {
	var errs []error
	for _, op := range ops {
		if op.Kind != KindFirewalls {
			continue
		}
		var want []fw.Instance
		for _, f := range op.Firewalls {
			in, err := InstanceOf(f)
			if err != nil {
				return err
			}
			want = append(want, in)
		}
		if err := fw.CheckCapacity(l.netns, want); err != nil {
			errs = append(errs, fmt.Errorf("node %s: firewall %w", l.name, err))
		}
	}
	return errors.Join(errs...)
}

// firewallCounters reports every firewall instance as a local SID.
func firewallCounters(netns string) ([]SIDCounters, error) {
	sts, err := fw.List(netns)
	if err != nil {
		return nil, err
	}
	var out []SIDCounters
	for _, st := range sts {
		var drops uint64
		for _, v := range st.Counters.Drops {
			drops += v
		}
		d := map[string]uint64{}
		for r, v := range st.Counters.Drops {
			d["drop-"+r] = v
		}
		out = append(out, SIDCounters{SID: st.Instance.SID, Behavior: "End.AN.FW",
			Route: FirewallOf(st.Instance).String(), Owned: true, Counted: true,
			Packets: st.Counters.Packets, Bytes: st.Counters.Bytes, Errors: drops, Detail: d})
	}
	return out, nil
}

// firewallsString renders a KindFirewalls op: the count, then the
// instances added (+) and removed (-) by canonical form.
func firewallsString(old, now []nodestate.Firewall) string {
	var b strings.Builder
	fmt.Fprintf(&b, "~ firewalls: %d -> %d", len(old), len(now))
	was := map[string]bool{}
	for _, f := range old {
		was[CanonicalFirewall(f)] = true
	}
	is := map[string]bool{}
	for _, f := range now {
		k := CanonicalFirewall(f)
		is[k] = true
		if !was[k] {
			for i, l := range f.Lines() {
				if i == 0 {
					b.WriteString("\n    + " + l)
				} else {
					b.WriteString("\n      " + l)
				}
			}
		}
	}
	for _, f := range old {
		if !is[CanonicalFirewall(f)] {
			b.WriteString("\n    - " + f.String())
		}
	}
	return b.String()
}
