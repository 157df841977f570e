package plan

import (
	"net/netip"

	"github.com/segchain/segchain/internal/nodestate"
)

// localDelivery lets a decapsulating End.DT6 at node deliver to the
// node's own addresses: the kernel looks up the SID's table alone, where
// the node's addresses are not local (they are in the local table), so
// without a local route there the inner packet is sent out again towards
// a neighbour that never answers for it. It matters most for a
// bidirectional chain's return at its headend: replies to connections the
// headend itself opened through the chain come back that way. One local
// route per address of node within dst (every address when dst is not
// valid), in table; each is added once per node and table.
func (b *builder) localDelivery(node string, table int, dst netip.Prefix, owner string) {
	if b.localRoutes == nil {
		b.localRoutes = map[string]bool{}
	}
	for _, i := range b.ifs {
		if i.Node != node {
			continue
		}
		for _, a := range i.Addrs {
			addr := a.Addr()
			if !addr.Is6() || addr.IsLinkLocalUnicast() || (dst.IsValid() && !dst.Contains(addr)) {
				continue
			}
			r := nodestate.Route{Dst: netip.PrefixFrom(addr, 128), Table: table, Local: true, Owner: owner}
			if b.localRoutes[node+" "+r.Key()] {
				continue
			}
			b.localRoutes[node+" "+r.Key()] = true
			b.addRoute(node, r)
		}
	}
}
