package bgp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	api "github.com/osrg/gobgp/v3/api"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
	"github.com/osrg/gobgp/v3/pkg/server"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
)

const mainTable = unix.RT_TABLE_MAIN

func (s *Speaker) nsHandle() (netns.NsHandle, error) {
	if s.netns == "" {
		return netns.Get()
	}
	return netns.GetFromPath(nsutil.Path(s.netns))
}

// closeHandle drops run's netlink socket (run ends, or a change failed).
func (s *Speaker) closeHandle() {
	if s.h != nil {
		s.h.Close()
		s.h = nil
	}
}

func (s *Speaker) handle() (*netlink.Handle, error) {
	ns, err := s.nsHandle()
	if err != nil {
		return nil, fmt.Errorf("bgp: open netns %q: %w", s.netns, err)
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns)
}

// Installed returns the routes the speaker has installed in the kernel
// now (protocol nodestate.ProtoBGP).
func (s *Speaker) Installed() ([]Route, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	cur, _, _, err := installed(h)
	if err != nil {
		return nil, err
	}
	out := make([]Route, 0, len(cur))
	for _, r := range cur {
		out = append(out, r)
	}
	sortRoutes(out)
	return out, nil
}

// installed reads the routes of protocol ProtoBGP and metric Metric in the
// main table, by destination, with the netlink routes themselves (to
// delete them), and the routes of legacyMetric (to remove).
func installed(h *netlink.Handle) (map[netip.Prefix]Route, map[netip.Prefix]netlink.Route, []netlink.Route, error) {
	links, err := h.LinkList()
	if err != nil {
		return nil, nil, nil, err
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	rs, err := h.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Protocol: nodestate.ProtoBGP, Table: mainTable},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, nil, nil, err
	}
	out := map[netip.Prefix]Route{}
	raw := map[netip.Prefix]netlink.Route{}
	var legacy []netlink.Route
	for _, r := range rs {
		if r.Dst != nil && r.Priority == legacyMetric {
			legacy = append(legacy, r)
		}
		if r.Dst == nil || r.Priority != Metric {
			continue
		}
		a, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		ones, _ := r.Dst.Mask.Size()
		dst := netip.PrefixFrom(a.Unmap(), ones)
		rt := Route{Dst: dst}
		add := func(gw net.IP, idx int) {
			if g, ok := netip.AddrFromSlice(gw); ok {
				rt.Hops = append(rt.Hops, Hop{Via: g.Unmap(), Dev: names[idx]})
			}
		}
		if len(r.MultiPath) > 0 {
			for _, nh := range r.MultiPath {
				add(nh.Gw, nh.LinkIndex)
			}
		} else {
			add(r.Gw, r.LinkIndex)
		}
		sort.Slice(rt.Hops, func(i, j int) bool { return rt.Hops[i].Via.Less(rt.Hops[j].Via) })
		out[dst] = rt
		raw[dst] = r
	}
	return out, raw, legacy, nil
}

// install makes the kernel's BGP routes what Select makes of learned:
// for every prefix (only == nil; the kernel's table is read), or for the
// prefixes in only (compared with s.routes).
func (s *Speaker) install(in *nodestate.BGP, learned map[netip.Prefix][]Candidate, usable func(netip.Addr) bool, only map[netip.Prefix]bool) error {
	// One netlink socket for the speaker's run (opening the namespace and
	// a socket per recomputation was a fifth of its cost), dropped after
	// an error.
	if s.h == nil {
		h, err := s.handle()
		if err != nil {
			return err
		}
		s.h = h
	}
	h := s.h
	connected := map[netip.Prefix]bool{}
	addrs, err := h.AddrList(nil, netlink.FAMILY_V6)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if p, ok := netipPrefix(a.IPNet); ok {
			connected[p.Masked()] = true
		}
	}
	want := Select(in, learned, usable, func(p netip.Prefix) bool { return connected[p] })
	cur := s.routes
	var legacy []netlink.Route
	if only == nil || cur == nil {
		if cur, _, legacy, err = installed(h); err != nil {
			return err
		}
	}
	keep := map[netip.Prefix]bool{}
	for _, r := range want {
		keep[r.Dst] = true
	}
	var stale []netip.Prefix // installed, recomputed, not wanted
	for dst := range cur {
		if !keep[dst] && (only == nil || only[dst]) {
			stale = append(stale, dst)
		}
	}
	next := maps.Clone(cur)
	ifindex := map[string]int{} // the hops' interfaces, looked up once
	var errs []error
	var changed, withdrawn int
	for _, r := range want {
		if c, ok := cur[r.Dst]; ok && c.String() == r.String() {
			continue
		}
		nr, err := toNetlink(h, r, ifindex)
		if err == nil {
			err = h.RouteReplace(nr)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("route %s: %w", r, err))
			continue
		}
		next[r.Dst] = r
		s.log.Debug("bgp route", "route", r.String())
		changed++
	}
	for _, dst := range stale {
		if err := h.RouteDel(routeKey(dst)); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", dst, err))
			continue
		}
		delete(next, dst)
		s.log.Debug("bgp route withdrawn", "dst", dst.String())
		withdrawn++
	}
	// After the adds: a legacy route goes once its successor is in.
	for _, r := range legacy {
		if err := h.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete legacy route %s: %w", r.Dst, err))
			continue
		}
		withdrawn++
	}
	s.routes = next
	if len(errs) > 0 {
		s.routes = nil // the kernel's table is read again next time
		s.closeHandle()
	}
	// One line per recomputation, not per route: a converging domain of
	// 100 nodes changes tens of thousands of routes.
	if changed+withdrawn > 0 {
		recomputed := "all"
		if only != nil {
			recomputed = strconv.Itoa(len(only))
		}
		s.log.Info("bgp routes", "installed", changed, "withdrawn", withdrawn, "total", len(next), "prefixes_recomputed", recomputed)
	}
	return errors.Join(errs...)
}

