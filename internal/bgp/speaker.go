package bgp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
	"github.com/vishvananda/netlink"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
)

// Metric is the route priority of installed best paths: above the
// kernel's IPv6 default (1024) that segchain's static routes get. While a
// domain switches from static to bgp both are in a node's table and the
// static route keeps carrying the traffic until apply deletes it, after
// the speakers have settled. A lower metric made a node use a path learned
// mid-convergence while its neighbour still used its static route back
// through it: a micro-loop (test/bgp TestPrivilegedBGPSwitch lost packets
// to it). The other way round, the static routes apply adds win at once.
const Metric = 1100

// legacyMetric is the metric agents before Metric's change installed
// their best paths with; a speaker removes such routes of its protocol
// when it reads the kernel's table, so an agent upgraded in place does not
// leave routes that outrank every other.
const legacyMetric = 20

// StateFile is the file under the agent's state directory that keeps the
// intent the speaker runs, so that a restarted agent runs it again.
const StateFile = "bgp.json"

// resync is how often the speaker compares the kernel's table with its
// record of what it installed (a safety net against routes changed behind
// its back; BGP events recompute routes at once): only when they differ
// is every prefix recomputed. Until session 13 every resync recomputed
// every prefix, reading the whole RIB from GoBGP (ListPath marshals every
// path): each speaker's idle work grew with the fabric's prefixes, all
// speakers' with its square, and at 250 Clos nodes (192 speakers, 1,132
// prefixes each) it was most of the agents' CPU (62 % in reconcile, 43 %
// in ListPath, perf record) and kept a shared 2-core machine at load
// 300–480 until the apply from scratch had not ended after 30 min.
const resync = 10 * time.Second

// fullResync is how often, on average, every prefix is recomputed from
// the RIB without any event (a safety net against a lost table event),
// jittered so that a fabric's speakers do not do it together.
const fullResync = 5 * time.Minute

func fullResyncIn() time.Duration {
	return fullResync/2 + time.Duration(rand.Int64N(int64(fullResync)))
}

// coalesce is how long a recomputation waits for more BGP events after
// the first. Recomputations after new paths are also rate-limited to
// burst at once, then one per second: a converging domain sends UPDATEs
// for seconds, and at 100 nodes on two cores one recomputation per 20 ms
// burst made the speakers' route installation half of all the agents' CPU
// and doubled the apply it competed with (100-node apply and convergence:
// 17-24 s before, 10-12 s with the limit). Recomputations read only the
// prefixes named since the last one now, and the limit still pays: one
// per 100 ms made the same convergence 12.3-12.8 s. A small domain's few
// bursts, like the first UPDATEs after a session comes up, still go at
// once. A carrier change, a session going up or down and a withdrawal
// are never delayed.
const (
	coalesce = 20 * time.Millisecond
	burst    = 5
	perGap   = time.Second
)

var ipv6Unicast = &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}

// Speaker runs one node's BGP intent. Its methods are safe for concurrent
// use. It implements local.Router.
type Speaker struct {
	netns    string
	stateDir string
	log      *slog.Logger
	// shared: the process serves other nodes too (NewShared).
	shared bool

	// mu serialises Set, Sessions and Intent; the speaker's goroutines
	// (route installation, the link watcher) never take it: they read the
	// intent from live, and stopping waits for them (wg) before it stops
	// the GoBGP server, whose API blocks once the server is gone.
	mu      sync.Mutex
	intent  *nodestate.BGP
	srv     *server.BgpServer
	stopRun context.CancelFunc
	runCtx  context.Context // ends with stopRun
	wg      sync.WaitGroup
	live    atomic.Pointer[nodestate.BGP]

	// down are the intent's interfaces without carrier (their sessions
	// are shut), notes the last problem seen per peer address, bfd the
	// neighbors' BFD sessions and bfdDown those that went down after
	// being up (their sessions are shut), by peer address.
	stateMu sync.Mutex
	down    map[string]bool
	notes   map[string]string
	bfd     map[string]*bfdPeer
	bfdDown map[string]bool
	bfdEv   chan bfdEvent

	// kick asks for a recomputation after a BGP event (coalesced over
	// coalesce: a converging RIB sends bursts), urgent at once (carrier).
	kick, urgent chan struct{}
	// dirty is what the next recomputation covers: every prefix
	// (dirtyAll: a carrier or BFD change, the intent, the
	// resync) or only the prefixes BGP table events named since the last.
	dirtyMu  sync.Mutex
	dirtyAll bool
	dirty    map[netip.Prefix]bool
	// dirtyVia are neighbours whose session left established since the
	// last recomputation: the prefixes routed over them are recomputed
	// (run finds them in routes).
	dirtyVia map[netip.Addr]bool
	// routes is what the speaker has installed: the kernel's table as of
	// the last recomputation of every prefix, with the changes made since;
	// nil when unknown (a failed change), which makes the next
	// recomputation read the kernel's table. Only run's goroutine uses it.
	routes map[netip.Prefix]Route
	h      *netlink.Handle // run's netlink socket in the node's namespace
}

