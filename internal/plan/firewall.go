package plan

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nodestate"
)

// firewallSID records a firewall service's SID (its LOC:FUNCT prefix, so
// every ARGS value reaches it) without a seg6local route: internal/fw's tc
// program serves it.
func (b *builder) firewallSID(name string, s *config.Service, a netip.Addr) {
	f := b.d.Format()
	b.p.SIDs = append(b.p.SIDs, SIDInfo{SID: b.d.SIDPrefix(a), Node: s.Node, Service: name,
		Behavior: s.EffectiveBehavior(), LocatorBits: f.LocatorBits, FunctionBits: f.FunctionBits, Args: f.ArgsBits})
}

// firewalls emits the firewall instance of every kind: firewall service on
// its node: rules in canonical syntax, the policy and the eval-args table.
func (b *builder) firewalls() error {
	names := make([]string, 0, len(b.d.Services))
	for n, s := range b.d.Services {
		if s != nil && s.Kind == config.KindFirewall {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	f := b.d.Format()
	var errs []error
	for _, name := range names {
		s := b.d.Services[name]
		fc, err := config.ResolveFirewall(s.Firewall, b.d.Dir, f.ArgsBits)
		if err != nil {
			errs = append(errs, fmt.Errorf("services.%s: %w", name, err))
			continue
		}
		fw := nodestate.Firewall{SID: b.d.SIDPrefix(b.sids[name]), ArgsBits: f.ArgsBits, Policy: fc.Policy.String(),
			Args: map[uint32]string{}}
		for _, r := range fc.Rules {
			fw.Rules = append(fw.Rules, r.String())
		}
		for k, v := range fc.Args {
			fw.Args[k] = v.String()
		}
		n := b.p.Nodes[s.Node]
		n.Firewalls = append(n.Firewalls, fw)
	}
	return errors.Join(errs...)
}
