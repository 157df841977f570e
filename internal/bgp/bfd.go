package bgp

import (
	"context"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"

	"github.com/segchain/segchain/internal/bfd"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
)

// BFD on the speaker's sessions (neighbors with BFD): one internal/bfd
// session per neighbor over its link. BFD going down after it was up is
// treated like carrier loss: the routes over the neighbor are recomputed
// without it at once and its BGP session is shut (GoBGP withdraws what it
// learned there from the other neighbors); BFD up again opens it again.
// A peer that never brings BFD up (it runs none) changes nothing.

// bfdEvent is a state change of the BFD session of neighbor addr.
type bfdEvent struct {
	addr string
	dev  string
	peer *bfdPeer
	ev   bfd.Event
	// recheck: the end of the settle time of a session that went down
	// soon after it came up (ev is empty).
	recheck bool
}

// BFDSession is the BFD state of one neighbor (metrics).
type BFDSession struct {
	Node, Dev string
	Peer      string
	bfd.Stats
}

func bfdConfig(in *nodestate.BGP) bfd.Config {
	iv := time.Duration(in.BFDInterval) * time.Millisecond
	mult := in.BFDMultiplier
	if iv <= 0 { // an intent from before the BFD timers existed
		iv = 300 * time.Millisecond
	}
	if mult <= 0 || mult > 255 {
		mult = 3
	}
	return bfd.Config{DesiredMinTx: iv, RequiredMinRx: iv, DetectMult: uint8(mult)}
}

// bfdPeer is one neighbor's BFD session (u is nil while it opens) and
// when it last came up; guarded by the speaker's stateMu.
type bfdPeer struct {
	u    *bfd.UDP
	upAt time.Time
}

// startBFD opens neighbor n's BFD session (in the node's namespace).
// A failure is logged and noted: BGP runs on without BFD.
func (s *Speaker) startBFD(ctx context.Context, in *nodestate.BGP, n nodestate.BGPNeighbor) {
	if !n.BFD {
		return
	}
	a := n.Addr.String()
	// Registered before it opens: its events name it, and one of a
	// session since closed is ignored.
	bp := &bfdPeer{}
	s.stateMu.Lock()
	s.bfd[a] = bp
	s.stateMu.Unlock()
	var u *bfd.UDP
	err := nsutil.Do(s.netns, func() (err error) {
		u, err = bfd.ListenUDP(bfd.Link{Dev: n.Dev, Local: n.Local, Peer: n.Addr}, bfdConfig(in), func(e bfd.Event) {
			select {
			case s.bfdEv <- bfdEvent{addr: a, dev: n.Dev, peer: bp, ev: e}:
			case <-ctx.Done():
			}
		})
		return err
	})
	s.stateMu.Lock()
	if err != nil {
		delete(s.bfd, a)
	} else {
		bp.u = u
	}
	s.stateMu.Unlock()
	if err != nil {
		s.log.Warn("bgp: bfd not started", "peer", a, "dev", n.Dev, "err", err)
		s.note(a, "bfd: "+err.Error())
		return
	}
	s.log.Info("bgp: bfd started", "peer", a, "dev", n.Dev, "local_disc", u.LocalDisc(), "source_port", u.SourcePort())
}

// stopBFD closes neighbor addr's BFD session, if any, and forgets that
// it was down.
func (s *Speaker) stopBFD(addr string) {
	s.stateMu.Lock()
	bp := s.bfd[addr]
	delete(s.bfd, addr)
	delete(s.bfdDown, addr)
	s.stateMu.Unlock()
	if bp != nil && bp.u != nil {
		bp.u.Close()
	}
}

func (s *Speaker) stopAllBFD() {
	s.stateMu.Lock()
	var addrs []string
	for a := range s.bfd {
		addrs = append(addrs, a)
	}
	s.stateMu.Unlock()
	for _, a := range addrs {
		s.stopBFD(a)
	}
}

// watchBFD handles the BFD sessions' state changes until ctx ends.
func (s *Speaker) watchBFD(ctx context.Context, srv *server.BgpServer) {
	defer s.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-s.bfdEv:
			s.bfdChange(ctx, srv, e)
		}
	}
}

