package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
)

const (
	tableMain       = unix.RT_TABLE_MAIN
	ip6DefaultPrio  = 1024 // IP6_RT_PRIO_USER: the metric the kernel gives IPv6 routes without one
	seg6LocalDevDef = "lo"
)

// Canonical returns r in the form Routes reports it, so that a desired
// route and an observed one compare equal: table main is 0, an IPv6 metric
// of 1024 (the kernel default) is 0, a seg6local route on "lo" has Dev ""
// (ReplaceRoute installs Dev-less seg6local routes on lo, type local), empty
// lists are nil and Owner is cleared.
func Canonical(r nodestate.Route) nodestate.Route {
	if r.Table == tableMain {
		r.Table = 0
	}
	if r.Dst.Addr().Is6() && r.Metric == ip6DefaultPrio {
		r.Metric = 0
	}
	r.Dst = r.Dst.Masked()
	r.Owner = ""
	if r.Seg6 != nil {
		e := *r.Seg6
		if len(e.Segs) == 0 {
			e.Segs = nil
		}
		r.Seg6 = &e
	}
	if r.Seg6Local != nil {
		l := *r.Seg6Local
		if len(l.Segs) == 0 {
			l.Segs = nil
		}
		if len(l.Flavors) == 0 {
			l.Flavors = nil
		}
		// NEXT-C-SID's lengths: the kernel dumps them with next-csid
		// (its defaults when none were sent), never without it.
		l.LBLen, l.NFLen = l.CSIDLengths()
		if r.Dev == seg6LocalDevDef {
			r.Dev = ""
		}
		r.Seg6Local = &l
	}
	if r.Local && r.Dev == seg6LocalDevDef {
		r.Dev = ""
	}
	return r
}

// rawRoute is one RTM_NEWROUTE message as dumped by the kernel.
type rawRoute struct {
	family    int
	dstLen    int
	table     int
	protocol  int
	rtype     int
	flags     uint32
	dst       netip.Addr
	gw        netip.Addr
	oif       int
	metric    int
	encapType uint16
	encap     []byte
	multipath bool
	// nexthops are the next hops of RTA_MULTIPATH (multipath only).
	nexthops []rawNexthop
}

// rawNexthop is one struct rtnexthop of RTA_MULTIPATH with its gateway.
type rawNexthop struct {
	flags uint8
	oif   int
	gw    netip.Addr
}

