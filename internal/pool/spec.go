package pool

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service"
)

// Name is the kind's name: the planned selector of one pool at one headend
// (nodestate.Service.Kind). It is not written in a domain file: a service
// with instances is a pool, and plan puts its selector at the headends of
// the chains that name it.
const Name = "pool"

// Health is how the instances are checked (config's Health, defaulted).
type Health struct {
	Kind     string `json:"kind"`
	Interval string `json:"interval"`
	Timeout  string `json:"timeout,omitempty"`
	Rise     int    `json:"rise"`
	Fall     int    `json:"fall"`
	Port     int    `json:"port,omitempty"`
}

// Probe is where one instance is checked from the headend.
type Probe struct {
	// Node is the instance's node; Iface the proxy's interface toward the
	// SF there (carrier).
	Node  string `json:"node"`
	Iface string `json:"iface,omitempty"`
	// Addr is the SF's address (echo, tcp).
	Addr netip.Addr `json:"addr,omitempty"`
	// Segs is an in-band probe's SID list (srv6): the instance's SID, then
	// the rest of the chain to its egress; Src the headend's address the
	// egress routes the probe back to.
	Segs []netip.Addr `json:"segs,omitempty"`
	Src  netip.Addr   `json:"src,omitempty"`
}

// Spec is one pool's selector at one headend: the pool, its health check
// and each instance's probe (same order as Pool.Instances).
type Spec struct {
	Pool   Pool    `json:"pool"`
	Health Health  `json:"health"`
	Probes []Probe `json:"probes"`
	// Chains are the chain directions at this headend that name the
	// pool: the selector's ingress program classifies packets by their
	// rules and marks the chosen instance, whose table holds that
	// instance's complete SID list (docs/pools.md "The data path").
	Chains []ChainSel `json:"chains,omitempty"`
	// Shadows are the rules of chains without a pool at this headend
	// that come before one of Chains' (same family, overlapping
	// destinations): their packets are theirs, not the pool's.
	Shadows []nodestate.Rule `json:"shadows,omitempty"`
}

// ChainSel is one chain direction whose packets the pool chooses for.
type ChainSel struct {
	Chain string `json:"chain"`
	// Rule is the chain's classification rule (selectors, priority, its
	// table); Route its encap route (the placeholder's SID list).
	Rule  nodestate.Rule  `json:"rule"`
	Route nodestate.Route `json:"route"`
	// Instances are, per instance (Pool.Instances' order), the chain's
	// encap with that instance in the pool's place: its complete SID list
	// (packed into containers in an f3216 domain).
	Instances []nodestate.Seg6Encap `json:"instances"`
	// Bypass is the encap without the pool's segment; nil when nothing
	// follows it (a bypass is then dropped: bypass-last).
	Bypass *nodestate.Seg6Encap `json:"bypass,omitempty"`
}

// Service is the spec as a node's service (SID: the placeholder /128).
func (s Spec) Service() nodestate.Service {
	b, _ := json.Marshal(s) // plain data: cannot fail
	return nodestate.Service{Kind: Name, SID: netip.PrefixFrom(s.Pool.Placeholder, 128), Spec: b}
}

// SpecOf reads a service of this kind.
func SpecOf(s nodestate.Service) (Spec, error) {
	var sp Spec
	if s.Kind != Name {
		return sp, fmt.Errorf("service %s is of kind %q, not %s", s.SID, s.Kind, Name)
	}
	if err := json.Unmarshal(s.Spec, &sp); err != nil {
		return sp, fmt.Errorf("pool %s: %w", s.SID, err)
	}
	return sp, nil
}

// String is the pool on one line.
func (s Spec) String() string {
	var in []string
	for _, i := range s.Pool.Instances {
		in = append(in, fmt.Sprintf("%s %s w%d", i.Name, i.SID, i.Weight))
	}
	sym := ""
	if s.Pool.Symmetric {
		sym = " symmetric"
	}
	if s.Pool.Rebalance {
		sym += " rebalance"
	}
	return fmt.Sprintf("pool %s %s [%s] on_failure %s all_down %s%s health %s %s rise %d fall %d",
		s.Pool.Name, netip.PrefixFrom(s.Pool.Placeholder, 128), strings.Join(in, ", "),
		s.Pool.OnFailure, s.Pool.AllDown, sym, s.Health.Kind, s.Health.Interval, s.Health.Rise, s.Health.Fall)
}

// Kind is the pool kind's intent half.
type Kind struct{}

var _ service.Kind = Kind{}

func (Kind) Name() string                             { return Name }
func (Kind) Noun() string                             { return "a pool selector" }
func (Kind) Plural() string                           { return "pool selectors" }
func (Kind) Block() (string, any)                     { return "", nil }
func (Kind) MatchesArgs() bool                        { return false }
func (Kind) Behavior(service.Input) string            { return "pool" }
func (Kind) ServiceBehavior(nodestate.Service) string { return "pool" }

// Planned: plan makes selectors; a domain file never names the kind (config
// leaves it out of the kinds it lists).
func (Kind) Planned() bool { return true }

// Validate refuses kind: pool in a domain file.
func (Kind) Validate(service.Input) []service.FieldError {
	return []service.FieldError{service.Errorf("kind", "pool is planned, not written: a service with instances is a pool (docs/pools.md)")}
}

// Plan is never called (Validate refuses the kind).
func (Kind) Plan(in service.Input) (nodestate.Service, error) {
	return nodestate.Service{}, fmt.Errorf("services.%s: kind pool is planned, not written", in.Name)
}

// Lines renders a selector.
func (Kind) Lines(s nodestate.Service) []string {
	sp, err := SpecOf(s)
	if err != nil {
		return []string{Name + " " + s.SID.String() + " " + string(s.Spec)}
	}
	return []string{sp.String(), sp.Programs()}
}

// Programs says what the selector attaches at the headend and why
// (docs/pools.md "The data path"): pool_in on every interface's ingress
// (forwarded packets), and for the chains whose rule can match the
// headend's own packets (no iif, or iif lo) pool_local on a route only
// those take; nothing on egress.
func (s Spec) Programs() string {
	var own, not []string
	for _, c := range s.Chains {
		if c.Rule.Iif == "" || c.Rule.Iif == "lo" {
			own = append(own, c.Chain)
		} else {
			not = append(not, c.Chain+" (iif "+c.Rule.Iif+")")
		}
	}
	line := "  programs: pool_in on ingress of every interface (forwarded packets)"
	if len(own) > 0 {
		line += "; the headend's own packets of " + strings.Join(own, ", ") + " through pool_local (lwt xmit) on a table only they reach (rule iif lo)"
	}
	if len(not) > 0 {
		line += "; none for " + strings.Join(not, ", ") + ": no local packet matches its rule"
	}
	return line + "; nothing on egress"
}

// Canonical is the spec re-encoded (field order fixed by the types).
func (Kind) Canonical(s nodestate.Service) string {
	sp, err := SpecOf(s)
	if err != nil {
		return s.SID.String() + " " + string(s.Spec)
	}
	b, _ := json.Marshal(sp)
	return s.SID.String() + " " + string(b)
}

// EncodeSpecs is specs as a node's services.
func EncodeSpecs(specs []Spec) []nodestate.Service {
	out := make([]nodestate.Service, 0, len(specs))
	for _, s := range specs {
		out = append(out, s.Service())
	}
	return out
}