// New returns a stopped speaker for the node in namespace netns ("" = the
// current one) keeping its intent under stateDir.
func New(netns, stateDir string, log *slog.Logger) *Speaker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Speaker{netns: netns, stateDir: stateDir, log: log.With("component", "bgp"),
		down: map[string]bool{}, notes: map[string]string{}, kick: make(chan struct{}, 1), urgent: make(chan struct{}, 1),
		dirty: map[netip.Prefix]bool{}, dirtyVia: map[netip.Addr]bool{},
		bfd: map[string]*bfdPeer{}, bfdDown: map[string]bool{}, bfdEv: make(chan bfdEvent, 64)}
}

// NewShared returns a stopped speaker for the node in namespace netns
// whose process is shared with other nodes and lives in another namespace
// (segchain agent group: the lighter mode, docs/scale.md). A socket keeps
// the namespace of the thread that made it, so:
//   - GoBGP's loop (Serve), which opens the listener when the speaker
//     starts, runs on a thread pinned in netns for good (nsutil.Pin): the
//     listener and every connection it accepts are the node's;
//   - GoBGP dials from goroutines of its own, on any thread, so this
//     speaker never dials: every session is passive, and its intent is
//     refused unless every neighbour runs FRR, which dials (Check); a
//     link to another GoBGP speaker needs a speaker in a process of its
//     own (segchain agent);
//   - routes, the carrier watch and BFD already use sockets opened in
//     netns (a netlink handle at the namespace, nsutil.Do).
//
// A stopped or restarted speaker leaves its old loop's thread behind,
// still in netns, until the process ends (GoBGP's Serve never returns),
// as an unshared speaker leaves its goroutine.
func NewShared(netns, stateDir string, log *slog.Logger) *Speaker {
	s := New(netns, stateDir, log)
	s.shared = true
	return s
}

// Check says why this speaker cannot run intent in (nil: it can). A
// speaker sharing its process (NewShared) needs every neighbour to dial.
func (s *Speaker) Check(in *nodestate.BGP) error {
	if !s.shared || in == nil {
		return nil
	}
	if s.netns == "" {
		return errors.New("routing: bgp: a speaker sharing its process needs the node's namespace")
	}
	var peers []string
	for _, n := range in.Neighbors {
		if !n.PeerFRR {
			peers = append(peers, fmt.Sprintf("%s (%s)", n.Node, n.Addr))
		}
	}
	if len(peers) > 0 {
		return fmt.Errorf("routing: bgp: this node's BGP speaker shares its process with other nodes (segchain agent group), so it never dials: GoBGP dials from threads outside the node's namespace; only FRR routers are known to dial it, and neighbour(s) %s run GoBGP: give this node an agent process of its own (segchain agent, lab up --agents)", strings.Join(peers, ", "))
	}
	return nil
}

// Restore runs the intent persisted by the last Set, if any (agent start).
// The routes a previous run installed stay in the kernel meanwhile and are
// adopted: the first recomputation keeps, changes or removes them.
func (s *Speaker) Restore() error {
	b, err := os.ReadFile(filepath.Join(s.stateDir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var in nodestate.BGP
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(s.stateDir, StateFile), err)
	}
	if err := s.Check(&in); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.startLocked(&in); err != nil {
		return err
	}
	s.log.Info("bgp speaker restored", "asn", in.ASN, "neighbors", len(in.Neighbors))
	return nil
}

