package oam

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/segchain/segchain/internal/nsutil"
)

// Tapper is where a trace's probe sightings come from.
type Tapper interface {
	// Collect reads sightings until deadline or until done says enough.
	Collect(deadline time.Time, done func([]Event) bool) ([]Event, error)
	Close() error
}

// Tap kinds (Options.Tap).
const (
	TapTracepoint = "tracepoint" // one attach to net:netif_receive_skb (oam_rx.bpf.c)
	TapTCX        = "tcx"        // a TCX ingress program per interface (oam_tc.bpf.c)
)

// RxTap is the tracepoint tap: one program for every node, which names
// the node by its namespace's inode number.
type RxTap struct {
	objs   *oamRXObjects
	lk     link.Link
	drop   link.Link
	reason map[uint32]string // enum skb_drop_reason, from the kernel's BTF
	rd     *ringbuf.Reader
	nodeOf map[uint32]string // netns inode → node
	ifName map[[2]uint32]string
	magic  uint64 // this trace's marker: a sighting of another is dropped
}

// rxPool keeps the tracepoint tap's loaded programs and maps of a process
// between traces: loading them (the kernel's BTF, CO-RE, the verifier) is
// 60–500 ms here, attaching them under 3 ms. BPF programs and maps are not
// per namespace (only the nodes in oam_nodes are), so one loaded set serves
// any trace; a set is used by one trace at a time (its oam_magic).
var rxPool struct {
	sync.Mutex
	free []*oamRXObjects
}

// rxPoolMax bounds the loaded sets kept (each holds a 64 KiB ring buffer).
const rxPoolMax = 4

// rxLoads counts the loads of the tracepoint tap in this process.
var rxLoads atomic.Int64

// RxLoads is how many times this process has loaded the tracepoint tap
// (tests check that traces reuse it).
func RxLoads() int64 { return rxLoads.Load() }

func getRxObjs() (*oamRXObjects, error) {
	rxPool.Lock()
	if n := len(rxPool.free); n > 0 {
		o := rxPool.free[n-1]
		rxPool.free = rxPool.free[:n-1]
		rxPool.Unlock()
		return o, nil
	}
	rxPool.Unlock()
	spec, err := loadOamRX()
	if err != nil {
		return nil, fmt.Errorf("load oam tracepoint program spec: %w", err)
	}
	o := &oamRXObjects{}
	if err := spec.LoadAndAssign(o, nil); err != nil {
		return nil, fmt.Errorf("load oam tracepoint program: %w", err)
	}
	rxLoads.Add(1)
	return o, nil
}

// putRxObjs returns a detached set to the pool, emptied: no node, no
// sighting left in its ring buffer.
func putRxObjs(o *oamRXObjects) error {
	err := func() error {
		var k, v uint32
		var keys []uint32
		it := o.OamNodes.Iterate()
		for it.Next(&k, &v) {
			keys = append(keys, k)
		}
		if err := it.Err(); err != nil {
			return err
		}
		for _, k := range keys {
			if err := o.OamNodes.Delete(k); err != nil {
				return err
			}
		}
		if err := o.OamMagic.Set(uint64(0)); err != nil {
			return err
		}
		// Late sightings of this trace must not reach the next one. A
		// reader of its own: the trace's may still be blocked in a Read
		// (closing it is what ends that Read).
		rd, err := ringbuf.NewReader(o.OamRxEvents)
		if err != nil {
			return err
		}
		defer rd.Close()
		rd.SetDeadline(time.Now())
		for {
			if _, err := rd.Read(); err != nil {
				return nil
			}
		}
	}()
	rxPool.Lock()
	defer rxPool.Unlock()
	if err != nil || len(rxPool.free) >= rxPoolMax {
		return errors.Join(err, o.Close())
	}
	rxPool.free = append(rxPool.free, o)
	return nil
}

// PrewarmRx loads the tracepoint tap into this process's pool (when it
// holds none) and reads the kernel's drop reasons, so that the next trace
// only attaches: the agents call it when they start.
func PrewarmRx() error {
	dropReasonsOnce()
	rxPool.Lock()
	n := len(rxPool.free)
	rxPool.Unlock()
	if n > 0 {
		return nil
	}
	o, err := getRxObjs()
	if err != nil {
		return err
	}
	return putRxObjs(o)
}

