package srv6svc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
)

// OnFailure is what happens to a bound SID's packets while no process
// serves it (the service died or closed).
type OnFailure uint8

const (
	// OnFailureDrop drops them in XDP and counts them.
	OnFailureDrop OnFailure = iota
	// OnFailureBypass hands them to the kernel, whose End route for the
	// SID (installed by Listen) forwards them to the next segment.
	OnFailureBypass
)

func (f OnFailure) String() string {
	if f == OnFailureBypass {
		return "bypass"
	}
	return "drop"
}

// ParseOnFailure parses "drop" or "bypass".
func ParseOnFailure(s string) (OnFailure, error) {
	switch s {
	case "drop", "":
		return OnFailureDrop, nil
	case "bypass":
		return OnFailureBypass, nil
	}
	return 0, fmt.Errorf("on-failure %q: want drop or bypass", s)
}

// Config describes a binding.
type Config struct {
	// Name identifies the binding in `segchain sid show` (at most 31
	// bytes). A process binding again under the same name takes its slot.
	Name string
	// SIDs to bind. A /128 is one SID; a shorter prefix binds every SID in
	// it and its low bits are the ARGS (Packet.Args).
	SIDs []netip.Prefix
	// CSID, when set (F3216), makes the SIDs uSIDs (RFC 9800 NEXT-C-SID,
	// docs/usid.md): each a block:uSID prefix of LBLen + NFLen bits, which
	// matches the uSID whatever uSIDs follow it in the container. The
	// steering program drops a container with invalid padding
	// (Counters.CSIDPadding) and takes one with more uSIDs after the
	// active one with or without an SRH; Forward then shifts the
	// container (the next uSID active, Segments Left unchanged) and goes
	// to the next segment only when the container is consumed. Such a
	// SID has no ARGS (Packet.Args reads 0). The zero value: full SIDs.
	CSID CSIDFormat
	// Interfaces where the SIDs' traffic arrives; the steering XDP program
	// is attached to each.
	Interfaces []string
	// Netns is the network namespace (a name under /run/netns), "" for the
	// caller's.
	Netns string
	// Queues is the number of workers, one AF_XDP socket each (the
	// receive queues of the binding's own veth; a frame lands on the queue
	// of the CPU that redirected it). 0: one per CPU.
	Queues int
	// OnFailure applies while no process serves the SIDs.
	OnFailure OnFailure
	// BatchSize bounds the packets a batch handler gets at once (default 64).
	BatchSize int
	// Realtime runs every worker thread under SCHED_FIFO (priority 1, the
	// lowest real-time priority), locked to its goroutine for the worker's
	// life. A worker then runs as soon as a batch is in its ring, ahead of
	// the kernel thread that fills the ring (threaded NAPI, ksoftirqd) when
	// both share a CPU: without it, under overload, that thread keeps
	// steering and copying frames into a full ring, and the kernel drops
	// most of them after the work is done (measured: five frames dropped
	// per frame served, see docs/userspace.md "Performance"). With it, the
	// excess is dropped where it arrives, before any work. A worker blocks
	// whenever its ring is empty; a handler that never lets it empty the
	// ring holds its CPU up to the kernel's real-time limit
	// (kernel.sched_rt_runtime_us, 95 % by default). Needs CAP_SYS_NICE;
	// refused, the workers stay normal tasks, and Mode says which
	// (sched=fifo or sched=normal).
	Realtime bool
	// StackForward sends the frames the service processed through the
	// node's IPv6 stack, which routes them to the next segment (as before
	// segchain forwarded them itself). By default (false) the steering
	// program forwards a processed frame by FIB from TCX on the binding's
	// loop veth when the FIB resolves the next segment to a neighbour
	// (hop limit decremented, MACs set, sent out of the egress interface,
	// whose TCX egress programs run): the frame then skips a second pass
	// through the stack (docs/userspace.md "Forwarding the sent frame").
	// Local SIDs, encapsulating routes, an unresolved neighbour, a frame
	// over the MTU or a hop limit running out still take the stack. Set
	// it where the node's netfilter FORWARD/POSTROUTING rules (nft,
	// ip6tables, conntrack) must see the service's output: the FIB path
	// does not cross them.
	StackForward bool
	// WorkerStart, if set, is called by each worker on its own OS thread,
	// locked to it for the worker's life, before it serves queue: a
	// benchmark pins the thread (unix.Gettid) and accounts its CPU time.
	WorkerStart func(queue int)
}