// Intent implements local.Router.
func (s *Speaker) Intent() *nodestate.BGP {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.intent == nil || s.srv == nil {
		return nil // not running (a failed start): the next apply sets it again
	}
	c := *s.intent
	c.Neighbors = append([]nodestate.BGPNeighbor(nil), s.intent.Neighbors...)
	c.Prefixes = append([]netip.Prefix(nil), s.intent.Prefixes...)
	return &c
}

// Set implements local.Router: nil stops the speaker and removes every
// route it installed; an intent with another ASN, router id or timers
// restarts it; otherwise only the neighbors and prefixes that changed
// change (the other sessions stay up).
func (s *Speaker) Set(in *nodestate.BGP) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in == nil {
		s.stopLocked()
		s.intent = nil
		err := s.flush()
		if rerr := os.Remove(filepath.Join(s.stateDir, StateFile)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
		s.log.Info("bgp speaker stopped, routes removed")
		return err
	}
	if err := s.Check(in); err != nil {
		return err // refused before anything stops
	}
	c := *in
	c.Sort()
	in = &c
	var err error
	switch {
	case s.srv != nil && s.intent.String() == in.String():
		// Unchanged.
	case s.srv != nil && s.intent.Head() == in.Head():
		if err = s.updateLocked(in); err != nil {
			// Half changed: start over from the intent.
			s.log.Warn("bgp: reconfigure in place failed, restarting", "err", err)
			s.stopLocked()
			err = s.startLocked(in)
		}
	default:
		s.stopLocked()
		err = s.startLocked(in)
	}
	if err != nil {
		return err
	}
	return s.persist(in)
}

func (s *Speaker) persist(in *nodestate.BGP) error {
	if s.stateDir == "" {
		return nil
	}
	if err := os.MkdirAll(s.stateDir, 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.stateDir, StateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.stateDir, StateFile))
}

// Close stops the speaker and leaves its routes in the kernel (agent
// shutdown: a restarted agent adopts them).
func (s *Speaker) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Speaker) startLocked(in *nodestate.BGP) error {
	s.stateMu.Lock()
	s.notes = map[string]string{} // a new speaker, new sessions
	s.bfdDown = map[string]bool{}
	s.stateMu.Unlock()
	srv := server.NewBgpServer(server.LoggerOption(&logger{s: s}))
	if s.shared {
		// The listener StartBgp opens below is opened on Serve's
		// goroutine (a management operation): in the node's namespace.
		if err := nsutil.Pin(s.netns, srv.Serve); err != nil {
			return fmt.Errorf("bgp: run the speaker in the node's namespace: %w", err)
		}
	} else {
		go srv.Serve()
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.srv, s.intent, s.stopRun, s.runCtx = srv, in, cancel, runCtx
	s.live.Store(in)
	// The carrier of the intent's links is known before the first session
	// is configured (a link without carrier starts shut).
	if err := s.watchLinks(runCtx, srv); err != nil {
		s.stopLocked()
		return err
	}
	s.wg.Add(1)
	go s.watchBFD(runCtx, srv)
	ctx := context.Background()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: in.ASN, RouterId: in.RouterID, ListenPort: 179, ListenAddresses: []string{"::"},
	}}); err != nil {
		s.stopLocked()
		return fmt.Errorf("start BGP AS%d: %w", in.ASN, err)
	}
	// The neighbors right after the listener: a neighbor that connects
	// before its configuration exists is refused, and GoBGP then holds
	// that session idle for 5 s before it dials again.
	for _, n := range in.Neighbors {
		if err := s.addPeer(ctx, in, n); err != nil {
			s.stopLocked()
			return err
		}
		s.startBFD(runCtx, in, n)
	}
	if err := srv.WatchEvent(runCtx, &api.WatchEventRequest{
		Peer: &api.WatchEventRequest_Peer{},
		Table: &api.WatchEventRequest_Table{Filters: []*api.WatchEventRequest_Table_Filter{
			{Type: api.WatchEventRequest_Table_Filter_ADJIN},
			{Type: api.WatchEventRequest_Table_Filter_BEST},
		}},
	}, func(r *api.WatchEventResponse) {
		if p := r.GetPeer(); p != nil {
			st := p.GetPeer().GetState()
			s.peerEvent(st.GetNeighborAddress(), st.GetSessionState() == api.PeerState_ESTABLISHED)
			return
		}
		s.pokePaths(r.GetTable().GetPaths())
	}); err != nil {
		s.stopLocked()
		return fmt.Errorf("watch BGP events: %w", err)
	}
	for _, p := range in.Prefixes {
		if err := s.addPath(ctx, p, false); err != nil {
			s.stopLocked()
			return err
		}
	}
	s.wg.Add(1)
	go s.run(runCtx, srv)
	s.poke()
	s.log.Info("bgp speaker started", "asn", in.ASN, "router_id", in.RouterID, "neighbors", len(in.Neighbors), "prefixes", len(in.Prefixes))
	return nil
}

