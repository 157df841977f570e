package config

import (
	"fmt"

	"github.com/segchain/segchain/internal/service"
)

// sameNodePairs rejects the same-node pairs the data path cannot serve
// (every other pair works, see plan's loopRoutes): a SID of a kind that
// refuses to follow another SID of its node (service.SameNodeRefuser: a
// userspace service), and an inner-ethernet proxy (End.AS/End.AD of an
// l2encap chain) followed, on the same node, by a SID the kernel serves (a
// native service or the egress). The proxy pushes the outer headers in front of the frame
// with bpf_skb_change_head, which leaves skb->protocol and the network
// header on the inner frame, so it can only forward the result by a FIB
// lookup and a redirect, never hand it to the stack; a local seg6local SID
// is not forwardable. tc-served SIDs (proxies, End.AN.FW) after it work:
// the plan routes them through the node's service loop. In a bidirectional
// chain the reverse direction is checked too.
func (v *validator) sameNodePairs(p string, c *Chain) {
	type hop struct {
		path, name, node string
		svc              *Service
	}
	var hops []hop
	for i, sn := range c.Services {
		s := v.d.Services[sn]
		if s == nil {
			return
		}
		hops = append(hops, hop{fmt.Sprintf("%s.services[%d]", p, i), sn, s.Node, s})
	}
	tail := func(hs []hop, egressNode string) []hop {
		if egressNode == "" {
			return hs
		}
		return append(append([]hop(nil), hs...), hop{p + ".egress", "the egress", egressNode, nil})
	}
	check := func(hs []hop, dir string) {
		for i := 0; i+1 < len(hs); i++ {
			a, b := hs[i], hs[i+1]
			if a.node == b.node && b.svc != nil {
				if r, ok := b.svc.ServiceKind().(service.SameNodeRefuser); ok {
					v.errf(b.path, "%s%s follows %s on node %s: %s; put it on another node", dir, b.name, a.name, a.node, r.RefuseAfterSameNode())
					continue
				}
			}
			if a.svc == nil || !a.svc.SRUnaware() || a.svc.Inner != InnerEthernet || a.node != b.node {
				continue
			}
			if b.svc.Served() {
				continue
			}
			v.errf(b.path, "%s%s follows the inner-ethernet proxy %s on node %s: an Ethernet-in-IPv6 frame the proxy built cannot be handed to the kernel on the same node (only forwarded by the FIB); put it on another node", dir, b.name, a.name, a.node)
		}
	}
	egressNode := ""
	if c.Egress != nil {
		egressNode = c.Egress.Node
	}
	check(tail(hops, egressNode), "")
	if c.Bidirectional {
		rev := make([]hop, 0, len(hops))
		for i := len(hops) - 1; i >= 0; i-- {
			rev = append(rev, hops[i])
		}
		check(tail(rev, c.Ingress), "in the reverse direction, ")
	}
}
