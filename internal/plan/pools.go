package plan

import (
	"net/netip"
	"sort"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/pool"
)

// poolInstanceSegs gives every instance of a pool the segments after the
// pool in its chains (a static proxy's CACHE), as the pool's own service
// gets them: a packet the selector sends to an instance carries the
// pool's chain. Called from chains before kindServices reads afterSegs.
func (b *builder) poolInstanceSegs() {
	chains := append([]Chain(nil), b.p.Chains...)
	sort.Slice(chains, func(i, j int) bool { return chains[i].Name < chains[j].Name })
	for _, ch := range chains {
		for i, h := range ch.Hops {
			s := b.d.Services[h.Service]
			if s == nil || !s.IsPool() {
				continue
			}
			var segs []netip.Addr
			for _, x := range ch.Hops[i+1:] {
				segs = append(segs, x.SID)
			}
			for _, in := range s.Instances {
				if _, own := b.afterSegs[in.Service]; own {
					continue
				}
				if b.afterSegs == nil {
					b.afterSegs = map[string][]netip.Addr{}
				}
				b.afterSegs[in.Service] = segs
			}
		}
	}
}

// pools puts a selector of every pool at the headend of each chain
// direction that names it: the kind pool's service (SID: the placeholder,
// the pool's own SID, which the kernel's encap route pushes). A pool in
// several chains of one headend is one selector; its in-band probe
// follows the first chain's SID list (by name).
func (b *builder) pools() {
	chains := append([]Chain(nil), b.p.Chains...)
	sort.Slice(chains, func(i, j int) bool { return chains[i].Name < chains[j].Name })
	done := map[string]bool{}
	for _, ch := range chains {
		for i, h := range ch.Hops {
			s := b.d.Services[h.Service]
			if s == nil || !s.IsPool() || done[ch.Ingress+"/"+h.Service] {
				continue
			}
			done[ch.Ingress+"/"+h.Service] = true
			sp := b.poolSpec(h.Service, s, ch, i)
			n := b.p.Nodes[ch.Ingress]
			n.Services = append(n.Services, sp.Service())
		}
	}
}

func (b *builder) poolSpec(name string, s *config.Service, ch Chain, hop int) pool.Spec {
	hc := s.HealthOrDefault()
	sp := pool.Spec{
		Pool: pool.Pool{Name: name, Placeholder: b.sids[name], Symmetric: s.IsSymmetric(),
			OnFailure: s.OnFailure, AllDown: s.AllDown, Rebalance: s.Rebalance},
		Health: pool.Health{Kind: hc.Kind, Interval: hc.Interval, Timeout: hc.Timeout, Rise: hc.Rise, Fall: hc.Fall, Port: hc.Port},
	}
	if sp.Pool.OnFailure == "" {
		sp.Pool.OnFailure = pool.Failover
	}
	if sp.Pool.AllDown == "" {
		sp.Pool.AllDown = pool.Drop
	}
	var rest []netip.Addr
	for _, h := range ch.Hops[hop+1:] {
		rest = append(rest, h.SID)
	}
	src := b.d.PoolProbeSource(ch.Ingress)
	for _, m := range s.PoolMembers(name) {
		o := b.d.Services[m.Service]
		sid := b.sids[m.Service]
		sp.Pool.Instances = append(sp.Pool.Instances, pool.Instance{Name: m.Service, Node: o.Node, SID: sid, Weight: m.Weight})
		pr := pool.Probe{Node: o.Node}
		switch hc.Kind {
		case "carrier":
			pr.Iface = o.IfaceOut
		case "echo", "tcp":
			pr.Addr, _ = netip.ParseAddr(o.SFNh6)
		case "srv6":
			pr.Segs = append([]netip.Addr{sid}, rest...)
			pr.Src = src
		}
		sp.Probes = append(sp.Probes, pr)
	}
	return sp
}