func (s *Speaker) stopLocked() {
	if s.srv == nil {
		return
	}
	s.stopRun()
	s.stopAllBFD()
	s.wg.Wait()
	s.srv.Stop()
	s.srv, s.stopRun, s.runCtx = nil, nil, nil
	s.live.Store(nil)
}

func (s *Speaker) updateLocked(in *nodestate.BGP) error {
	ctx := context.Background()
	old := s.intent
	was := map[string]nodestate.BGPNeighbor{}
	for _, n := range old.Neighbors {
		was[n.Addr.String()] = n
	}
	is := map[string]bool{}
	for _, n := range in.Neighbors {
		is[n.Addr.String()] = true
		if o, ok := was[n.Addr.String()]; ok && o.String() == n.String() {
			continue
		} else if ok {
			s.stopBFD(n.Addr.String())
			if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: n.Addr.String()}); err != nil {
				return fmt.Errorf("bgp: reconfigure neighbor %s: %w", n.Addr, err)
			}
		}
		if err := s.addPeer(ctx, in, n); err != nil {
			return err
		}
		s.startBFD(s.runCtx, in, n)
	}
	for a := range was {
		if !is[a] {
			s.stopBFD(a)
			if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: a}); err != nil {
				return fmt.Errorf("bgp: remove neighbor %s: %w", a, err)
			}
		}
	}
	had := map[netip.Prefix]bool{}
	for _, p := range old.Prefixes {
		had[p] = true
	}
	want := map[netip.Prefix]bool{}
	for _, p := range in.Prefixes {
		want[p] = true
		if !had[p] {
			if err := s.addPath(ctx, p, false); err != nil {
				return err
			}
		}
	}
	for p := range had {
		if !want[p] {
			if err := s.addPath(ctx, p, true); err != nil {
				return err
			}
		}
	}
	s.intent = in
	s.live.Store(in)
	s.poke()
	return nil
}

func (s *Speaker) addPeer(ctx context.Context, in *nodestate.BGP, n nodestate.BGPNeighbor) error {
	s.stateMu.Lock()
	down := s.down[n.Dev]
	bfdDown := s.bfdDown[n.Addr.String()]
	s.stateMu.Unlock()
	p := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: n.Addr.String(), PeerAsn: n.ASN, Description: n.Node, AdminDown: down || bfdDown},
		// One end of a link dials, the other waits (the end with the
		// higher address). When both dial, GoBGP resolves the collision
		// by closing one connection, idles that session 5 s, and two
		// speakers can keep refusing each other's connections that way
		// for minutes (seen at 100 nodes: 107 s).
		Transport: &api.Transport{
			LocalAddress: n.Local.String(),
			// A shared speaker cannot dial from the node's namespace
			// (NewShared): it waits, and its FRR neighbours dial.
			PassiveMode: s.shared || n.Local.Compare(n.Addr) > 0,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime: uint64(in.Hold), KeepaliveInterval: uint64(in.Keepalive),
			ConnectRetry: 1, IdleHoldTimeAfterReset: 1,
		}},
		AfiSafis: []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: ipv6Unicast, Enabled: true}}},
	}
	if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: p}); err != nil {
		return fmt.Errorf("bgp: neighbor %s (%s, AS%d): %w", n.Addr, n.Node, n.ASN, err)
	}
	if down {
		s.note(n.Addr.String(), "no carrier on "+n.Dev)
	} else if bfdDown {
		s.note(n.Addr.String(), "bfd down on "+n.Dev)
	}
	return nil
}

