package config

import "github.com/segchain/segchain/internal/service/firewall"

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
