package oam

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/segchain/segchain/internal/nsutil"
)

// Point is one place a tap watches: an interface of a node, one direction.
type Point struct {
	Node    string `json:"node"`
	Iface   string `json:"iface"`
	Ingress bool   `json:"ingress"`
}

func (p Point) String() string {
	d := "out"
	if p.Ingress {
		d = "in"
	}
	return p.Node + ":" + p.Iface + " " + d
}

// Event is one sighting of a probe.
type Event struct {
	At    time.Duration // kernel monotonic clock (bpf_ktime_get_ns)
	Point Point
	Seq   uint32
	DA    net.IP // outer destination
	SRH   bool
	SL    uint8
	Encap bool
	Len   uint32
	// Drop is set when the kernel dropped the probe there: its drop
	// reason (enum skb_drop_reason, e.g. IP_OUTNOROUTES).
	Drop string
}

// Tap is the oam program attached on ingress of every interface of a set
// of namespaces, all writing to one ring buffer.
type Tap struct {
	events *ebpf.Map
	rd     *ringbuf.Reader
	mu     sync.Mutex
	progs  []*ebpf.Program
	links  []link.Link
	points []Point
	nodes  []string         // oam_node → node
	ifName map[ifKey]string // (oam_node, ifindex) → interface
}

type ifKey struct {
	node    uint32
	ifindex uint32
}

// Attach loads the oam program once per node (its index is a load-time
// constant: bpf_get_netns_cookie names the sender's namespace on tc, not
// the node's) and attaches it at the head of the TCX ingress chain of every
// interface but lo of each node's namespace, the nodes in parallel.
// netns maps node names to namespaces.
func Attach(netns map[string]string, magic uint64) (t *Tap, err error) {
	spec, err := loadOamTC()
	if err != nil {
		return nil, fmt.Errorf("load oam program spec: %w", err)
	}
	t = &Tap{nodes: sortedKeys(netns), ifName: map[ifKey]string{}}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if t.events, err = ebpf.NewMap(spec.Maps["oam_events"]); err != nil {
		return nil, fmt.Errorf("create oam ring buffer: %w", err)
	}
	if err := spec.Variables["oam_magic"].Set(magic); err != nil {
		return nil, fmt.Errorf("set oam_magic: %w", err)
	}
	for i := range t.nodes {
		if err := spec.Variables["oam_node"].Set(uint32(i)); err != nil {
			return nil, fmt.Errorf("set oam_node: %w", err)
		}
		var objs oamTCObjects
		if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{
			MapReplacements: map[string]*ebpf.Map{"oam_events": t.events},
		}); err != nil {
			return nil, fmt.Errorf("load oam program: %w", err)
		}
		objs.OamEvents.Close() // the replacement's own fd: t.events stays open
		t.progs = append(t.progs, objs.OamTc)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(t.nodes))
	for i, node := range t.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := nsutil.Do(netns[node], func() error { return t.attachNode(i) }); err != nil {
				errs[i] = fmt.Errorf("tap node %s: %w", node, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if t.rd, err = ringbuf.NewReader(t.events); err != nil {
		return nil, fmt.Errorf("open oam ring buffer: %w", err)
	}
	return t, nil
}

// attachNode runs in the node's namespace.
func (t *Tap) attachNode(i int) error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		// Head of the chain: the probe is seen before a service's program
		// can redirect or drop it.
		l, err := link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: t.progs[i], Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
		if err != nil {
			return fmt.Errorf("attach oam program to %s: %w", ifc.Name, err)
		}
		t.mu.Lock()
		t.ifName[ifKey{uint32(i), uint32(ifc.Index)}] = ifc.Name
		t.links = append(t.links, l)
		t.points = append(t.points, Point{Node: t.nodes[i], Iface: ifc.Name, Ingress: true})
		t.mu.Unlock()
	}
	return nil
}

// Points returns the attach points, in the order of their index.
func (t *Tap) Points() []Point { return t.points }

// Collect reads events until deadline or until done returns true for the
// events read so far.
func (t *Tap) Collect(deadline time.Time, done func([]Event) bool) ([]Event, error) {
	var out []Event
	t.rd.SetDeadline(deadline)
	for {
		rec, err := t.rd.Read()
		if errors.Is(err, ringbuf.ErrFlushed) || errors.Is(err, ringbuf.ErrClosed) {
			return out, nil
		}
		if err != nil {
			if errors.Is(err, errDeadline) || isTimeout(err) {
				return out, nil
			}
			return out, fmt.Errorf("read oam ring buffer: %w", err)
		}
		var ev oamTCOamEvent
		if len(rec.RawSample) < binarySize(ev) {
			continue
		}
		decode(rec.RawSample, &ev)
		if int(ev.Node) >= len(t.nodes) {
			continue
		}
		name := t.ifName[ifKey{ev.Node, ev.Ifindex}]
		e := Event{At: time.Duration(ev.Ts), Point: Point{Node: t.nodes[ev.Node], Iface: name, Ingress: true}, Seq: ev.Seq, SRH: ev.Srh == 1, SL: ev.Sl, Encap: ev.Encap == 1, Len: ev.Len}
		if ev.Family == 4 {
			e.DA = net.IP(append([]byte(nil), ev.Da[:4]...))
		} else {
			e.DA = net.IP(append([]byte(nil), ev.Da[:]...))
		}
		out = append(out, e)
		if done != nil && done(out) {
			return out, nil
		}
	}
}

// Close detaches and unloads everything.
func (t *Tap) Close() error {
	var errs []error
	if t.rd != nil {
		errs = append(errs, t.rd.Close())
	}
	// In parallel: each detach waits for an RCU grace period.
	var wg sync.WaitGroup
	lerrs := make([]error, len(t.links))
	for i, l := range t.links {
		wg.Add(1)
		go func() { defer wg.Done(); lerrs[i] = l.Close() }()
	}
	wg.Wait()
	errs = append(errs, lerrs...)
	for _, p := range t.progs {
		errs = append(errs, p.Close())
	}
	if t.events != nil {
		errs = append(errs, t.events.Close())
	}
	return errors.Join(errs...)
}