// Handler processes one packet (synchronous mode). The packet's memory is
// valid until it returns. Workers (one per queue) call it concurrently:
// shared state needs a lock or per-queue copies (Packet.Queue).
type Handler func(p *Packet) Verdict

// BatchHandler processes a batch (asynchronous batched mode): it sets
// verdicts[i] for pkts[i] (the slice comes zeroed: Forward). Workers call
// it concurrently, as Handler.
type BatchHandler func(pkts []*Packet, verdicts []Verdict)

// Counters of a binding, as `segchain sid show` prints them.
type Counters struct {
	Steered        uint64 // redirected by XDP to a socket of the binding
	SteeredBytes   uint64
	RX             uint64 // received by the process
	TX             uint64 // sent on after the verdict
	DropVerdict    uint64 // the handler said Drop
	DropMalformed  uint64 // malformed: bad SRH in XDP, or in the library
	DropBadVerdict uint64 // a verdict that could not be applied (e.g. skip-next with SL < 2, bad inner)
	DropTxFull     uint64 // tx ring full
	NoSocketDrop   uint64 // no process on the queue; on-failure drop
	NoSocketBypass uint64 // no process on the queue; on-failure bypass
	TooBig         uint64 // longer than the binding's pair takes (Mode's mtu=): dropped in XDP
	CSIDPadding    uint64 // uSID binding: a container with invalid padding (a C-SID after its end), dropped in XDP
	// DropHopLimit: a frame a service of this node sent to one of this
	// binding's SIDs arrived with a hop limit <= 1, dropped (each such
	// hand-over is a hop; a handler that forwards to its own SID dies
	// here instead of looping). See docs/userspace.md "Loops".
	DropHopLimit uint64
	Modified     uint64 // inner packet changed by the handler
}

// Service is a binding: its SIDs' packets come to its workers.
type Service struct {
	cfg     Config
	steer   *steer
	slot    uint32
	workers []*worker
	mode    string
	mtu     int
	loopIdx int
	ownIdx  int
	started time.Time
	batch   atomic.Bool
	asm     atomic.Bool
	mu      sync.Mutex
	serving bool
	closed  bool
	stop    chan struct{}
	flushWG sync.WaitGroup

	realtime bool // Config.Realtime was asked for and the kernel allows it
}

type worker struct {
	svc                                               *Service
	x                                                 *xsk
	iface                                             string
	queue                                             int
	srcMAC                                            net.HardwareAddr
	dstMAC                                            net.HardwareAddr
	rx, tx, dropV, dropM, dropBad, dropFull, modified atomic.Uint64
}