// routeKey is what deletes the speaker's route to dst: its destination,
// protocol, metric and table.
func routeKey(dst netip.Prefix) *netlink.Route {
	return &netlink.Route{
		Dst:      &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), 128)},
		Protocol: nodestate.ProtoBGP, Priority: Metric, Table: mainTable, Family: netlink.FAMILY_V6,
	}
}

// flush removes every route the speaker installed.
func (s *Speaker) flush() error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	defer h.Close()
	_, raw, legacy, err := installed(h)
	if err != nil {
		return err
	}
	var errs []error
	for dst, r := range raw {
		if err := h.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", dst, err))
		}
	}
	for _, r := range legacy {
		if err := h.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("delete legacy route %s: %w", r.Dst, err))
		}
	}
	return errors.Join(errs...)
}

// toNetlink is r as a netlink route; ifindex caches the interfaces'
// indexes by name.
func toNetlink(h *netlink.Handle, r Route, ifindex map[string]int) (*netlink.Route, error) {
	nr := routeKey(r.Dst)
	for _, hop := range r.Hops {
		idx, ok := ifindex[hop.Dev]
		if !ok {
			l, err := h.LinkByName(hop.Dev)
			if err != nil {
				return nil, fmt.Errorf("interface %s: %w", hop.Dev, err)
			}
			idx = l.Attrs().Index
			ifindex[hop.Dev] = idx
		}
		if len(r.Hops) == 1 {
			nr.LinkIndex, nr.Gw = idx, hop.Via.AsSlice()
			return nr, nil
		}
		nr.MultiPath = append(nr.MultiPath, &netlink.NexthopInfo{LinkIndex: idx, Gw: hop.Via.AsSlice()})
	}
	return nr, nil
}

func netipPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

// watchLinks records which of the intent's interfaces lack carrier and
// follows their changes until ctx ends: an interface losing carrier gets
// its routes removed at once (its hops become unusable) and its sessions
// shut (GoBGP withdraws what they announced, towards every other
// neighbor too); carrier back opens them again.
func (s *Speaker) watchLinks(ctx context.Context, srv *server.BgpServer) error {
	done, err := dataplane.WatchCarrier(ctx, s.netns, func(up map[string]bool) {
		s.stateMu.Lock()
		defer s.stateMu.Unlock()
		s.down = map[string]bool{}
		if in := s.live.Load(); in != nil {
			for _, n := range in.Neighbors {
				s.down[n.Dev] = !up[n.Dev]
			}
		}
	}, func(name string, carrier bool) { s.linkEvent(ctx, srv, name, carrier) })
	if err != nil {
		return fmt.Errorf("bgp: %w", err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-done
	}()
	return nil
}

func (s *Speaker) linkEvent(ctx context.Context, srv *server.BgpServer, dev string, up bool) {
	in := s.live.Load()
	if in == nil {
		return
	}
	var peers []nodestate.BGPNeighbor
	for _, n := range in.Neighbors {
		if n.Dev == dev {
			peers = append(peers, n)
		}
	}
	if len(peers) == 0 {
		return
	}
	s.stateMu.Lock()
	was, known := s.down[dev]
	s.down[dev] = !up
	bfdDown := map[string]bool{}
	for _, n := range peers {
		bfdDown[n.Addr.String()] = s.bfdDown[n.Addr.String()]
	}
	s.stateMu.Unlock()
	if known && was == !up {
		return
	}
	// Routes first (the next recomputation skips the link), then the
	// sessions.
	s.pokeNow()
	for _, n := range peers {
		a := n.Addr.String()
		var err error
		if up && bfdDown[a] {
			// BFD went down with the carrier: the session opens when
			// BFD is up again (watchBFD).
			s.note(a, "bfd down on "+dev)
		} else if up {
			err = enablePeer(ctx, srv, a)
			s.note(a, "")
		} else {
			err = srv.DisablePeer(ctx, &api.DisablePeerRequest{Address: a, Communication: "segchain: carrier lost on " + dev})
			s.note(a, "no carrier on "+dev)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("bgp: carrier change", "dev", dev, "peer", a, "up", up, "err", err)
		}
	}
	s.log.Info("bgp: carrier change", "dev", dev, "up", up, "peers", len(peers))
}

// enablePeer opens a session shut by DisablePeer. GoBGP waits a peer's
// idle hold time before it connects again, and after the first wait that
// is a fixed 5 s, unless the peer was reset: a (hard) reset first makes
// the wait the configured IdleHoldTimeAfterReset (1 s). The reset's
// NOTIFICATION goes nowhere (an idle session sends nothing, and its queue
// is emptied when the session leaves idle). Only a shut session is reset:
// one that is not (a link the speaker had not seen down) is left alone.
func enablePeer(ctx context.Context, srv *server.BgpServer, addr string) error {
	shut := false
	if err := srv.ListPeer(ctx, &api.ListPeerRequest{Address: addr}, func(p *api.Peer) {
		shut = p.GetState().GetAdminState() == api.PeerState_DOWN
	}); err != nil {
		return err
	}
	if !shut {
		return nil
	}
	if err := srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: addr, Communication: "segchain: link back"}); err != nil {
		return err
	}
	return srv.EnablePeer(ctx, &api.EnablePeerRequest{Address: addr})
}

