package config

import (
	"fmt"
	"net/netip"
	"sort"
	"time"
)

// PoolInstance is one more instance of a pool: another service (its own
// node, SID and, for an SR-unaware function, its own proxy and SF).
type PoolInstance struct {
	Service string `yaml:"service" json:"service"`
	Weight  int    `yaml:"weight,omitempty" json:"weight,omitempty"`
}

// Health is how a pool's instances are checked (internal/health).
type Health struct {
	Kind     string `yaml:"kind,omitempty" json:"kind,omitempty"`
	Interval string `yaml:"interval,omitempty" json:"interval,omitempty"`
	Timeout  string `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	Rise     int    `yaml:"rise,omitempty" json:"rise,omitempty"`
	Fall     int    `yaml:"fall,omitempty" json:"fall,omitempty"`
	Port     int    `yaml:"port,omitempty" json:"port,omitempty"`
}

// Pool limits: the headend's selector (internal/pool; its test checks).
const (
	PoolMaxInstances = 8
	PoolMaxSlots     = 32 // sum of the weights
	PoolMaxSegIndex  = 7  // the pool's SID within the first 8 of the SRH
)

// Health defaults (internal/health's).
const (
	DefaultHealthKind     = "srv6"
	DefaultHealthInterval = 10 * time.Millisecond
	DefaultHealthRise     = 3
	DefaultHealthFall     = 2
)

// IsPool reports whether the service is a pool (declares instances).
func (s *Service) IsPool() bool { return len(s.Instances) > 0 }

// PoolMembers are the pool's instances in order: the service itself
// first, then instances; weights defaulted to 1.
func (s *Service) PoolMembers(self string) []PoolInstance {
	w := s.Weight
	if w == 0 {
		w = 1
	}
	out := []PoolInstance{{Service: self, Weight: w}}
	for _, in := range s.Instances {
		if in.Weight == 0 {
			in.Weight = 1
		}
		out = append(out, in)
	}
	return out
}

// HealthOrDefault is the pool's health block with defaults filled in.
func (s *Service) HealthOrDefault() Health {
	h := Health{}
	if s.Health != nil {
		h = *s.Health
	}
	if h.Kind == "" {
		h.Kind = DefaultHealthKind
	}
	if h.Interval == "" {
		h.Interval = DefaultHealthInterval.String()
	}
	if h.Rise == 0 {
		h.Rise = DefaultHealthRise
	}
	if h.Fall == 0 {
		h.Fall = DefaultHealthFall
	}
	return h
}

// IsSymmetric: pools hash the canonical 5-tuple unless told not to, so a
// bidirectional chain's two directions pick the same instance.
func (s *Service) IsSymmetric() bool { return s.Symmetric == nil || *s.Symmetric }

var healthKinds = []string{"carrier", "echo", "tcp", "srv6"}

// pools checks pool services and the chains that name them.
func (v *validator) pools() {
	names := make([]string, 0, len(v.d.Services))
	for n := range v.d.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	instanceOf := map[string]string{}
	for _, name := range v.inFileOrder("services.", names) {
		s := v.d.Services[name]
		p := "services." + name
		if s == nil {
			continue
		}
		if !s.IsPool() {
			for key, set := range map[string]bool{"weight": s.Weight != 0, "health": s.Health != nil,
				"on_failure": s.OnFailure != "", "all_down": s.AllDown != "", "symmetric": s.Symmetric != nil, "rebalance": s.Rebalance} {
				if set {
					v.errf(p+"."+key, "only a pool has %s: declare instances", key)
				}
			}
			continue
		}
		v.pool(p, name, s, instanceOf)
	}
	v.poolChains()
}

func (v *validator) pool(p, name string, s *Service, instanceOf map[string]string) {
	if n := 1 + len(s.Instances); n > PoolMaxInstances {
		v.errf(p+".instances", "%d instances with the service itself, at most %d", n, PoolMaxInstances)
	}
	if s.Weight < 0 || s.Weight > PoolMaxSlots {
		v.errf(p+".weight", "weight %d: 1..%d", s.Weight, PoolMaxSlots)
	}
	slots := max(s.Weight, 1)
	seen := map[string]bool{name: true}
	for i, in := range s.Instances {
		ip := fmt.Sprintf("%s.instances[%d]", p, i)
		if in.Weight < 0 || in.Weight > PoolMaxSlots {
			v.errf(ip+".weight", "weight %d: 1..%d", in.Weight, PoolMaxSlots)
		}
		slots += max(in.Weight, 1)
		o, ok := v.d.Services[in.Service]
		switch {
		case in.Service == "":
			v.errf(ip+".service", "required: the service that is this instance")
			continue
		case !ok:
			v.errf(ip+".service", "unknown service %q", in.Service)
			continue
		case seen[in.Service]:
			v.errf(ip+".service", "%q is already an instance of this pool", in.Service)
			continue
		case o != nil && o.IsPool():
			v.errf(ip+".service", "%q is a pool itself", in.Service)
			continue
		}
		seen[in.Service] = true
		if other, dup := instanceOf[in.Service]; dup {
			v.errf(ip+".service", "%q is already an instance of pool %s", in.Service, other)
		}
		instanceOf[in.Service] = name
	}
	if slots > PoolMaxSlots {
		v.errf(p+".instances", "weights sum to %d, at most %d", slots, PoolMaxSlots)
	}
	switch s.OnFailure {
	case "", "failover", "bypass", "drop":
	default:
		v.errf(p+".on_failure", "%q: failover, bypass or drop", s.OnFailure)
	}
	switch s.AllDown {
	case "", "bypass", "drop":
	default:
		v.errf(p+".all_down", "%q: bypass or drop", s.AllDown)
	}
	v.health(p, name, s)
	// Pools in f3216 domains may have uSID members (session 12): the
	// selector marks at ingress and each instance's table holds its
	// packed SID list (docs/pools.md, docs/usid.md).
}

func (v *validator) health(p, name string, s *Service) {
	h := s.HealthOrDefault()
	hp := p + ".health"
	if !contains(healthKinds, h.Kind) {
		v.errf(hp+".kind", "%q: carrier, echo, tcp or srv6", h.Kind)
		return
	}
	iv, err := time.ParseDuration(h.Interval)
	if err != nil || iv < time.Millisecond || iv > 10*time.Second {
		v.errf(hp+".interval", "%q: a duration from 1ms to 10s", h.Interval)
	}
	if h.Timeout != "" {
		to, err := time.ParseDuration(h.Timeout)
		if err != nil || to <= 0 || (iv > 0 && to > iv) {
			v.errf(hp+".timeout", "%q: a duration up to the interval", h.Timeout)
		}
	}
	if h.Rise < 1 || h.Rise > 100 {
		v.errf(hp+".rise", "%d: 1..100", h.Rise)
	}
	if h.Fall < 1 || h.Fall > 100 {
		v.errf(hp+".fall", "%d: 1..100", h.Fall)
	}
	if h.Kind == "tcp" && (h.Port < 1 || h.Port > 65535) {
		v.errf(hp+".port", "tcp checks need a port 1..65535")
	} else if h.Kind != "tcp" && h.Port != 0 {
		v.errf(hp+".port", "only tcp checks have a port")
	}
	// carrier, echo and tcp check the SF: every instance must have one.
	if h.Kind != "srv6" {
		for _, m := range s.PoolMembers(name) {
			o := v.d.Services[m.Service]
			if o == nil {
				continue
			}
			if !o.SRUnaware() {
				v.errf(hp+".kind", "%s checks an SF, and instance %s is SR-aware: use srv6 (the in-band probe)", h.Kind, m.Service)
				continue
			}
			if h.Kind == "carrier" && o.IfaceOut == "" {
				v.errf(hp+".kind", "carrier: instance %s has no iface_out", m.Service)
			}
			if h.Kind != "carrier" && o.SFNh6 == "" {
				v.errf(hp+".kind", "%s: instance %s has no sf_nh6 (IPv6 address of the SF) to check", h.Kind, m.Service)
			}
		}
	}
}

// poolChains checks the chains that name a pool: the selector rewrites
// an H.Encaps SID list (no HMAC to break), one pool per chain, within the
// first segments; an in-band probe must come back from the egress.
func (v *validator) poolChains() {
	names := make([]string, 0, len(v.d.Chains))
	for n := range v.d.Chains {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, cn := range names {
		c := v.d.Chains[cn]
		if c == nil {
			continue
		}
		p := "chains." + cn
		pools := 0
		for i, sn := range c.Services {
			s := v.d.Services[sn]
			if s == nil || !s.IsPool() {
				continue
			}
			sp := fmt.Sprintf("%s.services[%d]", p, i)
			if pools++; pools == 2 {
				v.errf(sp, "a second pool in the chain: the headend selects one pool per chain")
			}
			if c.Mode != "" && c.Mode != ModeEncap {
				v.errf(p+".mode", "pool %s needs mode encap (the selector rewrites the SRH of H.Encaps)", sn)
			}
			if c.HMAC != "" {
				v.errf(p+".hmac", "pool %s: the selector rewrites the SID list, which would break the HMAC", sn)
			}
			n := len(c.Services)
			if c.Egress != nil {
				n++
			}
			if idx := n - 1 - i; idx > PoolMaxSegIndex {
				v.errf(sp, "pool %s is segment %d of the SRH, the selector looks at the first %d", sn, idx, PoolMaxSegIndex+1)
			}
			if s.HealthOrDefault().Kind == "srv6" && c.Egress != nil && (c.Egress.Behavior == "End.DX6" || c.Egress.Behavior == "End.DX4" || c.Egress.Behavior == "End.DX2") {
				v.errf(p+".egress.behavior", "pool %s's in-band probe (health kind srv6) comes back through the egress, and %s hands it to a next hop that does not route it back: use End.DT6 or another health kind", sn, c.Egress.Behavior)
			}
		}
	}
}

// PoolProbeSource is the headend's address where in-band probes return:
// its IPv6 address on its first link (an address it really has).
func (d *Domain) PoolProbeSource(node string) netip.Addr {
	n := d.Nodes[node]
	if n == nil {
		return netip.Addr{}
	}
	for _, l := range d.Links {
		if l == nil || len(l.Endpoints) != 2 {
			continue
		}
		for _, ep := range l.Endpoints {
			if nn, _, ok := splitEndpoint(ep); ok && nn == node {
				if p, err := netip.ParsePrefix(l.IPv6); err == nil {
					if a, err := HostAddr(p, n.ID); err == nil {
						return a.Addr()
					}
				}
			}
		}
	}
	return netip.Addr{}
}

func init() {
	for k, v := range map[string]string{
		"Service.instances":  "Makes the service a pool (docs/pools.md): the service itself is its first instance, each entry another service (its own node, SID and, SR-unaware, its own proxy and SF). Chains name the pool's service; the chain's headend sends each flow to one healthy instance (weighted rendezvous hashing of the inner 5-tuple). At most 8 instances with the service itself.",
		"Service.weight":     "Pools only: the service's own weight as an instance (default 1; the weights of a pool sum to at most 32).",
		"Service.health":     "Pools only: how instances are checked (default: kind srv6, interval 10ms, rise 3, fall 2).",
		"Service.on_failure": "Pools only: what happens to a failed instance's flows: failover (default: to the next healthy instance by the hash), bypass (the pool's segment is removed from the SID list, counted) or drop (counted).",
		"Service.all_down":   "Pools only, failover: what happens when no instance is healthy: drop (default) or bypass.",
		"Service.symmetric":  "Pools only: hash the canonical 5-tuple (default true), so both directions of a bidirectional chain pick the same instance.",
		"Service.rebalance":  "Pools only: when a failed instance recovers, its old flows return to it at once. Default false: the flows failover moved stay where they went (remembered at the headend, 60 s idle) and only new flows return.",

		"PoolInstance":         "Another instance of a pool.",
		"PoolInstance.service": "The service that is the instance (not a pool itself, in one pool only).",
		"PoolInstance.weight":  "Its weight: its share of flows is weight / the pool's sum (default 1).",

		"Health":          "How a pool's instances are checked; liveness goes straight into the headend's data path.",
		"Health.kind":     "srv6 (default: an in-band probe along the instance's SID list, through its proxy and SF or SR-aware function and the chain's egress, back to the headend), carrier (the proxy's iface_out toward the SF), echo (ICMPv6 echo to the SF's sf_nh6) or tcp (connect to sf_nh6 and port). carrier, echo and tcp need SR-unaware instances.",
		"Health.interval": "Time between checks, 1ms..10s (default 10ms).",
		"Health.timeout":  "Time a check may take, at most the interval (default: the interval). For echo and srv6 the floor of a timeout that follows the measured round trip (SRTT + 4·RTTVAR, up to 10 × this), so a slow but answering path is not a failure.",
		"Health.rise":     "Successes in a row that bring a down instance up (default 3).",
		"Health.fall":     "Failures in a row that bring an up instance down (default 2).",
		"Health.port":     "tcp only: the SF's port.",
	} {
		fieldDoc[k] = v
	}
}

// poolInstanceUses: a pool's instances serve the chains that name the pool
// (a packet the selector sends to an instance carries the pool's chain),
// so a static proxy (End.AS) instance has the pool's chain directions and
// the pool's segments after it (its CACHE); internal/plan gives it the
// same list (poolInstanceSegs).
func (v *validator) poolInstanceUses(uses map[string][]string, after map[string]int) {
	for _, name := range sortedKeys(v.d.Services) {
		s := v.d.Services[name]
		if s == nil || !s.IsPool() {
			continue
		}
		seen := map[string]bool{name: true}
		for _, in := range s.Instances {
			// A duplicate or a pool as an instance is an error of its own.
			if is := v.d.Services[in.Service]; seen[in.Service] || is == nil || is.IsPool() {
				continue
			}
			seen[in.Service] = true
			uses[in.Service] = append(uses[in.Service], uses[name]...)
			if _, ok := after[in.Service]; !ok {
				if n, ok := after[name]; ok {
					after[in.Service] = n
				}
			}
		}
	}
}
