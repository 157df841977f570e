package plan

import (
	"net/netip"
	"sort"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nodestate"
)

// boundary computes every SR node's boundary filter (RFC 8754 section
// 5.1). An interface is inside the domain when it faces another SR node,
// or an sf node whose service the node proxies on it, or is the node's
// service loop; every other
// interface (facing a host, an sf it does not serve, or not described by
// the domain file at all) is a boundary interface. security.boundary adds
// interfaces, trusts interfaces or whole nodes, or turns it all off.
func (b *builder) boundary() {
	sec := b.d.Security.Boundary
	if sec.Off {
		b.warn("security.boundary.off: boundary filtering is off: every SID of the domain is reachable from outside it (RFC 8754 section 5.1 requires filtering at the domain's edge)")
		return
	}
	var locators []netip.Prefix
	for _, n := range b.d.NodeNames() {
		if loc := b.d.Nodes[n].Locator; loc != "" && b.isSR(n) {
			if p, err := netip.ParsePrefix(loc); err == nil {
				locators = append(locators, p.Masked())
			}
		}
	}
	if b.d.Compressed() {
		locators = append(locators, b.csid.Block) // every uSID container
	}
	if len(locators) == 0 {
		return
	}
	// A summary block is the domain's own space, as a locator (summaries.go).
	locators = b.summariseBoundary(locators)
	inSIDSpace := func(a netip.Addr) bool {
		for _, l := range locators {
			if l.Contains(a) {
				return true
			}
		}
		return false
	}
	var external []netip.Prefix
	for name, s := range b.d.Services {
		if s != nil && s.External {
			if a, ok := b.sids[name]; ok {
				external = append(external, b.d.SIDPrefix(a))
			}
		}
	}
	// SF nodes are inside the domain too: an SR-unaware SF receives its
	// packets from its proxy only (straight to it, a packet skips the
	// chain), and its kernel would process an SRH addressed to it and
	// send the packet on into the domain. Every packet to one is dropped;
	// one that sf_reachable names takes plain traffic (a node's filter).
	sfReachable := map[string]bool{}
	for _, n := range sec.SFReachable {
		sfReachable[n] = true
	}
	var nodeAddrs, sfAddrs []netip.Addr
	for _, i := range b.ifs {
		sf := b.role(i.Node) == config.RoleSF
		if !b.isSR(i.Node) && !sf {
			continue
		}
		for _, a := range i.Addrs {
			if !a.Addr().Is6() || inSIDSpace(a.Addr()) {
				continue
			}
			if sf && !sfReachable[i.Node] {
				sfAddrs = append(sfAddrs, a.Addr())
			} else {
				nodeAddrs = append(nodeAddrs, a.Addr())
			}
		}
	}
	served := map[string]bool{} // node:iface towards an SF it proxies
	for _, s := range b.d.Services {
		if s != nil && s.SRUnaware() {
			served[s.Node+":"+s.IfaceOut] = true
			served[s.Node+":"+s.IfaceIn] = true
		}
	}
	added := map[string]bool{}
	for _, ep := range sec.Interfaces {
		added[ep] = true
	}
	trustedNode := map[string]bool{}
	trusted := map[string][]string{}
	for _, ep := range sec.Trusted {
		n, ifc, ok := splitEnd(ep)
		if !ok {
			trustedNode[ep] = true
			continue
		}
		trusted[n] = append(trusted[n], ifc)
	}
	for _, i := range b.ifs {
		if !b.isSR(i.Node) || added[i.Node+":"+i.Name] {
			continue
		}
		peer := i.PeerNode
		if b.isSR(peer) || (b.role(peer) == config.RoleSF && served[i.Node+":"+i.Name]) {
			trusted[i.Node] = append(trusted[i.Node], i.Name)
		}
	}
	for _, n := range b.d.NodeNames() {
		if !b.isSR(n) {
			continue
		}
		// The service loop (a veth pair inside the node) carries SRv6 to
		// the node's own tc-served SIDs, the userspace services' pairs to
		// and from their processes, the netfilter loop End.AN.NF's inner
		// packets and its output: never a boundary.
		trusted[n] = append(trusted[n], nodestate.LoopDev, nodestate.LoopPeer, nodestate.UserspaceLoopPattern, nodestate.NFLoopOut, nodestate.NFLoopIn)
		if trustedNode[n] {
			b.warn("security.boundary.trusted: node " + n + " is trusted: it filters nothing at the boundary")
			continue
		}
		bd := &nodestate.Boundary{Trusted: dedup(trusted[n]),
			Locators: append([]netip.Prefix(nil), locators...),
			External: append([]netip.Prefix(nil), external...),
			Nodes:    append([]netip.Addr(nil), nodeAddrs...),
			SFs:      append([]netip.Addr(nil), sfAddrs...)}
		if b.requireHMAC[n] {
			bd.HMACSIDs, bd.HMACKeys = b.hmacClassified(n)
		}
		bd.Sort()
		b.p.Nodes[n].Boundary = bd
	}
}

// hmacClassified lists, for a node that requires HMAC, its SIDs the
// kernel verifies (seg6local ones: not the eBPF proxies or firewall) and
// every key id of the domain, for the boundary's HMAC classifier.
func (b *builder) hmacClassified(node string) ([]netip.Prefix, []uint32) {
	var sids []netip.Prefix
	for _, s := range b.p.SIDs {
		if s.Node != node {
			continue
		}
		switch s.Behavior {
		case "End.AS", "End.AD", "End.AM", config.BehaviorFirewall:
			continue
		}
		sids = append(sids, s.SID)
	}
	var keys []uint32
	for _, k := range b.d.Security.HMAC {
		if k != nil {
			keys = append(keys, uint32(k.ID))
		}
	}
	return sids, keys
}

func splitEnd(ep string) (node, iface string, ok bool) {
	for i := 0; i < len(ep); i++ {
		if ep[i] == ':' {
			return ep[:i], ep[i+1:], i > 0 && i < len(ep)-1
		}
	}
	return ep, "", false
}

func dedup(xs []string) []string {
	sort.Strings(xs)
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// warn records a warning plan prints before the diffs.
func (b *builder) warn(msg string) { b.p.Warnings = append(b.p.Warnings, msg) }
