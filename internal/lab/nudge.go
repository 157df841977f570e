package lab

import (
	"maps"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/nodestate"
)

// Nudger asks a lab's FRR routers to dial the GoBGP speakers an apply has
// just started. The routers dial a speaker's address every
// frr.SpeakerConnectRetry seconds while nothing listens there (an agent's
// speaker listens only once an apply has started it; a speaker sharing
// its process with other nodes never dials itself); told that a node's
// speaker started (Started, the controller's BGPStarted), the Nudger has
// each of its router neighbours retry that session at once
// (frr.RetryNow). Requests are gathered for a short while and sent over
// one connection to each router's bgpd, a few routers at a time. Each is checked again
// nudgeFollowUp later, twice: a first attempt the speaker refused or
// reset (FRR then waits its connect timer again) is retried; an
// established session is left alone. A request that fails is dropped:
// the connect timer still opens the session, later.
type Nudger struct {
	// dirs are the lab's routers' FRR directories when the Nudger was
	// made (a copy: the lab's record changes when an apply that ends
	// retires a router, while follow-ups may still run).
	dirs        map[string]string
	mu          sync.Mutex
	pending     map[string]map[netip.Addr]int // router → speaker addresses to dial → follow-ups made
	outstanding int                           // follow-ups not yet due
	asked       int
	errs        int
	kick        chan struct{}
	stop        chan struct{}
	done        chan struct{}
}

// nudgeGather is how long requests are gathered before they are sent:
// an apply starts many speakers at once.
const nudgeGather = 100 * time.Millisecond

// nudgeParallel is how many routers are asked at once.
const nudgeParallel = 4

// nudgeFollowUp is when a request is checked again, nudgeFollowUps times.
const (
	nudgeFollowUp  = 2 * time.Second
	nudgeFollowUps = 2
)

// NewNudger starts a Nudger for the lab's routers; Close stops it.
func (l *Lab) NewNudger() *Nudger {
	n := &Nudger{dirs: maps.Clone(l.FRR), pending: map[string]map[netip.Addr]int{}, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go n.run()
	return n
}

// Started is told that node's speaker now runs intent b: each neighbour
// that is a router of the lab running FRR is asked to dial the node's
// address on their link. It does not block.
func (n *Nudger) Started(node string, b *nodestate.BGP) {
	if n == nil || b == nil {
		return
	}
	n.mu.Lock()
	added := false
	for _, nb := range b.Neighbors {
		if !nb.PeerFRR {
			continue
		}
		if _, ok := n.dirs[nb.Node]; !ok {
			continue
		}
		n.addLocked(nb.Node, nb.Local, 0)
		added = true
	}
	n.mu.Unlock()
	if added {
		n.wake()
	}
}

func (n *Nudger) addLocked(router string, a netip.Addr, follow int) {
	if n.pending[router] == nil {
		n.pending[router] = map[netip.Addr]int{}
	}
	if f, ok := n.pending[router][a]; !ok || follow < f {
		n.pending[router][a] = follow
	}
}

func (n *Nudger) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Asked is how many sessions the routers were asked to retry, and how
// many requests failed.
func (n *Nudger) Asked() (asked, failed int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.asked, n.errs
}

// Close sends what is pending, then waits for the follow-ups still due
// (an apply ends about when its last speakers start, before the routers
// have dialled them): at most nudgeFollowUps × nudgeFollowUp, and only
// for sessions that were not open when last asked.
func (n *Nudger) Close() {
	if n == nil {
		return
	}
	close(n.stop)
	<-n.done
}

func (n *Nudger) run() {
	defer close(n.done)
	stop := n.stop
	for {
		if stop == nil {
			n.mu.Lock()
			idle := len(n.pending) == 0 && n.outstanding == 0
			n.mu.Unlock()
			if idle {
				return
			}
		}
		select {
		case <-n.kick:
			if stop != nil {
				select {
				case <-time.After(nudgeGather):
				case <-stop:
					stop = nil
				}
			}
			n.send()
		case <-stop:
			stop = nil // from now on, only the follow-ups still due
			n.send()
		}
	}
}

// send asks every router with pending requests, nudgeParallel at a time.
func (n *Nudger) send() {
	n.mu.Lock()
	batch := n.pending
	n.pending = map[string]map[netip.Addr]int{}
	n.mu.Unlock()
	routers := make([]string, 0, len(batch))
	for r := range batch {
		routers = append(routers, r)
	}
	sort.Strings(routers)
	sem := make(chan struct{}, nudgeParallel)
	var wg sync.WaitGroup
	for _, r := range routers {
		dir, ok := n.dirs[r]
		if !ok {
			continue
		}
		peers := make([]netip.Addr, 0, len(batch[r]))
		for a := range batch[r] {
			peers = append(peers, a)
		}
		sort.Slice(peers, func(i, j int) bool { return peers[i].Less(peers[j]) })
		wg.Add(1)
		sem <- struct{}{}
		go n.ask(r, dir, peers, batch[r], sem, &wg)
	}
	wg.Wait()
}

// ask has router r (FRR in dir) retry peers (frr.RetryNow), counts it,
// and schedules each asked peer's follow-up.
func (n *Nudger) ask(r, dir string, peers []netip.Addr, follows map[netip.Addr]int, sem chan struct{}, wg *sync.WaitGroup) {
	defer func() { <-sem; wg.Done() }()
	asked, err := frr.RetryNow(dir, nil, peers)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked += len(asked)
	if err != nil {
		n.errs++
	}
	// Asked: checked again later (a session still not open is asked
	// again).
	for _, a := range asked {
		if f := follows[a]; f < nudgeFollowUps {
			n.outstanding++
			time.AfterFunc(nudgeFollowUp, func() {
				n.mu.Lock()
				n.outstanding--
				n.addLocked(r, a, f+1)
				n.mu.Unlock()
				n.wake()
			})
		}
	}
}
