package nodestate

import (
	"fmt"
	"net/netip"
	"strings"
)

// FIBRoute is one IPv6 route of a node's main table as the kernel
// forwards with it, whoever installed it (segchain's static routes, the
// agent's BGP speaker, FRR's zebra, the kernel's connected routes):
// status follows them to show the path a chain really takes
// (internal/chainpath). Unlike Route it is read-only and keeps every next
// hop of a multipath route.
type FIBRoute struct {
	Dst netip.Prefix `json:"dst"`
	// Protocol is the rtnetlink protocol number (2 kernel, 186 FRR's
	// bgp, 197 Proto, 199 ProtoBGP ...).
	Protocol int `json:"protocol"`
	// Type is the route type as iproute2 spells it ("unicast", "local",
	// "blackhole", "unreachable", "prohibit", "throw").
	Type   string `json:"type"`
	Metric int    `json:"metric,omitempty"`
	// Encap is the lightweight tunnel of the route ("seg6local",
	// "seg6" ...; "" none).
	Encap    string       `json:"encap,omitempty"`
	NextHops []FIBNextHop `json:"nexthops,omitempty"`
}

// FIBNextHop is one next hop of a FIBRoute: a gateway on a device, or the
// device alone (a connected route).
type FIBNextHop struct {
	Via netip.Addr `json:"via,omitzero"`
	Dev string     `json:"dev,omitempty"`
	// Dead: the kernel does not use this next hop (RTNH_F_DEAD);
	// LinkDown: its device has no carrier (RTNH_F_LINKDOWN).
	Dead     bool `json:"dead,omitempty"`
	LinkDown bool `json:"linkdown,omitempty"`
}

// String renders the route the way ip -6 route prints it (roughly).
func (r FIBRoute) String() string {
	var b strings.Builder
	if r.Type != "" && r.Type != "unicast" {
		b.WriteString(r.Type + " ")
	}
	b.WriteString(r.Dst.String())
	for _, h := range r.NextHops {
		if h.Via.IsValid() {
			b.WriteString(" via " + h.Via.String())
		}
		if h.Dev != "" {
			b.WriteString(" dev " + h.Dev)
		}
		if h.Dead {
			b.WriteString(" dead")
		}
		if h.LinkDown {
			b.WriteString(" linkdown")
		}
	}
	fmt.Fprintf(&b, " proto %d", r.Protocol)
	if r.Metric != 0 {
		fmt.Fprintf(&b, " metric %d", r.Metric)
	}
	return b.String()
}
