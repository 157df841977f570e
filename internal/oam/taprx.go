package oam

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
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
	objs   oamRXObjects
	lk     link.Link
	drop   link.Link
	reason map[uint32]string // enum skb_drop_reason, from the kernel's BTF
	rd     *ringbuf.Reader
	nodeOf map[uint32]string // netns inode → node
	ifName map[[2]uint32]string
}

// AttachRx loads and attaches the tracepoint tap for the namespaces of
// netns (node → namespace).
func AttachRx(netns map[string]string, magic uint64) (t *RxTap, err error) {
	spec, err := loadOamRX()
	if err != nil {
		return nil, fmt.Errorf("load oam tracepoint program spec: %w", err)
	}
	if err := spec.Variables["oam_magic"].Set(magic); err != nil {
		return nil, fmt.Errorf("set oam_magic: %w", err)
	}
	t = &RxTap{nodeOf: map[uint32]string{}, ifName: map[[2]uint32]string{}}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("load oam tracepoint program: %w", err)
	}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	for node, ns := range netns {
		st, err := os.Stat(nsutil.Path(ns))
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		ino := uint32(st.Sys().(*syscall.Stat_t).Ino)
		t.nodeOf[ino] = node
		if err := t.objs.OamNodes.Put(ino, uint32(1)); err != nil {
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
	if t.lk, err = link.AttachTracing(link.TracingOptions{Program: t.objs.OamRx}); err != nil {
		return nil, fmt.Errorf("attach to net:netif_receive_skb: %w", err)
	}
	if t.drop, err = link.AttachTracing(link.TracingOptions{Program: t.objs.OamDrop}); err != nil {
		return nil, fmt.Errorf("attach to skb:kfree_skb: %w", err)
	}
	t.reason = dropReasons()
	if t.rd, err = ringbuf.NewReader(t.objs.OamRxEvents); err != nil {
		return nil, fmt.Errorf("open oam ring buffer: %w", err)
	}
	return t, nil
}

// Collect implements Tapper.
func (t *RxTap) Collect(deadline time.Time, done func([]Event) bool) ([]Event, error) {
	var out []Event
	t.rd.SetDeadline(deadline)
	for {
		rec, err := t.rd.Read()
		if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, errDeadline) || isTimeout(err) {
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
		if !ok {
			continue
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

// Close implements Tapper.
func (t *RxTap) Close() error {
	var errs []error
	if t.rd != nil {
		errs = append(errs, t.rd.Close())
	}
	for _, l := range []link.Link{t.lk, t.drop} {
		if l != nil {
			errs = append(errs, l.Close())
		}
	}
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
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