func (c *Config) check() error {
	var errs []error
	if c.Name == "" || len(c.Name) > 31 || strings.ContainsRune(c.Name, 0) {
		errs = append(errs, fmt.Errorf("name: %q must be 1 to 31 bytes", c.Name))
	}
	if len(c.SIDs) == 0 {
		errs = append(errs, errors.New("sids: at least one SID is needed"))
	}
	for i, p := range c.SIDs {
		if !p.IsValid() || !p.Addr().Is6() || p.Addr().Is4In6() || p.Bits() < 1 {
			errs = append(errs, fmt.Errorf("sids[%d]: %s is not an IPv6 prefix", i, p))
		} else if p.Masked() != p {
			errs = append(errs, fmt.Errorf("sids[%d]: %s has bits set after the prefix length (use %s)", i, p, p.Masked()))
		}
	}
	if c.CSID != (CSIDFormat{}) {
		if !c.CSID.ok() {
			errs = append(errs, fmt.Errorf("csid: %d/%d: want a block and a C-SID length in bits, multiples of 8, at most 128 together", c.CSID.LBLen, c.CSID.NFLen))
		} else {
			for i, p := range c.SIDs {
				if p.IsValid() && p.Bits() != c.CSID.LBLen+c.CSID.NFLen {
					errs = append(errs, fmt.Errorf("sids[%d]: %s: a uSID of format %s is bound as a /%d (block and uSID)", i, p, c.CSID, c.CSID.LBLen+c.CSID.NFLen))
				}
			}
		}
	}
	if len(c.Interfaces) == 0 {
		errs = append(errs, errors.New("interfaces: at least one interface is needed"))
	}
	if c.Queues < 0 || c.Queues > MaxQueues {
		errs = append(errs, fmt.Errorf("queues: %d out of 0..%d", c.Queues, MaxQueues))
	}
	if c.BatchSize < 0 || c.BatchSize > ringSize {
		errs = append(errs, fmt.Errorf("batch size: %d out of 0..%d", c.BatchSize, ringSize))
	}
	if len(errs) == 0 {
		return nil
	}
	return &ConfigError{Problems: errs}
}

// Listen binds cfg.SIDs: it attaches the steering XDP program to the
// interfaces (once per namespace; it stays attached), creates the
// binding's veth pair, opens one AF_XDP socket per worker on it, puts them
// in the program's socket map and registers the SIDs. If it fails, the
// pair it created is removed and no SID is registered. Packets then queue until Serve or ServeBatch runs.
// The AF_XDP mode actually obtained (zero-copy or copy) and the XDP mode
// (native or generic) are in Mode().
func Listen(cfg Config) (*Service, error) {
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 64
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	dir, err := pinDir(cfg.Netns)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, started: time.Now(), stop: make(chan struct{})}
	err = nsutil.Do(cfg.Netns, func() error { return s.setup(dir) })
	if err != nil {
		s.teardown()
		return nil, err
	}
	s.flushWG.Add(1)
	go s.flusher()
	return s, nil
}

