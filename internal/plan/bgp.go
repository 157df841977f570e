package plan

import (
	"net/netip"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nodestate"
)

// bgp plans routing: bgp. Hosts and SR-unaware functions keep their static
// default routes; every SR node gets no static route at all but a BGP
// intent: its ASN and router id, one eBGP session per link to another BGP
// speaker (over the link's IPv6 addresses), and the prefixes it
// originates: its locator, its LOC::1 address and its links' IPv6
// prefixes. GoBGP nodes carry it in Node.BGP (their agent runs it),
// routers in Plan.FRR.
func (b *builder) bgp() {
	r := b.d.Routing.BGP
	for _, n := range b.d.NodeNames() {
		sp := b.d.Speaker(n)
		if sp == "" {
			if !b.isSR(n) {
				b.hostDefaults(n)
			}
			continue
		}
		in := &nodestate.BGP{ASN: b.d.ASN(n), RouterID: b.d.RouterID(n), Keepalive: r.Keepalive, Hold: r.Hold}
		if r.BFD {
			in.BFDInterval, in.BFDMultiplier = r.BFDInterval, r.BFDMultiplier
		}
		seen := map[netip.Prefix]bool{}
		adv := func(p netip.Prefix) {
			if p.IsValid() && !seen[p] {
				seen[p] = true
				in.Prefixes = append(in.Prefixes, p)
			}
		}
		if loc := b.d.Nodes[n].Locator; loc != "" {
			adv(netip.MustParsePrefix(loc).Masked())
			if a := b.d.NodeAddr(n); a.IsValid() {
				adv(netip.PrefixFrom(a, 128))
			}
		}
		for _, e := range b.adj[n] {
			local, ok := addrOfFamily(e.iface.Addrs, false)
			if !ok {
				continue
			}
			for _, a := range e.iface.Addrs {
				if a.Addr().Is6() {
					adv(a.Masked())
				}
			}
			peer := e.iface.PeerNode
			if b.d.Speaker(peer) == "" {
				continue
			}
			addr, ok := addrOfFamily(e.peerAddr, false)
			if !ok {
				continue
			}
			in.Neighbors = append(in.Neighbors, nodestate.BGPNeighbor{
				Node: peer, Addr: addr, Local: local, Dev: e.iface.Name, ASN: b.d.ASN(peer),
				// Both ends run BFD: the agents' speakers (internal/bfd)
				// and FRR (bfdd) alike.
				BFD:     r.BFD,
				PeerFRR: b.d.Speaker(peer) == config.SpeakerFRR,
			})
		}
		in.Sort()
		if sp == config.SpeakerFRR {
			if b.p.FRR == nil {
				b.p.FRR = map[string]*nodestate.BGP{}
			}
			b.p.FRR[n] = in
			continue
		}
		b.p.Nodes[n].BGP = in
	}
}