// dumpRoutes runs an RTM_GETROUTE dump for one family on the handle's
// socket and parses every message; decoding is ours because
// vishvananda/netlink drops seg6local counters, flavors and seg6 modes.
func (h *Handle) dumpRoutes(family int) ([]rawRoute, error) {
	req := h.request(unix.RTM_GETROUTE, unix.NLM_F_DUMP)
	req.AddData(&nl.RtMsg{RtMsg: unix.RtMsg{Family: uint8(family)}})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWROUTE)
	if err != nil {
		return nil, fmt.Errorf("dump routes (family %d) in netns %q: %w", family, h.netns, err)
	}
	var out []rawRoute
	for _, m := range msgs {
		if len(m) < unix.SizeofRtMsg {
			continue
		}
		msg := nl.DeserializeRtMsg(m)
		r := rawRoute{
			family:   int(msg.Family),
			dstLen:   int(msg.Dst_len),
			table:    int(msg.Table),
			protocol: int(msg.Protocol),
			rtype:    int(msg.Type),
			flags:    msg.Flags,
		}
		attrs, err := nl.ParseRouteAttr(m[msg.Len():])
		if err != nil {
			return nil, fmt.Errorf("parse route: %w", err)
		}
		ne := nl.NativeEndian()
		for _, a := range attrs {
			v := a.Value
			switch a.Attr.Type & nlaTypeMask {
			case unix.RTA_DST:
				r.dst, _ = netip.AddrFromSlice(v)
			case unix.RTA_GATEWAY:
				r.gw, _ = netip.AddrFromSlice(v)
			case unix.RTA_OIF:
				if len(v) >= 4 {
					r.oif = int(ne.Uint32(v))
				}
			case unix.RTA_PRIORITY:
				if len(v) >= 4 {
					r.metric = int(ne.Uint32(v))
				}
			case unix.RTA_TABLE:
				if len(v) >= 4 {
					r.table = int(ne.Uint32(v))
				}
			case unix.RTA_ENCAP_TYPE:
				if len(v) >= 2 {
					r.encapType = ne.Uint16(v)
				}
			case unix.RTA_ENCAP:
				r.encap = slices.Clone(v)
			case unix.RTA_MULTIPATH:
				r.multipath = true
				if r.nexthops, err = parseMultipath(v); err != nil {
					return nil, fmt.Errorf("parse route: %w", err)
				}
			}
		}
		if !r.dst.IsValid() {
			if r.family == unix.AF_INET {
				r.dst = netip.IPv4Unspecified()
			} else {
				r.dst = netip.IPv6Unspecified()
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// stamped is r with Proto set when the dumped route carries a protocol
// other than nodestate.Proto (an older segchain's nodestate.ProtoLegacy).
func (r rawRoute) stamped(out nodestate.Route) nodestate.Route {
	if r.protocol != nodestate.Proto {
		out.Proto = r.protocol
	}
	return out
}

// toRoute converts a dumped route to the model (canonical form, see Canonical).
func (r rawRoute) toRoute(names func(int) string) (nodestate.Route, *Counters, error) {
	p, err := r.dst.Prefix(r.dstLen)
	if err != nil {
		return nodestate.Route{}, nil, fmt.Errorf("route prefix %s/%d: %w", r.dst, r.dstLen, err)
	}
	out := nodestate.Route{Dst: p, Table: r.table, Dev: names(r.oif), Via: r.gw, Metric: r.metric}
	var cnt *Counters
	switch r.encapType {
	case unix.LWTUNNEL_ENCAP_SEG6:
		var e Seg6Encap
		if err := e.Decode(r.encap); err != nil {
			return out, nil, fmt.Errorf("route %s: %w", p, err)
		}
		out.Seg6 = &e.Seg6Encap
	case unix.LWTUNNEL_ENCAP_SEG6_LOCAL:
		var e Seg6LocalEncap
		if err := e.Decode(r.encap); err != nil {
			return out, nil, fmt.Errorf("route %s: %w", p, err)
		}
		e.Iif = names(e.IifIndex)
		e.Oif = names(e.OifIndex)
		out.Seg6Local = &e.Seg6Local
		cnt = e.Counters
	default:
		out.Local = r.rtype == unix.RTN_LOCAL
	}
	return Canonical(out), cnt, nil
}

// Routes returns every IPv4 and IPv6 route segchain's domain owns
// (protocol nodestate.Proto, or nodestate.ProtoLegacy of an older segchain
// with Route.Proto set), in every table, fully decoded. Routes are in
// canonical form (Canonical).
func (h *Handle) Routes() ([]nodestate.Route, error) {
	names := h.linkNames()
	var out []nodestate.Route
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		raws, err := h.dumpRoutes(fam)
		if err != nil {
			return nil, err
		}
		for _, raw := range raws {
			if !nodestate.Owned(raw.protocol) || raw.flags&unix.RTM_F_CLONED != 0 {
				continue
			}
			r, _, err := raw.toRoute(names)
			if err != nil {
				return nil, fmt.Errorf("netns %q: %w", h.netns, err)
			}
			out = append(out, raw.stamped(r))
		}
	}
	return out, nil
}

// LocalSIDs returns every seg6local route of the namespace (any protocol,
// any table) with its counters when the route has `count`.
func (h *Handle) LocalSIDs() ([]LocalSID, error) {
	raws, err := h.dumpRoutes(unix.AF_INET6)
	if err != nil {
		return nil, err
	}
	names := h.linkNames()
	var out []LocalSID
	for _, raw := range raws {
		if raw.encapType != unix.LWTUNNEL_ENCAP_SEG6_LOCAL || raw.flags&unix.RTM_F_CLONED != 0 {
			continue
		}
		r, cnt, err := raw.toRoute(names)
		if err != nil {
			return nil, fmt.Errorf("netns %q: %w", h.netns, err)
		}
		out = append(out, LocalSID{Route: r, Protocol: raw.protocol, Counters: cnt})
	}
	return out, nil
}

// RoutesAndLocalSIDs is Routes and LocalSIDs from one dump per family
// (observation reads both on every request).
func (h *Handle) RoutesAndLocalSIDs() ([]nodestate.Route, []LocalSID, error) {
	names := h.linkNames()
	var (
		routes []nodestate.Route
		sids   []LocalSID
	)
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		raws, err := h.dumpRoutes(fam)
		if err != nil {
			return nil, nil, err
		}
		for _, raw := range raws {
			if raw.flags&unix.RTM_F_CLONED != 0 {
				continue
			}
			own := nodestate.Owned(raw.protocol)
			sid := fam == unix.AF_INET6 && raw.encapType == unix.LWTUNNEL_ENCAP_SEG6_LOCAL
			if !own && !sid {
				continue
			}
			r, cnt, err := raw.toRoute(names)
			if err != nil {
				return nil, nil, fmt.Errorf("netns %q: %w", h.netns, err)
			}
			if own {
				routes = append(routes, raw.stamped(r))
			}
			if sid {
				sids = append(sids, LocalSID{Route: r, Protocol: raw.protocol, Counters: cnt})
			}
		}
	}
	return routes, sids, nil
}

// ReplaceRoute installs r (NLM_F_CREATE|NLM_F_REPLACE) with protocol
// r.Protocol() (nodestate.Proto unless r.Proto says otherwise). The kernel
// replaces a route of the same destination, table and metric whatever its
// protocol, so replacing an older segchain's route renumbers it in place,
// without a moment without the route. A seg6local route goes on Route.Dev; when Dev is empty
// (or "lo") it is installed as a route of type local on lo, because the
// kernel rejects traffic matching a unicast route via loopback.
func (h *Handle) ReplaceRoute(r nodestate.Route) error {
	return h.ReplaceRouteAs(r, r.Protocol())
}

// ReplaceRouteAs is ReplaceRoute with another protocol stamp (segchain sid
// add uses nodestate.ProtoManual, so that the domain never owns its SIDs).
func (h *Handle) ReplaceRouteAs(r nodestate.Route, proto int) error {
	if r.Seg6Local != nil {
		if err := checkFlavors(r.Seg6Local); err != nil {
			return fmt.Errorf("replace route %s in netns %q: %w", r, h.netns, err)
		}
	}
	err := h.replaceRoute(r, proto)
	if err != nil && !h.isProbe {
		// Explain a rejection caused by a missing kernel feature.
		if ferr := h.Probe().Check(r); ferr != nil {
			return fmt.Errorf("replace route %s in netns %q: %w (kernel said: %v)", r, h.netns, ferr, errors.Unwrap(err))
		}
	}
	return err
}

func (h *Handle) replaceRoute(r nodestate.Route, proto int) error {
	if err := h.writeRoute(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE, r, proto); err != nil {
		return fmt.Errorf("replace route %s in netns %q: %w", r, h.netns, err)
	}
	return nil
}

// DeleteRoute removes the route with r's destination, table and metric
// installed by segchain (protocol r.Protocol(): nodestate.Proto unless
// r.Proto says otherwise). A missing route yields an error wrapping
// unix.ESRCH.
func (h *Handle) DeleteRoute(r nodestate.Route) error {
	return h.DeleteRouteAs(r, r.Protocol())
}

// DeleteRouteAs is DeleteRoute for a route stamped with protocol proto (the
// kernel deletes an IPv6 route only when the protocol matches).
func (h *Handle) DeleteRouteAs(r nodestate.Route, proto int) error {
	if err := h.writeRoute(unix.RTM_DELROUTE, 0, r, proto); err != nil {
		return fmt.Errorf("delete route %s in netns %q: %w", r, h.netns, err)
	}
	return nil
}

// ClearCounters zeroes the counters of the local SID r (matched by
// destination, table and metric, any protocol) by re-installing it: the new
// lightweight-tunnel state starts with fresh counters.
func (h *Handle) ClearCounters(r nodestate.Route) error {
	sids, err := h.LocalSIDs()
	if err != nil {
		return err
	}
	key := Canonical(r).Key()
	for _, s := range sids {
		if s.Route.Key() == key {
			if err := h.replaceRoute(s.Route, s.Protocol); err != nil {
				return fmt.Errorf("clear counters: %w", err)
			}
			return nil
		}
	}
	return fmt.Errorf("clear counters of %s in netns %q: no such local SID: %w", r.Dst, h.netns, unix.ESRCH)
}

// writeRoute builds an RTM_NEWROUTE/RTM_DELROUTE the way iproute2 does and
// executes it on the handle's socket (extended ACK on, so kernel messages
// such as "Error: seg6local: ..." are part of the error).
func (h *Handle) writeRoute(msgType, flags int, r nodestate.Route, proto int) error {
	return h.writeRouteFd(msgType, flags, r, proto, 0)
}

// replaceEncap installs a seg6local route on lo with a prepared encap
// (used by Probe for End.BPF with an unpinned program fd).
func (h *Handle) replaceEncap(dst netip.Prefix, e *Seg6LocalEncap) error {
	return h.writeRouteFd(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_REPLACE,
		nodestate.Route{Dst: dst, Seg6Local: &e.Seg6Local}, nodestate.Proto, e.BPFFd)
}

func (h *Handle) writeRouteFd(msgType, flags int, r nodestate.Route, proto int, bpfFd int) error {
	if !r.Dst.IsValid() {
		return errors.New("route without destination")
	}
	if r.Seg6 != nil && r.Seg6Local != nil {
		return errors.New("route with both seg6 and seg6local encap")
	}
	dst := r.Dst.Masked()
	v4 := dst.Addr().Is4()
	family := unix.AF_INET6
	if v4 {
		family = unix.AF_INET
	}
	table := r.Table
	if table == 0 {
		table = tableMain
	}
	msg := &nl.RtMsg{RtMsg: unix.RtMsg{
		Family:   uint8(family),
		Dst_len:  uint8(dst.Bits()),
		Protocol: uint8(proto),
	}}
	if table < 256 {
		msg.Table = uint8(table)
	}
	del := msgType == unix.RTM_DELROUTE
	if del {
		msg.Scope = unix.RT_SCOPE_NOWHERE // match any scope
	} else {
		msg.Type = unix.RTN_UNICAST
		msg.Scope = unix.RT_SCOPE_UNIVERSE
		if v4 && !r.Via.IsValid() {
			msg.Scope = unix.RT_SCOPE_LINK // iproute2's choice for direct IPv4 routes
		}
	}
	req := h.request(msgType, flags|unix.NLM_F_ACK)
	req.AddData(msg)
	a := dst.Addr().AsSlice()
	req.AddData(nl.NewRtAttr(unix.RTA_DST, a))
	req.AddData(nl.NewRtAttr(unix.RTA_TABLE, nl.Uint32Attr(uint32(table))))
	if r.Metric != 0 {
		req.AddData(nl.NewRtAttr(unix.RTA_PRIORITY, nl.Uint32Attr(uint32(r.Metric))))
	}
	if del {
		_, err := req.Execute(unix.NETLINK_ROUTE, 0)
		return err
	}
	dev := r.Dev
	if r.Local || (r.Seg6Local != nil && (dev == "" || dev == seg6LocalDevDef)) {
		// A unicast IPv6 route via the loopback device is turned into a
		// reject route by the kernel (fib6_is_reject): packets to the SID
		// would get "unreachable route". A route of type local is exempt
		// and seg6local still redirects its input, so SIDs without a
		// device are installed like `ip -6 route add local SID encap
		// seg6local ... dev lo table main`. A Local route is the same
		// without the encap.
		dev = seg6LocalDevDef
		msg.Type = unix.RTN_LOCAL
		msg.Scope = unix.RT_SCOPE_HOST
		// The kernel refuses a nexthop on a down device; lo is down in a
		// brand-new namespace.
		if lo, err := h.nh.LinkByName(seg6LocalDevDef); err == nil && lo.Attrs().Flags&net.FlagUp == 0 {
			if err := h.nh.LinkSetUp(lo); err != nil {
				return fmt.Errorf("set lo up: %w", err)
			}
		}
	}
	if dev != "" {
		idx, err := h.LinkIndex(dev)
		if err != nil {
			return err
		}
		req.AddData(nl.NewRtAttr(unix.RTA_OIF, nl.Uint32Attr(uint32(idx))))
	}
	if r.Via.IsValid() {
		if r.Via.Is4() != v4 {
			return fmt.Errorf("via %s: address family differs from %s", r.Via, dst)
		}
		req.AddData(nl.NewRtAttr(unix.RTA_GATEWAY, r.Via.AsSlice()))
	}
	var enc interface {
		Type() int
		Encode() ([]byte, error)
	}
	switch {
	case r.Seg6 != nil:
		enc = &Seg6Encap{Seg6Encap: *r.Seg6}
	case r.Seg6Local != nil:
		le := &Seg6LocalEncap{Seg6Local: *r.Seg6Local}
		var err error
		if le.Iif != "" {
			if le.IifIndex, err = h.LinkIndex(le.Iif); err != nil {
				return err
			}
		}
		if le.Oif != "" {
			if le.OifIndex, err = h.LinkIndex(le.Oif); err != nil {
				return err
			}
		}
		if bpfFd > 0 {
			le.BPFFd = bpfFd
		} else if le.Action == "End.BPF" || le.BPF != "" {
			if le.BPF == "" {
				return errors.New("End.BPF needs a pinned program path (bpf)")
			}
			prog, err := ebpf.LoadPinnedProgram(le.BPF, nil)
			if err != nil {
				return fmt.Errorf("load pinned program %s: %w", le.BPF, err)
			}
			defer prog.Close()
			le.BPFFd = prog.FD()
		}
		enc = le
	}
	if enc != nil {
		b, err := enc.Encode()
		if err != nil {
			return err
		}
		req.AddData(nl.NewRtAttr(unix.RTA_ENCAP_TYPE, nl.Uint16Attr(uint16(enc.Type()))))
		req.AddData(nl.NewRtAttr(unix.RTA_ENCAP|unix.NLA_F_NESTED, b))
	}
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}