func (s *Service) setup(dir string) (err error) {
	st, err := openSteer(dir)
	if err != nil {
		return err
	}
	s.steer = st
	if s.slot, err = st.chooseSlot(s.cfg.Name, s.cfg.SIDs); err != nil {
		return err
	}
	var modes []string
	linkMTU := 0
	for _, name := range s.cfg.Interfaces {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return fmt.Errorf("interface %s: %w", name, err)
		}
		mode, err := st.attach(l)
		if err != nil {
			return err
		}
		if err := st.generic(l.Attrs().Index, strings.HasPrefix(mode, "generic")); err != nil {
			return err
		}
		modes = append(modes, name+":"+mode)
		linkMTU = max(linkMTU, l.Attrs().MTU)
	}
	n := s.cfg.Queues
	if n == 0 {
		n = min(runtime.NumCPU(), MaxQueues)
	}
	// The pair takes what the SIDs' interfaces bring, up to what native
	// XDP on veth and one UMEM frame take (no multi-buffer): a longer
	// frame is dropped and counted (too_big) by the steering program.
	s.mtu = min(linkMTU, MaxMTU)
	loop, peer, created, err := loopPair(s.slot, n, s.mtu)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && created {
			netlink.LinkDel(loop)
		}
	}()
	s.loopIdx, s.ownIdx = loop.Attrs().Index, peer.Attrs().Index
	mode, err := st.attach(peer)
	if err != nil {
		return err
	}
	modes = append(modes, peer.Attrs().Name+":"+mode)
	if err := st.attachTC(s.loopIdx); err != nil {
		return err
	}
	if err := st.fibForward(s.loopIdx, !s.cfg.StackForward); err != nil {
		return err
	}
	if err := st.objs.SvcDevs.Put(s.slot, uint32(s.loopIdx)); err != nil {
		return fmt.Errorf("DEVMAP entry %d: %w", s.slot, err)
	}
	if got := rxQueues(peer.Attrs().Name); got < n {
		return fmt.Errorf("loop veth %s has %d receive queues, want %d", peer.Attrs().Name, got, n)
	}
	zc := true
	for q := 0; q < n; q++ {
		x, err := newXSK(s.ownIdx, q)
		// The kernel frees a closed socket's hold on the queue
		// asynchronously: a process binding again at once (a restart)
		// can find it busy for a moment.
		for wait := time.Now().Add(3 * time.Second); errors.Is(err, unix.EBUSY) && time.Now().Before(wait); {
			time.Sleep(20 * time.Millisecond)
			x, err = newXSK(s.ownIdx, q)
		}
		if err != nil {
			return fmt.Errorf("AF_XDP on %s queue %d: %w", peer.Attrs().Name, q, err)
		}
		zc = zc && x.zerocopy
		w := &worker{svc: s, x: x, queue: q, srcMAC: peer.Attrs().HardwareAddr, dstMAC: loop.Attrs().HardwareAddr}
		s.workers = append(s.workers, w)
		key := s.slot*MaxQueues + uint32(q)
		if err := st.objs.SvcXsks.Put(key, uint32(x.fd)); err != nil {
			return fmt.Errorf("XSKMAP entry %d: %w", key, err)
		}
	}
	xskMode := "copy"
	if zc {
		xskMode = "zerocopy"
	}
	s.mode = "xdp=" + strings.Join(modes, ",") + " xsk=" + xskMode + fmt.Sprintf(" mtu=%d", s.mtu)
	if linkMTU > s.mtu {
		s.mode += fmt.Sprintf("<%d", linkMTU)
	}
	if s.cfg.StackForward {
		s.mode += " fwd=stack"
	} else {
		s.mode += " fwd=fib"
	}
	if s.cfg.Realtime {
		s.realtime = probeRealtime() == nil
		if s.realtime {
			s.mode += " sched=fifo"
		} else {
			s.mode += " sched=normal"
		}
	}
	for _, p := range s.cfg.SIDs {
		if s.cfg.OnFailure == OnFailureBypass {
			err = endRoute(p, peer.Attrs().Index, s.cfg.CSID)
		} else {
			// A binding of these SIDs with bypass before left its End
			// route: with drop, nothing may forward them.
			err = delBypassRoutes(p)
		}
		if err != nil {
			return err
		}
	}
	if err := st.register(s.slot, s.ownIdx, s.loopIdx, peer.Attrs().HardwareAddr, s.cfg.SIDs, s.cfg.OnFailure == OnFailureBypass, s.mtu+ethLen, s.cfg.CSID); err != nil {
		return err
	}
	return s.writeInfo(true)
}

// loopPair returns the service's loop veth pair (created if needed, with
// at least n queues): the service sends processed packets on loop; peer
// hands them to the node's stack, which routes them to the next SID.
func loopPair(slot uint32, n, mtu int) (loop, peer netlink.Link, created bool, err error) {
	name := fmt.Sprintf("%s%d", nodestate.UserspaceLoopPrefix, slot)
	pname := name + "k"
	if l, err := netlink.LinkByName(name); err == nil {
		if l.Attrs().NumTxQueues >= n {
			if p, err := netlink.LinkByName(pname); err == nil {
				if err := setMTU(mtu, l, p); err != nil {
					return nil, nil, false, err
				}
				l, _ = netlink.LinkByName(name)
				p, _ = netlink.LinkByName(pname)
				return l, p, false, nil
			}
		}
		netlink.LinkDel(l)
	}
	// Both sides hand frames to the stack: the loop side those the service
	// sends, the own side those bypassed while no process serves.
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, NumTxQueues: n, NumRxQueues: n, MTU: mtu}, PeerName: pname, PeerMTU: uint32(mtu)}
	if err := netlink.LinkAdd(v); err != nil {
		return nil, nil, false, fmt.Errorf("create loop veth %s: %w", name, err)
	}
	for _, nm := range []string{name, pname} { // no DAD, no router solicitations
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+nm+"/accept_dad", []byte("0"), 0)
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+nm+"/router_solicitations", []byte("0"), 0)
	}
	for _, nm := range []string{name, pname} {
		l, err := netlink.LinkByName(nm)
		if err == nil {
			err = netlink.LinkSetUp(l)
		}
		if err != nil {
			netlink.LinkDel(v)
			return nil, nil, false, fmt.Errorf("set %s up: %w", nm, err)
		}
	}
	if loop, err = netlink.LinkByName(name); err == nil {
		peer, err = netlink.LinkByName(pname)
	}
	if err != nil {
		netlink.LinkDel(v)
		return nil, nil, false, err
	}
	return loop, peer, true, nil
}