// addPath originates (or, withdraw, stops originating) prefix p. The next
// hop "::" is replaced by the session's local address towards each eBGP
// neighbor.
func (s *Speaker) addPath(ctx context.Context, p netip.Prefix, withdraw bool) error {
	nlri, err := anypb.New(&api.IPAddressPrefix{Prefix: p.Addr().String(), PrefixLen: uint32(p.Bits())})
	if err != nil {
		return err
	}
	origin, err := anypb.New(&api.OriginAttribute{Origin: 0})
	if err != nil {
		return err
	}
	mp, err := anypb.New(&api.MpReachNLRIAttribute{Family: ipv6Unicast, NextHops: []string{"::"}, Nlris: []*anypb.Any{nlri}})
	if err != nil {
		return err
	}
	path := &api.Path{Family: ipv6Unicast, Nlri: nlri, Pattrs: []*anypb.Any{origin, mp}}
	if withdraw {
		if err := s.srv.DeletePath(ctx, &api.DeletePathRequest{TableType: api.TableType_GLOBAL, Family: ipv6Unicast, Path: path}); err != nil {
			return fmt.Errorf("bgp: withdraw %s: %w", p, err)
		}
		return nil
	}
	if _, err := s.srv.AddPath(ctx, &api.AddPathRequest{TableType: api.TableType_GLOBAL, Path: path}); err != nil {
		return fmt.Errorf("bgp: announce %s: %w", p, err)
	}
	return nil
}

// peerEvent is a session's change of state. Established: its paths
// arrive as table events (pokePaths), nothing else changes. Otherwise (a
// session going down: hold timer, NOTIFICATION; or not yet up) it takes
// its paths with it: the prefixes installed over that neighbour are
// recomputed at once, and only those (every prefix was, until session
// 18: at 250 nodes under load, every flap recomputed a speaker's whole
// table). A neighbour address that cannot be read makes it every prefix.
func (s *Speaker) peerEvent(addr string, established bool) {
	if established {
		s.note(addr, "")
		return
	}
	a, err := netip.ParseAddr(addr)
	s.dirtyMu.Lock()
	if err != nil {
		s.dirtyAll = true
	} else {
		s.dirtyVia[a] = true
	}
	s.dirtyMu.Unlock()
	s.wake(s.urgent)
}

// poke asks for a recomputation of every prefix, coalesced.
func (s *Speaker) poke() {
	s.markAll()
	s.wake(s.kick)
}

// pokeNow asks for a recomputation of every prefix without coalescing.
func (s *Speaker) pokeNow() {
	s.markAll()
	s.wake(s.urgent)
}

// pokePaths asks for a recomputation of the prefixes of paths a table
// event carried: at once if one of them is a withdrawal (it may leave a
// route pointing nowhere), coalesced otherwise (a converging domain sends
// bursts of new paths). A path whose prefix cannot be read makes it every
// prefix.
func (s *Speaker) pokePaths(paths []*api.Path) {
	now := false
	s.dirtyMu.Lock()
	for _, p := range paths {
		now = now || p.GetIsWithdraw()
		var nlri api.IPAddressPrefix
		if p.GetNlri() == nil || p.GetNlri().UnmarshalTo(&nlri) != nil {
			s.dirtyAll = true
			continue
		}
		a, err := netip.ParseAddr(nlri.Prefix)
		if err != nil || nlri.PrefixLen > 128 {
			s.dirtyAll = true
			continue
		}
		if a.Is6() { // the speaker runs IPv6 unicast only
			s.dirty[netip.PrefixFrom(a, int(nlri.PrefixLen)).Masked()] = true
		}
	}
	s.dirtyMu.Unlock()
	if now {
		s.wake(s.urgent)
	} else {
		s.wake(s.kick)
	}
}

func (s *Speaker) markAll() {
	s.dirtyMu.Lock()
	s.dirtyAll = true
	s.dirtyMu.Unlock()
}

