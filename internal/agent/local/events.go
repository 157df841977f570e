package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
)

// An agent that lives as long as its node keeps the node's routing state
// (routes, local SIDs, rules: observeRouting) between requests instead
// of dumping it from the kernel for each ObserveDigest: a netlink socket
// subscribed to the groups that report every change of it marks the kept
// copy stale, and the next request reads it again (docs/scale.md,
// "Digests kept from events"). The rest of the node (sysctls, HMAC keys,
// the tunnel source, eBPF pins and maps, TCX links) changes without any
// event and is read on every request.
//
// Why nothing is missed: the kernel queues a notification on the
// socket before the syscall that made the change returns. A request
// first peeks at the socket (a message not yet consumed: stale), then
// reads the generation; the reader bumps the generation before it
// consumes what it woke for. So a change made before the request began
// is either still queued or has bumped the generation. A copy is tagged
// with the generation read before it was dumped: a change during the
// dump leaves it stale. Messages are never parsed (any one means
// "changed"), so an overflow (ENOBUFS: lost notifications) is only one
// more "changed".

// eventGroups are the rtnetlink groups whose messages report a change of
// what observeRouting reads (a link or address going also takes routes
// with it; nexthop objects are what routes may point to).
var eventGroups = []int{
	unix.RTNLGRP_LINK,
	unix.RTNLGRP_IPV4_IFADDR, unix.RTNLGRP_IPV6_IFADDR,
	unix.RTNLGRP_IPV4_ROUTE, unix.RTNLGRP_IPV6_ROUTE,
	unix.RTNLGRP_IPV4_RULE, unix.RTNLGRP_IPV6_RULE,
	unix.RTNLGRP_NEXTHOP,
}

// events is a watched node's kept routing state.
type events struct {
	fd   int // the subscribed NETLINK_ROUTE socket, in the node's namespace
	stop int // an eventfd that ends the reader
	gen  atomic.Uint64

	mu      sync.Mutex // one dump at a time; guards the copy and closed
	closed  bool       // the sockets are closed (the watch ended)
	have    bool
	at      uint64 // the generation the copy was dumped at
	routes  []nodestate.Route
	foreign []nodestate.ForeignRoute
	rules   []nodestate.Rule
	links   boundary.Interfaces // the interfaces but loopback (link events make them stale too)

	dumps, hits, overflows atomic.Uint64
	done                   chan struct{}

	// hold, when set (tests), is waited on by the reader before it
	// consumes anything: the socket's queue fills up and overflows.
	hold chan struct{}
}

// EventStats says how a watched agent's observations went: Dumps of
// the routing state, Hits answered from the kept copy, Overflows of the
// event socket (each makes the copy stale), SysctlVisits to the node's
// namespace to open sysctl files (none while the kept ones serve),
// HandleOpens of the netlink handle observations keep.
type EventStats struct{ Dumps, Hits, Overflows, SysctlVisits, HandleOpens uint64 }

// Watch keeps the node's routing state from netlink events until ctx
// ends (the agent daemon calls it once at start): ObserveCached then
// answers from the kept copy while no event says it changed.
func (l *Local) Watch(ctx context.Context) error {
	if os.Getenv(NoWatchEnv) == "1" {
		return nil
	}
	return l.watch(ctx, 0, nil)
}

// NoWatchEnv=1 makes Watch a no-op: every observation reads the kernel,
// as before the watch (the A/B arm of docs/benchmarks.md's #33 section).
const NoWatchEnv = "SEGCHAIN_AGENT_NO_WATCH"

// watch is Watch with the socket's receive buffer set to rcvbuf (0: the
// default) and the reader held until hold is closed (tests).
func (l *Local) watch(ctx context.Context, rcvbuf int, hold chan struct{}) error {
	if l.ev != nil {
		return errors.New("already watching")
	}
	var fd int
	err := nsutil.Do(l.netns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s: event socket: %w", l.name, err)
	}
	fail := func(what string, err error) error {
		unix.Close(fd)
		return fmt.Errorf("node %s: event socket: %s: %w", l.name, what, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fail("bind", err)
	}
	for _, g := range eventGroups {
		if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, g); err != nil {
			return fail(fmt.Sprintf("join group %d", g), err)
		}
	}
	if rcvbuf > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf); err != nil {
			return fail("receive buffer", err)
		}
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return fail("eventfd", err)
	}
	// The namespace's name for its eBPF pins, kept (bpfpin.Keep): every
	// observation of the services and the boundary filter asks for it.
	unkeep, err := bpfpin.Keep(l.netns)
	if err != nil {
		unkeep = func() {}
	}
	e := &events{fd: fd, stop: stop, done: make(chan struct{}), hold: hold}
	l.ev = e
	l.sys = &sysctlFiles{}
	go e.read()
	go func() {
		<-ctx.Done()
		_, _ = unix.Write(stop, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		<-e.done
		// Closed here only, under mu: a request peeking at the socket
		// never meets a closed (or reused) descriptor.
		e.mu.Lock()
		e.closed, e.have = true, false
		unix.Close(e.fd)
		unix.Close(e.stop)
		e.mu.Unlock()
		l.sys.close()
		l.closeObserver()
		unkeep()
	}()
	return nil
}

