package plan

import (
	"fmt"
	"sort"
)

// hmacCover decides which nodes require HMAC (seg6_require_hmac = 1 on all
// their interfaces): those listed in security.require_hmac, plus every node
// hosting a SID of a signed chain, so the chain's HMAC is verified at each
// of its SIDs rather than only where someone listed it. A node that also
// serves an unsigned chain cannot require HMAC (the sysctl is per
// interface, not per SID) and a SID served by eBPF (proxies, the
// firewall) never reaches the kernel's check: plan warns for each such
// unprotected SID of a signed chain.
func (b *builder) hmacCover() {
	b.requireHMAC = map[string]bool{}
	for _, n := range b.d.Security.RequireHMAC {
		b.requireHMAC[n] = true
	}
	type use struct {
		chain, service, node string
		ebpf                 bool
	}
	var signed []use
	unsigned := map[string][]string{} // node → unsigned chains with a SID there
	names := make([]string, 0, len(b.d.Chains))
	for n := range b.d.Chains {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := b.d.Chains[name]
		if c == nil {
			continue
		}
		var uses []use
		for _, s := range c.Services {
			if sv := b.d.Services[s]; sv != nil {
				uses = append(uses, use{name, s, sv.Node, sv.Served()})
			}
		}
		if c.Egress != nil && c.Egress.Node != "" {
			uses = append(uses, use{name, "egress", c.Egress.Node, false})
		}
		if c.Bidirectional {
			uses = append(uses, use{name, "return", c.Ingress, false})
		}
		for _, u := range uses {
			if c.HMAC != "" {
				signed = append(signed, u)
			} else if !contains(unsigned[u.node], name) {
				unsigned[u.node] = append(unsigned[u.node], name)
			}
		}
	}
	for _, u := range signed {
		switch {
		case u.ebpf:
			b.warn(fmt.Sprintf("chains.%s: SID of %s on node %s does not verify the HMAC: it is served by eBPF, which the kernel's HMAC check does not cover", u.chain, u.service, u.node))
		case len(unsigned[u.node]) > 0 && !b.requireHMAC[u.node]:
			b.warn(fmt.Sprintf("chains.%s: SID of %s on node %s does not verify the HMAC: the node also serves unsigned chain(s) %v, and requiring HMAC there would drop them", u.chain, u.service, u.node, unsigned[u.node]))
		default:
			b.requireHMAC[u.node] = true
		}
	}
}
