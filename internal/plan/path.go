package plan

import "sort"

// pathNodes lists, sorted, every node the packets of a chain cross: the
// headend, the transit nodes between consecutive segments (the planner's
// shortest paths), the nodes of the segments and the SR-unaware SFs behind
// the proxies of the chain. Status uses it to name the chains a node's
// drift breaks (a route missing on an SF, a router, a service node).
func (b *builder) pathNodes(headend string, hops []Hop) []string {
	seen := map[string]bool{headend: true}
	cur := headend
	for _, h := range hops {
		for guard := 0; cur != h.Node && guard < len(b.d.Nodes); guard++ {
			e, ok := b.firstHop(cur, h.Node)
			if !ok {
				break
			}
			cur = e.iface.PeerNode
			seen[cur] = true
		}
		cur = h.Node
		seen[cur] = true
		s := b.d.Services[h.Service]
		if s == nil || !s.SRUnaware() {
			continue
		}
		for _, i := range b.ifs {
			if i.Node == s.Node && (i.Name == s.IfaceOut || i.Name == s.IfaceIn) {
				seen[i.PeerNode] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