// setMTU sets the MTU of both sides of a reused pair. The XDP program on
// the own side goes first when the MTU grows (veth refuses a peer MTU
// native XDP could not take), so lower then raise in the right order.
func setMTU(mtu int, loop, peer netlink.Link) error {
	for _, l := range []netlink.Link{loop, peer} {
		if l.Attrs().MTU == mtu {
			continue
		}
		if err := netlink.LinkSetMTU(l, mtu); err != nil {
			return fmt.Errorf("set MTU %d on %s: %w", mtu, l.Attrs().Name, err)
		}
	}
	return nil
}

// MaxMTU is the largest MTU a binding's veth pair gets: native XDP on veth
// without multi-buffer takes a frame that fits one page with the XDP
// headroom (256) and the skb's shared info (320 on x86-64): 4096 − 256 −
// 320 − 14 = 3506, which also fits one UMEM frame. Interfaces with a
// larger MTU (9000 links) keep native XDP only with a multi-buffer
// (xdp.frags) program, which the steering program is not: the kernel
// refuses native mode there, the interface runs generic XDP and Mode says
// why; frames longer than the pair takes are dropped and counted (TooBig).
const MaxMTU = 3506

// RouteProtocol marks the End routes srv6svc installs for on-failure
// bypass (rtnetlink protocol 201, unassigned in /etc/iproute2/rt_protos;
// segchain's other protocols are listed at nodestate.Proto).
const RouteProtocol = 0xc9

// RouteMetric is the metric of those routes: not the default one, so that
// a domain's plan for the same SID (a userspace service kind) does not see
// them as a route of another tool it would replace.
const RouteMetric = 1199

func endRoute(p netip.Prefix, ifindex int, f CSIDFormat) error {
	enc := &netlink.SEG6LocalEncap{Action: nl.SEG6_LOCAL_ACTION_END}
	enc.Flags[nl.SEG6_LOCAL_ACTION] = true
	r := &netlink.Route{LinkIndex: ifindex, Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)},
		Encap: enc, Protocol: RouteProtocol, Priority: RouteMetric}
	if f.ok() {
		// A uSID: the kernel's End must shift the container as the
		// process would (replacing a plain End a full binding left).
		r.Encap = endNextCSID{f}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("End next-csid route for %s (on-failure bypass): %w", p, err)
		}
		return nil
	}
	err := netlink.RouteAdd(r)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("End route for %s (on-failure bypass): %w", p, err)
	}
	return nil
}

// Mode says how packets reach the service, e.g. "xdp=eth0:native,s6svc0k:native
// xsk=copy mtu=1500 fwd=fib": per interface (those of Config.Interfaces, then the
// binding's own veth) the XDP mode obtained (native or generic; generic
// with the reason native was refused, e.g. "eth0:generic(mtu9000>3506)"),
// then the AF_XDP mode (zerocopy or copy; veth only has copy), the MTU of
// the binding's pair (the largest of the interfaces', at most MaxMTU;
// "mtu=3506<9000" when the interfaces take longer frames than the pair:
// those are dropped and counted, Counters.TooBig), how the frames it
// sends are forwarded (fwd=fib, or fwd=stack with Config.StackForward);
// with Config.Realtime,
// then the workers' scheduling (sched=fifo, or sched=normal when it was
// refused).
func (s *Service) Mode() string { return s.mode }

// Queues is the number of workers (one AF_XDP socket each).
func (s *Service) Queues() int { return len(s.workers) }