// logger hands GoBGP's log to slog and keeps, per peer, the last problem
// it reported (a NOTIFICATION sent or received: a wrong peer ASN, a hold
// timer expiry), which Sessions shows for a session that is down.
type logger struct{ s *Speaker }

func (l *logger) fields(f gobgplog.Fields) []any {
	out := make([]any, 0, 2*len(f))
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k, fmt.Sprint(f[k]))
	}
	return out
}

func (l *logger) remember(msg string, f gobgplog.Fields) {
	peer, _ := f["Key"].(string)
	if _, err := netip.ParseAddr(peer); err != nil {
		return
	}
	switch msg {
	case "sent notification", "received notification", "Peer Down", "hold timer expired":
	default:
		return
	}
	if r, _ := f["Reason"].(string); r == "dying" || r == "admin-down" {
		return // the speaker itself stopped or shut it
	}
	var parts []string
	for _, k := range []string{"Reason", "Data", "Code", "Subcode", "Communicated-Reason", "Err"} {
		if v, ok := f[k]; ok && fmt.Sprint(v) != "" {
			parts = append(parts, fmt.Sprintf("%s=%v", strings.ToLower(k), v))
		}
	}
	l.s.note(peer, strings.TrimSpace(msg+": "+strings.Join(parts, " ")))
}

func (l *logger) Panic(msg string, f gobgplog.Fields) {
	l.s.log.Error(msg, l.fields(f)...)
	panic(msg)
}

func (l *logger) Fatal(msg string, f gobgplog.Fields) {
	// GoBGP's own logger exits here; the agent keeps serving the rest of
	// the node and reports the speaker's error instead.
	l.s.log.Error("gobgp fatal: "+msg, l.fields(f)...)
}

func (l *logger) Error(msg string, f gobgplog.Fields) {
	l.remember(msg, f)
	l.s.log.Error(msg, l.fields(f)...)
}

func (l *logger) Warn(msg string, f gobgplog.Fields) {
	l.remember(msg, f)
	l.s.log.Warn(msg, l.fields(f)...)
}

func (l *logger) Info(msg string, f gobgplog.Fields) {
	l.remember(msg, f)
	l.s.log.Info(msg, l.fields(f)...)
}

func (l *logger) Debug(string, gobgplog.Fields) {}

func (l *logger) SetLevel(gobgplog.LogLevel) {}

func (l *logger) GetLevel() gobgplog.LogLevel { return gobgplog.InfoLevel }

// resyncTick is the periodic safety net: every prefix is marked for
// recomputation only when the kernel's table differs from the record
// (kernelDrifted), so an idle speaker reads its own table, not GoBGP's RIB.
func (s *Speaker) resyncTick() {
	if s.kernelDrifted() {
		s.markAll()
	}
}

// kernelDrifted reports whether the kernel's routes of the speaker's
// protocol differ from its record: one missing, added or changed behind
// its back, a legacy-metric route, or no record (or table) to compare.
// Only run's goroutine calls it (it uses run's netlink socket).
func (s *Speaker) kernelDrifted() bool {
	if s.routes == nil {
		return true
	}
	if s.h == nil {
		h, err := s.handle()
		if err != nil {
			return true
		}
		s.h = h
	}
	cur, _, legacy, err := installed(s.h)
	if err != nil {
		s.closeHandle()
		return true
	}
	if len(legacy) > 0 || len(cur) != len(s.routes) {
		return true
	}
	for dst, r := range cur {
		if o, ok := s.routes[dst]; !ok || o.String() != r.String() {
			return true
		}
	}
	return false
}
