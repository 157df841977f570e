package config

import (
	"errors"

	"github.com/segchain/segchain/internal/service/firewall"
)

// The firewall kind's block and its resolution are the kind's own
// (internal/service/firewall); config keeps these names for its callers.

// BehaviorFirewall is the behaviour of a kind: firewall service.
const BehaviorFirewall = firewall.Behavior

// Firewall policies.
const (
	PolicyAccept = firewall.PolicyAccept
	PolicyDrop   = firewall.PolicyDrop
)

// Firewall is the `firewall:` block of a kind: firewall service.
type Firewall = firewall.Config

// FirewallConfig is a firewall block resolved.
type FirewallConfig = firewall.Resolved

// FirewallError is one problem of a firewall block.
type FirewallError = firewall.FieldError

// ResolveFirewall parses a firewall block (firewall.Resolve).
func ResolveFirewall(fw *Firewall, dir string, argsBits int) (FirewallConfig, error) {
	return firewall.Resolve(fw, dir, argsBits)
}

// firewallService checks a kind: firewall service: no behaviour, no
// parameters or proxy fields, a firewall block whose rules parse.
func (v *validator) firewallService(p string, s *Service) {
	if s.Behavior != "" {
		v.errf(p+".behavior", "must be empty for kind %s (it is %s)", KindFirewall, BehaviorFirewall)
	}
	v.noEndpointParams(p, s, KindFirewall)
	for _, f := range []struct {
		key string
		set bool
	}{{"proxy", s.Proxy != ""}, {"inner", s.Inner != ""}, {"sf_nh6", s.SFNh6 != ""}, {"sf_nh4", s.SFNh4 != ""},
		{"sf_mac", s.SFMac != ""}, {"iface_out", s.IfaceOut != ""}, {"iface_in", s.IfaceIn != ""},
		{"flow_timeout", s.FlowTimeout != 0}, {"flow_max", s.FlowMax != 0}} {
		if f.set {
			v.errf(p+"."+f.key, "only for kind %s", KindSRUnaware)
		}
	}
	if s.Firewall == nil {
		v.errf(p+".firewall", "required for kind %s (at least a policy or rules)", KindFirewall)
		return
	}
	_, err := ResolveFirewall(s.Firewall, v.d.Dir, v.f.ArgsBits)
	for _, e := range unjoin(err) {
		var fe *FirewallError
		if errors.As(e, &fe) {
			v.errf(p+"."+fe.Path, "%s", fe.Msg)
		} else {
			v.errf(p+".firewall", "%v", e)
		}
	}
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