// Serve runs h on every packet, one call per packet (synchronous mode),
// until ctx ends or Close. Workers run in parallel, one goroutine each.
// A worker takes what its receive ring holds (up to Config.BatchSize),
// calls h on each packet in turn and then sends them with one kernel call:
// a packet waits for the handler calls of the packets read with it, never
// for packets still to arrive (a transmit call per packet, as before
// issue 32, cost sync a third of its throughput per CPU on veth:
// docs/userspace.md "Synchronous and batched").
func (s *Service) Serve(ctx context.Context, h Handler) error {
	if h == nil {
		return errors.New("nil handler")
	}
	return s.serve(ctx, func(ps []*Packet, vs []Verdict) {
		for i, p := range ps {
			vs[i] = h(p)
		}
	}, s.cfg.BatchSize)
}

// ServeBatch runs h on batches of up to Config.BatchSize packets per
// worker (asynchronous batched mode: one kernel call per batch each way).
func (s *Service) ServeBatch(ctx context.Context, h BatchHandler) error {
	if h == nil {
		return errors.New("nil handler")
	}
	s.batch.Store(true)
	_ = s.writeInfo(true)
	return s.serve(ctx, h, s.cfg.BatchSize)
}

func (s *Service) serve(ctx context.Context, h BatchHandler, batch int) error {
	s.mu.Lock()
	if s.serving || s.closed {
		s.mu.Unlock()
		return errors.New("service already serving or closed")
	}
	s.serving = true
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	errc := make(chan error, len(s.workers))
	for _, w := range s.workers {
		go func() {
			if s.cfg.WorkerStart != nil || s.realtime {
				runtime.LockOSThread() // never unlocked: the thread ends with the worker
			}
			if s.realtime {
				if err := setRealtime(); err != nil {
					errc <- fmt.Errorf("queue %d: %w", w.queue, err)
					return
				}
			}
			if s.cfg.WorkerStart != nil {
				s.cfg.WorkerStart(w.queue)
			}
			errc <- w.run(ctx, h, batch)
		}()
	}
	var errs []error
	for range s.workers {
		if err := <-errc; err != nil {
			errs = append(errs, err)
			cancel()
		}
	}
	s.mu.Lock()
	s.serving = false
	s.mu.Unlock()
	return errors.Join(errs...)
}

func (w *worker) run(ctx context.Context, h BatchHandler, batch int) error {
	x := w.x
	pkts := make([]Packet, batch)
	ptrs := make([]*Packet, 0, batch)
	verdicts := make([]Verdict, batch)
	for i := range pkts {
		pkts[i].mem = x.umem
		pkts[i].Queue = w.queue
	}
	bound := w.svc.cfg.SIDs
	pfd := []unix.PollFd{{Fd: int32(x.fd), Events: unix.POLLIN}}
	for ctx.Err() == nil {
		x.reclaim()
		x.refill()
		n := x.rx.avail()
		if n == 0 {
			if _, err := unix.Poll(pfd, 50); err != nil && !errors.Is(err, unix.EINTR) {
				return fmt.Errorf("poll: %w", err)
			}
			continue
		}
		n = min(n, uint32(batch))
		ptrs = ptrs[:0]
		for i := uint32(0); i < n; i++ {
			d := *x.rx.xdesc(x.rx.cached + i)
			buf, chunk := x.frame(d.Addr, d.Len)
			p := &pkts[len(ptrs)]
			if err := p.parse(buf, w.svc.cfg.CSID); err != nil {
				w.dropM.Add(1)
				x.free = append(x.free, chunk)
				continue
			}
			p.chunk, p.addr = chunk, d.Addr
			p.Bound = match(bound, p.outer.Dst)
			ptrs = append(ptrs, p)
		}
		x.rx.cached += n
		x.rx.release()
		w.rx.Add(uint64(n))
		if len(ptrs) == 0 {
			continue
		}
		clear(verdicts[:len(ptrs)])
		h(ptrs, verdicts[:len(ptrs)])
		sent := 0
		for i, p := range ptrs {
			out := p.finish(verdicts[i])
			if p.modified && out != outDropVerdict {
				w.modified.Add(1)
			}
			switch out {
			case outDropVerdict:
				w.dropV.Add(1)
				x.free = append(x.free, p.chunk)
				continue
			case outDropBad:
				w.dropBad.Add(1)
				x.free = append(x.free, p.chunk)
				continue
			}
			if x.tx.free() == 0 {
				x.reclaim()
				if x.tx.free() == 0 {
					w.dropFull.Add(1)
					x.free = append(x.free, p.chunk)
					continue
				}
			}
			copy(p.buf[0:6], w.dstMAC)
			copy(p.buf[6:12], w.srcMAC)
			*x.tx.xdesc(x.tx.cached) = unix.XDPDesc{Addr: p.addr, Len: uint32(len(p.buf))}
			x.tx.cached++
			sent++
		}
		if sent > 0 {
			x.tx.submit()
			w.tx.Add(uint64(sent))
			if err := x.kick(); err != nil {
				return err
			}
		}
	}
	return nil
}

