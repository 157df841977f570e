package oam

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
)

// Marker is the headend's O-flag marker alone on one interface, its
// marks read and counted (segchain perf's T.Encaps.oam arm: the cost of
// sampling at the headend).
type Marker struct {
	objs  oamSampleObjects
	lk    link.Link
	rd    *ringbuf.Reader
	marks atomic.Uint64
	done  chan struct{}
}

// AttachMarker attaches the marker for key at rate first in the TCX
// egress chain of iface, in the calling thread's namespace.
func AttachMarker(iface string, key ChainKey, rate uint32) (m *Marker, err error) {
	spec, err := loadOamSample()
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]any{"oam_first": key.First, "oam_last": key.Last, "oam_rate": rate} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	m = &Marker{done: make(chan struct{})}
	if err := spec.LoadAndAssign(&m.objs, nil); err != nil {
		return nil, fmt.Errorf("load the marker: %w", err)
	}
	defer func() {
		if err != nil {
			m.objs.Close()
		}
	}()
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	if m.rd, err = ringbuf.NewReader(m.objs.OamSampleEvents); err != nil {
		return nil, err
	}
	if m.lk, err = link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: m.objs.OamMark, Attach: ebpf.AttachTCXEgress, Anchor: link.Head()}); err != nil {
		m.rd.Close()
		return nil, fmt.Errorf("%s: attach the marker: %w", iface, err)
	}
	go func() {
		defer close(m.done)
		for {
			if _, err := m.rd.Read(); err != nil {
				return
			}
			m.marks.Add(1)
		}
	}()
	return m, nil
}

// Counts are the marker's counts.
func (m *Marker) Counts() (SampleCounts, error) {
	var v oamSampleOamChainVal
	if err := m.objs.OamChains.Lookup(uint32(0), &v); err != nil {
		return SampleCounts{}, err
	}
	return SampleCounts{Seen: v.Seen, Marked: v.Marked, HMAC: v.Hmac}, nil
}

// Close detaches the marker.
func (m *Marker) Close() error {
	err := m.lk.Close()
	err = errors.Join(err, m.rd.Close())
	<-m.done
	return errors.Join(err, m.objs.Close())
}