// bfdSettle: a BFD session that the peer takes down within bfdSettle of
// coming up, without saying its detection time expired, is acted on only
// if it is not up again by then. FRR replaces its BFD
// session once bgpd knows the BGP session's interface (when it is first
// established): the old session's last packet says Down and a new one
// comes up a slow (1 s) interval later. Without the settle time, that
// would shut the BGP session that has just come up.
const bfdSettle = 2500 * time.Millisecond

// bfdVerdict decides whether a neighbor's BFD counts as down after event
// e, given whether it did (was), when the session last came up and its
// state now; recheck > 0 asks for e.recheck after that long (a settle
// time running).
func bfdVerdict(was bool, e bfdEvent, upAt time.Time, now bfd.State) (down bool, recheck time.Duration) {
	switch {
	case e.recheck:
		// The end of a settle time: down if it is still not up.
		return was || now != bfd.Up, 0
	case e.ev.To == bfd.Up:
		return false, 0
	case e.ev.From != bfd.Up || was:
		return was, 0
	case e.ev.PeerAdminDown:
		// The peer's AdminDown is not a failure of the path (RFC 5882
		// §3.2).
		return false, 0
	case e.ev.Diag == bfd.DiagNeighborDown && e.ev.PeerDiag != bfd.DiagTimeExpired && e.ev.At.Sub(upAt) < bfdSettle:
		// Only a Down the peer says without having lost our packets
		// waits (FRR's replaced session says "neighbor signaled session
		// down"); a silent path, on either side (detection time
		// expired), is acted on at once.
		return false, bfdSettle - e.ev.At.Sub(upAt)
	}
	return true, 0
}

func (s *Speaker) bfdChange(ctx context.Context, srv *server.BgpServer, e bfdEvent) {
	s.stateMu.Lock()
	if s.bfd[e.addr] != e.peer {
		s.stateMu.Unlock()
		return // a session since closed
	}
	was := s.bfdDown[e.addr]
	carrierDown := s.down[e.dev]
	bp := e.peer
	now := bfd.Down
	if bp.u != nil {
		now = bp.u.Stats().State
	}
	down, recheck := bfdVerdict(was, e, bp.upAt, now)
	if e.ev.To == bfd.Up && !e.recheck {
		bp.upAt = e.ev.At
	}
	if recheck > 0 {
		time.AfterFunc(recheck, func() {
			select {
			case s.bfdEv <- bfdEvent{addr: e.addr, dev: e.dev, peer: bp, recheck: true}:
			case <-ctx.Done():
			}
		})
	}
	change := down != was
	s.bfdDown[e.addr] = down
	s.stateMu.Unlock()
	if !e.recheck {
		s.log.Info("bgp: bfd", "peer", e.addr, "dev", e.dev, "from", e.ev.From.String(), "to", e.ev.To.String(),
			"diag", e.ev.Diag.String(), "peer_admin_down", e.ev.PeerAdminDown)
	}
	if !change {
		return
	}
	// Routes first (the recomputation skips the neighbor), then the
	// session; with the carrier down, the link watch has shut it already
	// and opens it when both are back.
	s.pokeNow()
	if carrierDown {
		return
	}
	var err error
	if !down {
		err = enablePeer(ctx, srv, e.addr)
		s.note(e.addr, "")
	} else {
		err = srv.DisablePeer(ctx, &api.DisablePeerRequest{Address: e.addr, Communication: "segchain: bfd down on " + e.dev})
		s.note(e.addr, "bfd down on "+e.dev)
	}
	s.log.Info("bgp: bfd session change", "peer", e.addr, "dev", e.dev, "bgp_shut", down)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("bgp: bfd change", "peer", e.addr, "shut", down, "err", err)
	}
}

// BFD returns the state of every neighbor's BFD session.
func (s *Speaker) BFD() []BFDSession {
	in := s.live.Load()
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	var out []BFDSession
	for a, bp := range s.bfd {
		if bp.u == nil {
			continue
		}
		bs := BFDSession{Peer: a, Stats: bp.u.Stats()}
		if in != nil {
			for _, n := range in.Neighbors {
				if n.Addr.String() == a {
					bs.Node, bs.Dev = n.Node, n.Dev
				}
			}
		}
		out = append(out, bs)
	}
	return out
}
