package plan

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/segchain/segchain/internal/nodestate"
)

// loopRoutes handles every SID that directly follows another SID of the
// same node in a chain (the node itself, not another node, routes the
// packet to it):
//
//   - A SID served by a tc program (SR proxy, SR-aware firewall, End.AN.NF,
//     userspace) gets a route through the node's service loop
//     (nodestate.LoopDev). The tc programs catch their SIDs on ingress; a
//     packet the node has just processed itself (native End, or another
//     tc service whose FIB lookup forwards it) does not pass an ingress
//     hook again, so without the loop its route lookup found nothing and
//     the packet was lost. A SID reached from another node needs no route.
//   - A SID the kernel serves (a native behaviour, the egress) right after
//     another one gets its seg6local route on LoopDev instead of lo. The
//     kernel's next-hop lookup after End, End.T, End.B6 ...
//     (seg6_lookup_any_nexthop without local delivery) discards every
//     route whose device is a loopback, so End followed by End on one node
//     lost every packet with no counter moving. On a non-loopback device
//     the route's seg6local input runs as for a packet from outside; a
//     packet the node itself sends to the SID goes round the loop and
//     arrives as one from outside. After a tc service it stays on lo: the
//     program hands the packet to the stack (the FIB cannot forward a
//     seg6local route), whose input route lookup keeps loopback routes.
func (b *builder) loopRoutes(hops []Hop) {
	for i := 1; i < len(hops); i++ {
		h := hops[i]
		if hops[i-1].Node != h.Node {
			continue
		}
		s := b.d.Services[h.Service]
		if s == nil || s.ServiceKind() == nil {
			if ps := b.d.Services[hops[i-1].Service]; ps == nil || ps.ServiceKind() == nil {
				b.kernelSIDOnLoop(h, hops[i-1])
			}
			continue
		}
		k := s.ServiceKind()
		dst := netip.PrefixFrom(h.SID, 128)
		if k.MatchesArgs() || b.isUSID(h.SID) {
			dst = b.sidPrefix(h.SID)
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

// kernelSIDOnLoop moves the seg6local route of h's SID, already planned on
// h's node, from lo to the service loop (see loopRoutes).
func (b *builder) kernelSIDOnLoop(h, prev Hop) {
	n := b.p.Nodes[h.Node]
	if n == nil {
		return
	}
	dst := b.sidPrefix(h.SID)
	for i := range n.Routes {
		r := &n.Routes[i]
		if r.Seg6Local == nil || r.Dst != dst || r.Table != 0 || r.Dev != "" {
			continue
		}
		r.Dev = nodestate.LoopDev
		r.Owner += " (after " + prev.Service + " on the same node)"
	}
}

// bindingLoops does for binding SIDs (End.B6, End.B6.Encaps) what
// loopRoutes does for chains: the first segment of a binding SID's list is
// the next SID its packets go to, and when it is a SID of the same node the
// kernel's lookup after End.B6* is the one that discards loopback routes.
func (b *builder) bindingLoops() {
	names := make([]string, 0, len(b.d.Services))
	for n := range b.d.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		s := b.d.Services[name]
		if s == nil || s.ServiceKind() != nil || len(s.Segs) == 0 ||
			!strings.EqualFold(s.Behavior, "End.B6") && !strings.EqualFold(s.Behavior, "End.B6.Encaps") {
			continue
		}
		first, err := b.resolveSID(s.Segs[0])
		if err != nil {
			continue
		}
		for _, si := range b.p.SIDs {
			if si.Node == s.Node && si.SID.Contains(first) {
				b.loopRoutes([]Hop{{SID: b.sids[name], Node: s.Node, Service: name},
					{SID: first, Node: s.Node, Service: si.Service}})
				break
			}
		}
	}
}
