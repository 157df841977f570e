package dataplane

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/segchain/segchain/internal/nodestate"
)

// MTUs reports the namespace's interfaces and their MTU and, for each of
// dsts, the route the kernel picks for it (a plain route lookup with no
// input interface, as `ip -6 route get DST` does) and the MTU a packet
// leaving by it must fit in: the route's mtu metric, else the device's.
func (h *Handle) MTUs(dsts []netip.Addr) (*nodestate.MTUs, error) {
	links, err := h.nh.LinkList()
	if err != nil {
		return nil, fmt.Errorf("netns %q: list links: %w", h.netns, err)
	}
	out := &nodestate.MTUs{Links: map[string]int{}}
	byIndex := map[int]string{}
	for _, l := range links {
		a := l.Attrs()
		out.Links[a.Name] = a.MTU
		byIndex[a.Index] = a.Name
	}
	for _, d := range dsts {
		p := nodestate.PathMTU{Dst: d}
		rs, err := h.nh.RouteGet(net.IP(d.AsSlice()))
		switch {
		case err != nil:
			p.Error = err.Error()
		case len(rs) == 0:
			p.Error = "no route"
		default:
			r := rs[0]
			p.Dev = byIndex[r.LinkIndex]
			p.MTU = r.MTU
			if p.MTU == 0 {
				p.MTU = out.Links[p.Dev]
			}
		}
		out.Paths = append(out.Paths, p)
	}
	return out, nil
}