// wake sends on a channel of capacity 1 without blocking: a wake-up
// already pending covers this one (the marks are made before it).
func (s *Speaker) wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// takeDirty returns what the next recomputation covers and clears it:
// every prefix, or the prefixes named since the last one (none: nothing
// to do).
func (s *Speaker) takeDirty() (all bool, dsts map[netip.Prefix]bool) {
	s.dirtyMu.Lock()
	all, dsts, via := s.dirtyAll, s.dirty, s.dirtyVia
	s.dirtyAll, s.dirty, s.dirtyVia = false, map[netip.Prefix]bool{}, map[netip.Addr]bool{}
	s.dirtyMu.Unlock()
	if all || len(via) == 0 {
		return all, dsts
	}
	// The prefixes installed over a neighbour whose session went down
	// (routes is run's, as takeDirty is); no record: every prefix.
	if s.routes == nil {
		return true, dsts
	}
	for dst, r := range s.routes {
		for _, h := range r.Hops {
			if via[h.Via] {
				dsts[dst] = true
				break
			}
		}
	}
	return false, dsts
}

func (s *Speaker) note(peer, msg string) {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	if msg == "" {
		delete(s.notes, peer)
		return
	}
	s.notes[peer] = msg
}

// run recomputes the installed routes on every event (and every resync)
// until ctx ends.
func (s *Speaker) run(ctx context.Context, srv *server.BgpServer) {
	defer s.wg.Done()
	defer s.closeHandle()
	t := time.NewTicker(resync)
	defer t.Stop()
	full := time.NewTimer(fullResyncIn())
	defer full.Stop()
	limit := rate.NewLimiter(rate.Every(perGap), burst)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
			wait := max(limit.Reserve().Delay(), coalesce)
			w := time.NewTimer(wait)
			select {
			case <-w.C:
			case <-s.urgent:
				w.Stop()
			case <-ctx.Done():
				w.Stop()
				return
			}
			select { // the events of the burst are covered
			case <-s.kick:
			default:
			}
		case <-s.urgent:
		case <-t.C:
			s.resyncTick()
		case <-full.C:
			s.markAll()
			full.Reset(fullResyncIn())
		}
		all, dsts := s.takeDirty()
		if !all && len(dsts) == 0 {
			continue
		}
		if err := s.reconcile(ctx, srv, all, dsts); err != nil && ctx.Err() == nil {
			s.log.Warn("bgp: install best paths", "err", err)
		}
	}
}

// reconcile installs what Select makes of the RIB now: of every prefix
// (all), or only of dsts, the prefixes BGP events named since the last
// recomputation. Only these are read from GoBGP, and compared with what
// the speaker installed (its own record, not a kernel dump: the periodic
// resync recomputes everything against the kernel's table).
func (s *Speaker) reconcile(ctx context.Context, srv *server.BgpServer, all bool, dsts map[netip.Prefix]bool) error {
	in := s.live.Load()
	if in == nil {
		return nil
	}
	est := map[netip.Addr]bool{}
	if err := srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		if a, err := netip.ParseAddr(p.GetState().GetNeighborAddress()); err == nil {
			est[a] = p.GetState().GetSessionState() == api.PeerState_ESTABLISHED
		}
	}); err != nil {
		return err
	}
	if s.routes == nil {
		all = true // nothing recorded yet: read the kernel's table
	}
	req := &api.ListPathRequest{TableType: api.TableType_GLOBAL, Family: ipv6Unicast}
	if !all {
		for dst := range dsts {
			req.Prefixes = append(req.Prefixes, &api.TableLookupPrefix{Prefix: dst.String(), Type: api.TableLookupPrefix_EXACT})
		}
	}
	learned := map[netip.Prefix][]Candidate{}
	var perr error
	if err := srv.ListPath(ctx, req, func(d *api.Destination) {
		dst, err := parsePrefix(d.Prefix)
		if err != nil {
			perr = err
			return
		}
		for _, p := range d.Paths {
			if p.IsWithdraw || p.Filtered {
				continue
			}
			nb, err := netip.ParseAddr(p.NeighborIp)
			if err != nil || nb.IsUnspecified() {
				continue // originated here
			}
			learned[dst] = append(learned[dst], candidate(nb, p.Pattrs))
		}
	}); err != nil {
		return err
	}
	if perr != nil {
		return perr
	}
	s.stateMu.Lock()
	down := map[string]bool{}
	for k, v := range s.down {
		down[k] = v
	}
	bfdDown := map[string]bool{}
	for k, v := range s.bfdDown {
		bfdDown[k] = v
	}
	s.stateMu.Unlock()
	usable := func(a netip.Addr) bool {
		n, _ := in.Neighbor(a)
		return est[a] && !down[n.Dev] && !bfdDown[a.String()]
	}
	if all {
		dsts = nil
	}
	return s.install(in, learned, usable, dsts)
}