// AttachRx attaches the tracepoint tap for the namespaces of netns (node
// → namespace), with programs loaded once per process (rxPool).
func AttachRx(netns map[string]string, magic uint64) (t *RxTap, err error) {
	// The drop reasons (the kernel's BTF) are read while the programs load.
	reasons := make(chan map[uint32]string, 1)
	go func() { reasons <- dropReasonsOnce() }()
	o, err := getRxObjs()
	if err != nil {
		return nil, err
	}
	t = &RxTap{objs: o, nodeOf: map[uint32]string{}, ifName: map[[2]uint32]string{}, magic: magic}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if err := o.OamMagic.Set(magic); err != nil {
		return nil, fmt.Errorf("set oam_magic: %w", err)
	}
	for node, ns := range netns {
		st, err := os.Stat(nsutil.Path(ns))
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		ino := uint32(st.Sys().(*syscall.Stat_t).Ino)
		t.nodeOf[ino] = node
		if err := o.OamNodes.Put(ino, uint32(1)); err != nil {
			return nil, fmt.Errorf("node %s: oam_nodes: %w", node, err)
		}
		err = nsutil.Do(ns, func() error {
			ifs, err := net.Interfaces()
			for _, ifc := range ifs {
				t.ifName[[2]uint32{ino, uint32(ifc.Index)}] = ifc.Name
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("node %s: interfaces: %w", node, err)
		}
	}
	if t.rd, err = ringbuf.NewReader(o.OamRxEvents); err != nil {
		return nil, fmt.Errorf("open oam ring buffer: %w", err)
	}
	if t.lk, err = link.AttachTracing(link.TracingOptions{Program: o.OamRx}); err != nil {
		return nil, fmt.Errorf("attach to net:netif_receive_skb: %w", err)
	}
	if t.drop, err = link.AttachTracing(link.TracingOptions{Program: o.OamDrop}); err != nil {
		return nil, fmt.Errorf("attach to skb:kfree_skb: %w", err)
	}
	t.reason = <-reasons
	return t, nil
}

// Collect implements Tapper.
func (t *RxTap) Collect(deadline time.Time, done func([]Event) bool) ([]Event, error) {
	var out []Event
	t.rd.SetDeadline(deadline)
	for {
		rec, err := t.rd.Read()
		if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, ringbuf.ErrFlushed) || errors.Is(err, errDeadline) || isTimeout(err) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("read oam ring buffer: %w", err)
		}
		var ev oamRXOamRxEvent
		if len(rec.RawSample) < binarySize(ev) {
			continue
		}
		decode(rec.RawSample, &ev)
		node, ok := t.nodeOf[ev.Netns]
		if !ok || ev.Magic != t.magic {
			continue // another namespace's, or a late sighting of the previous trace
		}
		e := Event{At: time.Duration(ev.Ts), Point: Point{Node: node, Iface: t.ifName[[2]uint32{ev.Netns, ev.Ifindex}], Ingress: true},
			Seq: ev.Seq, SRH: ev.Srh == 1, SL: ev.Sl, Encap: ev.Encap == 1, Len: ev.Len}
		if ev.Reason != 0 {
			e.Drop = t.reason[ev.Reason]
			if e.Drop == "" {
				e.Drop = fmt.Sprintf("reason %d", ev.Reason)
			}
		}
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

// Flush implements Flusher: Collect returns once it has read every
// sighting already in the ring buffer.
func (t *RxTap) Flush() {
	if t.rd != nil {
		_ = t.rd.Flush() // an error: the reader is closed, Collect has returned
	}
}

// Close implements Tapper: it detaches the tap and returns its programs
// to the process's pool.
func (t *RxTap) Close() error {
	var errs []error
	for _, l := range []link.Link{t.lk, t.drop} {
		if l != nil {
			errs = append(errs, l.Close())
		}
	}
	if t.rd != nil {
		errs = append(errs, t.rd.Close())
	}
	if t.objs != nil {
		errs = append(errs, putRxObjs(t.objs))
		t.objs = nil
	}
	return errors.Join(errs...)
}

var (
	reasonsOnce sync.Once
	reasonsMap  map[uint32]string
)

// dropReasonsOnce is dropReasons, read once per process (read-only after).
func dropReasonsOnce() map[uint32]string {
	reasonsOnce.Do(func() { reasonsMap = dropReasons() })
	return reasonsMap
}

// dropReasons names the kernel's drop reasons from its BTF (enum
// skb_drop_reason: the values change between kernels), without the
// SKB_DROP_REASON_ prefix.
func dropReasons() map[uint32]string {
	out := map[uint32]string{}
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return out
	}
	var e *btf.Enum
	if err := spec.TypeByName("skb_drop_reason", &e); err != nil {
		return out
	}
	for _, v := range e.Values {
		out[uint32(v.Value)] = strings.TrimPrefix(v.Name, "SKB_DROP_REASON_")
	}
	return out
}
