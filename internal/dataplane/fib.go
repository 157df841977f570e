package dataplane

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
)

// parseMultipath decodes RTA_MULTIPATH: a run of struct rtnexthop, each
// followed by its own attributes (RTA_GATEWAY), RTNH_ALIGNed.
func parseMultipath(b []byte) ([]rawNexthop, error) {
	var out []rawNexthop
	ne := nl.NativeEndian()
	for len(b) >= unix.SizeofRtNexthop {
		l := int(ne.Uint16(b[0:2]))
		if l < unix.SizeofRtNexthop || l > len(b) {
			return nil, fmt.Errorf("multipath next hop of length %d in %d bytes", l, len(b))
		}
		nh := rawNexthop{flags: b[2], oif: int(int32(ne.Uint32(b[4:8])))}
		attrs, err := nl.ParseRouteAttr(b[unix.SizeofRtNexthop:l])
		if err != nil {
			return nil, fmt.Errorf("multipath next hop: %w", err)
		}
		for _, a := range attrs {
			if a.Attr.Type&nlaTypeMask == unix.RTA_GATEWAY {
				nh.gw, _ = netip.AddrFromSlice(a.Value)
			}
		}
		out = append(out, nh)
		l = (l + unix.RTA_ALIGNTO - 1) &^ (unix.RTA_ALIGNTO - 1)
		if l >= len(b) {
			break
		}
		b = b[l:]
	}
	return out, nil
}

// routeTypes are the route types as iproute2 names them.
var routeTypes = map[int]string{
	unix.RTN_UNICAST: "unicast", unix.RTN_LOCAL: "local", unix.RTN_BROADCAST: "broadcast",
	unix.RTN_ANYCAST: "anycast", unix.RTN_MULTICAST: "multicast", unix.RTN_BLACKHOLE: "blackhole",
	unix.RTN_UNREACHABLE: "unreachable", unix.RTN_PROHIBIT: "prohibit", unix.RTN_THROW: "throw",
	unix.RTN_NAT: "nat",
}

// encapNames are the lightweight tunnel types as iproute2 names them.
var encapNames = map[uint16]string{
	unix.LWTUNNEL_ENCAP_MPLS: "mpls", unix.LWTUNNEL_ENCAP_IP: "ip", unix.LWTUNNEL_ENCAP_ILA: "ila",
	unix.LWTUNNEL_ENCAP_IP6: "ip6", unix.LWTUNNEL_ENCAP_SEG6: "seg6", unix.LWTUNNEL_ENCAP_BPF: "bpf",
	unix.LWTUNNEL_ENCAP_SEG6_LOCAL: "seg6local", unix.LWTUNNEL_ENCAP_RPL: "rpl",
}

// MainRoutes6 returns every IPv6 route of the main table, of any
// protocol, with all its next hops: the forwarding status follows
// (nodestate.FIBRoute). Cached clones (RTM_F_CLONED) are left out.
func (h *Handle) MainRoutes6() ([]nodestate.FIBRoute, error) {
	raws, err := h.dumpRoutes(unix.AF_INET6)
	if err != nil {
		return nil, err
	}
	names := h.linkNames()
	var out []nodestate.FIBRoute
	for _, raw := range raws {
		if raw.table != tableMain || raw.flags&unix.RTM_F_CLONED != 0 {
			continue
		}
		p, err := raw.dst.Prefix(raw.dstLen)
		if err != nil {
			return nil, fmt.Errorf("netns %q: route prefix %s/%d: %w", h.netns, raw.dst, raw.dstLen, err)
		}
		t, ok := routeTypes[raw.rtype]
		if !ok {
			t = fmt.Sprintf("type%d", raw.rtype)
		}
		r := nodestate.FIBRoute{Dst: p, Protocol: raw.protocol, Type: t, Metric: raw.metric, Encap: encapNames[raw.encapType]}
		if raw.encapType != 0 && r.Encap == "" {
			r.Encap = fmt.Sprintf("encap%d", raw.encapType)
		}
		if raw.multipath {
			for _, nh := range raw.nexthops {
				r.NextHops = append(r.NextHops, fibNextHop(nh.gw, names(nh.oif), uint32(nh.flags)))
			}
		} else if raw.gw.IsValid() || raw.oif != 0 {
			r.NextHops = []nodestate.FIBNextHop{fibNextHop(raw.gw, names(raw.oif), raw.flags)}
		}
		out = append(out, r)
	}
	return out, nil
}

func fibNextHop(gw netip.Addr, dev string, flags uint32) nodestate.FIBNextHop {
	return nodestate.FIBNextHop{Via: gw, Dev: dev, Dead: flags&unix.RTNH_F_DEAD != 0, LinkDown: flags&unix.RTNH_F_LINKDOWN != 0}
}