func candidate(nb netip.Addr, attrs []*anypb.Any) Candidate {
	c := Candidate{Neighbor: nb}
	for _, a := range attrs {
		switch {
		case a.MessageIs(&api.AsPathAttribute{}):
			var ap api.AsPathAttribute
			if a.UnmarshalTo(&ap) == nil {
				for _, seg := range ap.Segments {
					if seg.Type == api.AsSegment_AS_SET || seg.Type == api.AsSegment_AS_CONFED_SET { // a set counts as one
						c.ASPath++
					} else {
						c.ASPath += len(seg.Numbers)
					}
				}
			}
		case a.MessageIs(&api.OriginAttribute{}):
			var o api.OriginAttribute
			if a.UnmarshalTo(&o) == nil {
				c.Origin = int(o.Origin)
			}
		}
	}
	return c
}

// Sessions implements local.Router.
func (s *Speaker) Sessions() []nodestate.BGPSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, in := s.srv, s.intent
	if srv == nil {
		return nil
	}
	var out []nodestate.BGPSession
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.stateMu.Lock()
	notes := map[string]string{}
	for k, v := range s.notes {
		notes[k] = v
	}
	down := map[string]bool{}
	for k, v := range s.down {
		down[k] = v
	}
	bfdState := map[string]string{}
	for k, bp := range s.bfd {
		if bp.u != nil {
			bfdState[k] = bp.u.Stats().State.String()
		}
	}
	bfdDown := map[string]bool{}
	for k, v := range s.bfdDown {
		bfdDown[k] = v
	}
	s.stateMu.Unlock()
	now := time.Now()
	srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		st := p.GetState()
		a, err := netip.ParseAddr(st.GetNeighborAddress())
		if err != nil {
			return
		}
		n, _ := in.Neighbor(a)
		ss := nodestate.BGPSession{Node: n.Node, Peer: a, ASN: st.GetPeerAsn(), Dev: n.Dev,
			State: strings.ToLower(st.GetSessionState().String()), BFD: bfdState[a.String()]}
		if st.GetAdminState() != api.PeerState_UP {
			ss.Admin = strings.ToLower(st.GetAdminState().String())
		}
		for _, af := range p.GetAfiSafis() {
			if f := af.GetState().GetFamily(); f.GetAfi() == api.Family_AFI_IP6 && f.GetSafi() == api.Family_SAFI_UNICAST {
				ss.Received, ss.Accepted = af.GetState().GetReceived(), af.GetState().GetAccepted()
			}
		}
		ts := p.GetTimers().GetState()
		if ss.Established() && ts.GetUptime() != nil {
			ss.Since = int64(now.Sub(ts.GetUptime().AsTime()).Seconds())
		} else if ts.GetDowntime() != nil && ts.GetDowntime().AsTime().Unix() > 0 {
			ss.Since = int64(now.Sub(ts.GetDowntime().AsTime()).Seconds())
		}
		if !ss.Established() {
			ss.Note = notes[a.String()]
			// Why it was shut, rather than GoBGP's account of it.
			if down[n.Dev] {
				ss.Note = "no carrier on " + n.Dev
			} else if bfdDown[a.String()] {
				ss.Note = "bfd down on " + n.Dev
			}
			// A NOTIFICATION refusing our OPEN is not logged by GoBGP
			// before the session is up; its counter is kept.
			if nr := st.GetMessages().GetReceived().GetNotification(); ss.Note == "" && nr > 0 && ss.Admin == "" {
				ss.Note = fmt.Sprintf("received notification: %s refused the session %d time(s); does it expect AS%d from %s?", n.Node, nr, in.ASN, n.Local)
			}
		}
		out = append(out, ss)
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Peer.Less(out[j].Peer) })
	return out
}