// read marks the copy stale for every batch of messages, until stopped.
func (e *events) read() {
	defer close(e.done)
	buf := make([]byte, 64<<10)
	fds := []unix.PollFd{{Fd: int32(e.fd), Events: unix.POLLIN}, {Fd: int32(e.stop), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			e.gen.Add(1)
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if e.hold != nil {
			<-e.hold
			e.hold = nil
		}
		// Stale first, then consume: a request that finds the queue
		// empty finds the generation moved.
		e.gen.Add(1)
		for {
			_, _, err := unix.Recvfrom(e.fd, buf, unix.MSG_DONTWAIT)
			if err == nil {
				continue
			}
			if errors.Is(err, unix.ENOBUFS) {
				// Notifications were lost: the copy is stale (it is
				// already), and the socket goes on working.
				e.overflows.Add(1)
				e.gen.Add(1)
				continue
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			break // EAGAIN: drained
		}
	}
}

// pending reports whether the socket holds a message or an error not yet
// consumed by the reader.
func (e *events) pending() bool {
	var b [1]byte
	n, _, err := unix.Recvfrom(e.fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return n > 0 || err != nil && !errors.Is(err, unix.EAGAIN)
}

// running reports whether the reader still marks changes.
func (e *events) running() bool {
	select {
	case <-e.done:
		return false
	default:
		return true
	}
}

// ObserveCached is Observe for a request that may be answered from what
// the agent keeps: with Watch running, the routing state comes from the
// kept copy unless an event said it changed; the rest is read as
// Observe reads it. Without Watch (or once it stopped) it is Observe.
func (l *Local) ObserveCached(ctx context.Context, want *nodestate.Node) (*nodestate.Node, error) {
	e := l.ev
	if e == nil || !e.running() {
		return l.Observe(ctx, want)
	}
	// One observation at a time, through the netlink handle the watch
	// keeps (opening one entered the namespace for four sockets per
	// request); its cache of interface names is dropped first, so it
	// answers as a fresh one, and it is closed on any error.
	l.obsMu.Lock()
	defer l.obsMu.Unlock()
	if l.obsH == nil {
		h, err := l.open()
		if err != nil {
			return nil, err
		}
		l.obsH = h
		l.obsOpens++
	}
	if l.obsBnd == nil {
		l.obsBnd = boundary.NewReader(l.netns)
	}
	h := l.obsH
	h.ForgetLinks()
	got := &nodestate.Node{Name: l.name}
	links, err := e.routing(l, h, got)
	var n *nodestate.Node
	if err == nil {
		n, err = l.observeRest(h, want, got, true, links)
	}
	if err != nil {
		h.Close()
		l.obsH = nil
		return nil, err
	}
	return n, nil
}

// closeObserver closes the handle observations keep (the watch ended).
func (l *Local) closeObserver() {
	l.obsMu.Lock()
	defer l.obsMu.Unlock()
	if l.obsH != nil {
		l.obsH.Close()
		l.obsH = nil
	}
	if l.obsBnd != nil {
		l.obsBnd.Close()
		l.obsBnd = nil
	}
}

// routing fills got's routing state from the kept copy, dumping it first
// when it is stale, and returns the interfaces kept with it.
func (e *events) routing(l *Local, h *dataplane.Handle, got *nodestate.Node) (boundary.Interfaces, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || !e.running() {
		// The watch ended: nothing marks the copy stale any more.
		e.have = false
		if got == nil {
			return nil, nil
		}
		if err := l.observeRouting(h, got); err != nil {
			return nil, err
		}
		got.Sort() // as the kept copy (observeRest sorts the rest)
		return nil, nil
	}
	if e.pending() {
		e.gen.Add(1)
	}
	g := e.gen.Load()
	if !e.have || e.at != g {
		var fresh nodestate.Node
		if err := l.observeRouting(h, &fresh); err != nil {
			return nil, err
		}
		links, err := boundary.ListInterfaces(l.netns)
		if err != nil {
			return nil, fmt.Errorf("node %s: list interfaces: %w", l.name, err)
		}
		// Sorted once here: the copies handed out are sorted already.
		fresh.Sort()
		e.routes, e.foreign, e.rules, e.links, e.at, e.have = fresh.Routes, fresh.Foreign, fresh.Rules, links, g, true
		e.dumps.Add(1)
	} else {
		e.hits.Add(1)
	}
	if got == nil {
		return nil, nil
	}
	// Copies of the slices (their elements are never changed in place):
	// the caller appends to and sorts its own.
	got.Routes = append([]nodestate.Route(nil), e.routes...)
	got.Foreign = append([]nodestate.ForeignRoute(nil), e.foreign...)
	got.Rules = append([]nodestate.Rule(nil), e.rules...)
	return append(boundary.Interfaces{}, e.links...), nil
}

// EventStats is what the watch did so far (zero without Watch).
func (l *Local) EventStats() EventStats {
	if l.ev == nil {
		return EventStats{}
	}
	l.obsMu.Lock()
	opens := l.obsOpens
	l.obsMu.Unlock()
	return EventStats{Dumps: l.ev.dumps.Load(), Hits: l.ev.hits.Load(), Overflows: l.ev.overflows.Load(), SysctlVisits: l.sys.entered.Load(), HandleOpens: opens}
}

// changed marks the kept copy stale: the agent itself changes the node
// (its own changes' events would say so too; this does not wait for them).
func (l *Local) changed() {
	if l.ev != nil {
		l.ev.gen.Add(1)
	}
}

// warmAfter dumps the routing state in the background a moment after the
// agent changed the node, so that the next request (the no-op apply after
// an apply) finds it kept; a change or an event in between makes it stale
// again, as always.
func (l *Local) warmAfter(d time.Duration) {
	if l.ev == nil {
		return
	}
	time.AfterFunc(d, func() {
		h, err := l.open()
		if err != nil {
			return
		}
		defer h.Close()
		if _, err := l.ev.routing(l, h, nil); err != nil {
			l.changed()
		}
	})
}

// warmDelay is how long after its own change the agent dumps its routing
// state again: the batch's events have arrived by then, and a controller
// that sends another batch right away makes the dump stale, not wrong.
const warmDelay = 200 * time.Millisecond
