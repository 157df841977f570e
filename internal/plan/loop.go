package plan

import (
	"net/netip"

	"github.com/segchain/segchain/internal/nodestate"
)

// loopRoutes gives every tc-served SID (SR proxy, SR-aware firewall) that
// directly follows another SID of the same node in a chain a route through
// the node's service loop (nodestate.LoopDev). The tc programs catch their
// SIDs on ingress; a packet the node has just processed itself (native End,
// or another tc service whose FIB lookup forwards it) does not pass an
// ingress hook again, so without the loop its route lookup found nothing
// and the packet was lost. A SID reached from another node needs no route.
func (b *builder) loopRoutes(hops []Hop) {
	for i := 1; i < len(hops); i++ {
		h := hops[i]
		if hops[i-1].Node != h.Node {
			continue
		}
		s := b.d.Services[h.Service]
		if s == nil {
			continue
		}
		k := s.ServiceKind()
		if k == nil {
			continue
		}
		dst := netip.PrefixFrom(h.SID, 128)
		if k.MatchesArgs() {
			dst = b.d.SIDPrefix(h.SID)
		}
		key := h.Node + " " + dst.String()
		if b.looped[key] {
			continue
		}
		if b.looped == nil {
			b.looped = map[string]bool{}
		}
		b.looped[key] = true
		b.addRoute(h.Node, nodestate.Route{Dst: dst, Dev: nodestate.LoopDev, Via: nodestate.LoopGateway,
			Owner: "service " + h.Service + " (after " + hops[i-1].Service + " on the same node)"})
	}
}