// match returns the bound prefix containing a (longest first).
func match(bound []netip.Prefix, a netip.Addr) netip.Prefix {
	best := netip.Prefix{}
	for _, p := range bound {
		if p.Contains(a) && (!best.IsValid() || p.Bits() > best.Bits()) {
			best = p
		}
	}
	return best
}

// Counters returns the binding's counters (kernel and process).
func (s *Service) Counters() Counters {
	var c Counters
	if s.steer != nil {
		c = kernelCounters(s.steer.objs.SvcCounters, s.slot)
	}
	for _, w := range s.workers {
		c.RX += w.rx.Load()
		c.TX += w.tx.Load()
		c.DropVerdict += w.dropV.Load()
		c.DropMalformed += w.dropM.Load()
		c.DropBadVerdict += w.dropBad.Load()
		c.DropTxFull += w.dropFull.Load()
		c.Modified += w.modified.Load()
	}
	return c
}

func (s *Service) flusher() {
	defer s.flushWG.Done()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			_ = s.writeInfo(true)
		}
	}
}

// writeInfo publishes the process's counters for `segchain sid show`.
func (s *Service) writeInfo(running bool) error {
	if s.steer == nil {
		return nil
	}
	c := s.Counters()
	in := steerXDPSvcInfo{Queues: uint32(len(s.workers)), Flags: infoUsed, Sids: uint32(len(s.cfg.SIDs)),
		Rx: c.RX, Tx: c.TX, DropVerdict: c.DropVerdict, DropMalformed: c.DropMalformed + c.DropBadVerdict,
		DropTxFull: c.DropTxFull, Modified: c.Modified, StartedNs: uint64(s.started.UnixNano())}
	if running {
		in.Pid = uint32(os.Getpid())
	}
	if s.asm.Load() {
		in.Flags |= infoASM
	}
	if s.batch.Load() {
		in.Flags |= infoBatch
	}
	putCString(in.Name[:], s.cfg.Name)
	putCString(in.Mode[:], s.mode)
	return s.steer.objs.SvcInfos.Put(s.slot, &in)
}

// Close stops serving and closes the sockets. The SIDs stay registered:
// their on-failure policy applies until a process binds them again (Listen
// with the same name or SIDs) or Release removes them.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	s.mu.Unlock()
	s.flushWG.Wait()
	for !s.idle() {
		time.Sleep(10 * time.Millisecond)
	}
	_ = s.writeInfo(false)
	s.teardown()
	return nil
}

func (s *Service) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.serving
}

func (s *Service) teardown() {
	for _, w := range s.workers {
		w.x.close()
	}
	s.workers = nil
	if s.steer != nil {
		s.steer.close()
		s.steer = nil
	}
}

// Release closes the service and removes its binding: its SIDs leave the
// steering map (their traffic then takes the kernel path like any other),
// its loop interface and End routes are deleted.
func (s *Service) Release() error {
	_ = s.Close()
	return unbind(s.cfg.Netns, s.cfg.Name, true)
}
