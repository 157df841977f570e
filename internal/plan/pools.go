package plan

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nodestate"
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
			for _, o := range chains {
				if o.Ingress != ch.Ingress {
					continue
				}
				for j, oh := range o.Hops {
					if oh.Service == h.Service {
						if cs, ok := b.poolChain(o, j, sp.Pool); ok {
							sp.Chains = append(sp.Chains, cs)
						}
					}
				}
			}
			sp.Shadows = b.poolShadows(ch.Ingress, sp.Chains)
			n := b.p.Nodes[ch.Ingress]
			n.Services = append(n.Services, sp.Service())
		}
	}
}

// poolChain is chain direction ch's selection by pool p at hop i: its
// rule and route at the headend and, per instance, the SID list with
// that instance in the pool's place (packed as the chain is in an f3216
// domain), and the list without the pool for bypass.
func (b *builder) poolChain(ch Chain, i int, p pool.Pool) (pool.ChainSel, bool) {
	n := b.p.Nodes[ch.Ingress]
	cs := pool.ChainSel{Chain: ch.Name}
	found := 0
	for _, r := range n.Rules {
		if r.Table == ch.Table {
			cs.Rule = r
			found++
			break
		}
	}
	for _, r := range n.Routes {
		if r.Table == ch.Table && r.Seg6 != nil {
			cs.Route = r
			found++
			break
		}
	}
	if found != 2 {
		return cs, false
	}
	encap := func(hops []Hop) *nodestate.Seg6Encap {
		if len(hops) == 0 {
			return nil
		}
		segs := make([]netip.Addr, len(hops))
		for k, h := range hops {
			segs[k] = h.SID
		}
		segs = b.pack(hops, segs)
		return &nodestate.Seg6Encap{Mode: b.encapMode(kernelMode(ch.Mode), hops, len(segs), false), Segs: segs}
	}
	for _, in := range p.Instances {
		hops := append([]Hop(nil), ch.Hops...)
		hops[i].SID, hops[i].Service = in.SID, in.Name
		cs.Instances = append(cs.Instances, *encap(hops))
	}
	cs.Bypass = encap(append(append([]Hop(nil), ch.Hops[:i]...), ch.Hops[i+1:]...))
	return cs, true
}

// poolShadows are the headend's chain rules without a pool that come
// before one of chains' rules and may match its packets (same family,
// overlapping destinations): the selector's classifier leaves their
// packets alone, as the kernel's rule order does.
func (b *builder) poolShadows(node string, chains []pool.ChainSel) []nodestate.Rule {
	mine := map[int]bool{}
	for _, c := range chains {
		mine[c.Rule.Table] = true
	}
	pooled := map[int]bool{}
	for _, ch := range b.p.Chains {
		if ch.Ingress != node {
			continue
		}
		for _, h := range ch.Hops {
			if s := b.d.Services[h.Service]; s != nil && s.IsPool() {
				pooled[ch.Table] = true
			}
		}
	}
	var out []nodestate.Rule
	for _, r := range b.p.Nodes[node].Rules {
		if mine[r.Table] || pooled[r.Table] || !strings.HasPrefix(r.Owner, "chain ") {
			continue
		}
		for _, c := range chains {
			if r.Family == c.Rule.Family && r.Priority <= c.Rule.Priority && r.Dst.Overlaps(c.Rule.Dst) {
				out = append(out, r)
				break
			}
		}
	}
	return out
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
			// The instance, then the rest of the chain, packed as the
			// chain is (f3216: containers; otherwise the SIDs).
			hops := append([]Hop{{SID: sid, Node: o.Node, Service: m.Service}}, ch.Hops[hop+1:]...)
			pr.Segs = b.pack(hops, append([]netip.Addr{sid}, rest...))
			pr.Src = src
		}
		sp.Probes = append(sp.Probes, pr)
	}
	return sp
}
