package oam

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
)

// RouteMarker is O-flag sampling's marker as the chain's headend route
// itself (bpf/oam_sample.bpf.c, oam_encap): the route that held the
// kernel's `encap seg6` holds `encap bpf in` instead, whose program
// pushes the same SRH through the kernel's own encapsulation
// (bpf_lwt_push_encap) and the O-flagged copy on 1 packet in rate. No
// program on any interface: only the chain's forwarded packets pay.
type RouteMarker struct {
	coll  *ebpf.Collection
	prog  *ebpf.Program
	rd    *ringbuf.Reader
	orig  nodestate.Route
	marks atomic.Uint64
	done  chan struct{}
}

// srhMax is oam_encap's OAM_SRH_MAX.
const srhMax = 512

// RouteMarkable says whether a headend route's encapsulation can be
// pushed by oam_encap: H.Encaps and H.Insert of IPv6 (the kernel's BPF
// encapsulation knows no reduced or L2 mode, and gives an IPv4 inner
// packet an IPv6 next header).
func RouteMarkable(r nodestate.Route) error {
	switch {
	case r.Seg6 == nil:
		return fmt.Errorf("route %s: no seg6 encap", r.Dst)
	case !r.Dst.Addr().Is6():
		return fmt.Errorf("route %s: the BPF encapsulation is IPv6 only", r.Dst)
	case r.Seg6.Mode != "encap" && r.Seg6.Mode != "inline":
		return fmt.Errorf("route %s: mode %s: the BPF encapsulation has encap and inline only", r.Dst, r.Seg6.Mode)
	}
	return nil
}

// AttachRouteMarker replaces the headend route r (as the kernel holds it:
// `encap seg6`, in the calling thread's namespace) with oam_encap marking
// 1 in rate (0: none); Close puts r back.
func AttachRouteMarker(r nodestate.Route, rate uint32) (m *RouteMarker, err error) {
	if err := RouteMarkable(r); err != nil {
		return nil, err
	}
	inline := r.Seg6.Mode == "inline"
	srh, err := dataplane.EncodeSRH(r.Seg6.Segs, inline, r.Seg6.HMACKeyID)
	if err != nil {
		return nil, err
	}
	if len(srh) > srhMax {
		return nil, fmt.Errorf("route %s: SRH of %d bytes (at most %d)", r.Dst, len(srh), srhMax)
	}
	var tmpl, tmplO [srhMax]byte
	copy(tmpl[:], srh)
	copy(tmplO[:], srh)
	tmplO[5] |= oflag
	encapType := uint32(unix.BPF_LWT_ENCAP_SEG6)
	if inline {
		encapType = unix.BPF_LWT_ENCAP_SEG6_INLINE
	}
	m, err = loadRouteProg("oam_encap", map[string]any{"oam_srh": tmpl, "oam_srh_o": tmplO, "oam_srh_len": uint32(len(srh)),
		"oam_encap_type": encapType, "oam_rate": rate})
	if err != nil {
		return nil, err
	}
	m.orig = r
	defer func() {
		if err != nil {
			m.coll.Close()
		}
	}()
	if m.rd, err = ringbuf.NewReader(m.coll.Maps["oam_sample_events"]); err != nil {
		return nil, err
	}
	if err := replaceBPFRoute(r, m.prog); err != nil {
		m.rd.Close()
		return nil, fmt.Errorf("route %s: encap bpf in: %w", r.Dst, err)
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

// oflag is the SRH's O-flag (flags bit 2).
const oflag = 0x20

// replaceBPFRoute puts prog as r's `encap bpf in` (same destination,
// table, device, gateway, metric and protocol).
func replaceBPFRoute(r nodestate.Route, prog *ebpf.Program) error {
	enc := &netlink.BpfEncap{}
	if err := enc.SetProg(nl.LWT_BPF_IN, prog.FD(), "oam_encap"); err != nil {
		return err
	}
	nr := &netlink.Route{Dst: prefixNet(r.Dst), Table: r.Table, Priority: r.Metric, Encap: enc, Protocol: netlink.RouteProtocol(nodestate.Proto)}
	if r.Proto != 0 {
		nr.Protocol = netlink.RouteProtocol(r.Proto)
	}
	if r.Dev != "" {
		ifc, err := net.InterfaceByName(r.Dev)
		if err != nil {
			return err
		}
		nr.LinkIndex = ifc.Index
	}
	if r.Via.IsValid() {
		nr.Gw = r.Via.AsSlice()
	}
	return netlink.RouteReplace(nr)
}

func prefixNet(p netip.Prefix) *net.IPNet {
	p = p.Masked()
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Marks is how many marks the reader has read.
func (m *RouteMarker) Marks() uint64 { return m.marks.Load() }

// Counts are the marker's counts.
func (m *RouteMarker) Counts() (SampleCounts, error) {
	var v oamRouteOamChainVal
	if err := m.coll.Maps["oam_chains"].Lookup(uint32(0), &v); err != nil {
		return SampleCounts{}, err
	}
	return SampleCounts{Seen: v.Seen, Marked: v.Marked, HMAC: v.Hmac}, nil
}

// Close puts the kernel's route back and unloads the marker.
func (m *RouteMarker) Close() error {
	h, err := dataplane.Open("")
	if err == nil {
		err = h.ReplaceRoute(m.orig)
		h.Close()
	}
	err = errors.Join(err, m.rd.Close())
	<-m.done
	m.coll.Close()
	return err
}

// loadRouteProg loads one program of bpf/oam_route.bpf.c (the others
// stay unloaded) with its constants.
func loadRouteProg(prog string, vars map[string]any) (*RouteMarker, error) {
	spec, err := loadOamRoute()
	if err != nil {
		return nil, err
	}
	for name, v := range vars {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	for n := range spec.Programs {
		if n != prog {
			delete(spec.Programs, n)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", prog, err)
	}
	return &RouteMarker{coll: coll, prog: coll.Programs[prog], done: make(chan struct{})}, nil
}

// SIDTap is the segment nodes' tap as a tracing program on the kernel's
// seg6local input (oam_sid_tap): every O-flagged packet to a local SID of
// any namespace is reported; no program on any interface.
type SIDTap struct {
	m  *RouteMarker
	lk link.Link
}

// AttachSIDTap attaches oam_sid_tap, its events read and counted.
func AttachSIDTap() (t *SIDTap, err error) {
	m, err := loadRouteProg("oam_sid_tap", nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			m.coll.Close()
		}
	}()
	lk, err := link.AttachTracing(link.TracingOptions{Program: m.prog})
	if err != nil {
		return nil, fmt.Errorf("attach oam_sid_tap: %w", err)
	}
	if m.rd, err = ringbuf.NewReader(m.coll.Maps["oam_sample_events"]); err != nil {
		lk.Close()
		return nil, err
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
	return &SIDTap{m: m, lk: lk}, nil
}

// Seen is how many sightings the reader has read.
func (t *SIDTap) Seen() uint64 { return t.m.marks.Load() }

// Close detaches the tap.
func (t *SIDTap) Close() error {
	err := t.lk.Close()
	err = errors.Join(err, t.m.rd.Close())
	<-t.m.done
	t.m.coll.Close()
	return err
}

// AttachXmitRoute is a measurement (segchain perf's T.Encaps.xmit), not
// a marker sampling uses: r's destination as `encap bpf xmit` via gw, the
// program (oam_encap_xmit) pushing the outer IPv6 header from src with
// hopLimit and r's SRH, the O-flagged copy on 1 in rate. It computes no
// HMAC and cannot encapsulate GSO packets (the kernel's BPF_LWT_ENCAP_IP
// knows no routing header): what a headend route without the next-hop
// lookup would cost. Close puts r back.
func AttachXmitRoute(r nodestate.Route, src, gw netip.Addr, hopLimit uint8, rate uint32) (m *RouteMarker, err error) {
	if err := RouteMarkable(r); err != nil || r.Seg6.Mode != "encap" || r.Seg6.HMACKeyID != 0 {
		return nil, fmt.Errorf("route %s: the xmit measurement pushes H.Encaps without HMAC only", r.Dst)
	}
	srh, err := dataplane.EncodeSRH(r.Seg6.Segs, false, 0)
	if err != nil {
		return nil, err
	}
	srh[0] = unix.IPPROTO_IPV6 // the kernel fills it; here the program's header is final
	hdr := make([]byte, 40, 40+len(srh))
	hdr[0] = 0x60
	hdr[6] = unix.IPPROTO_ROUTING
	hdr[7] = hopLimit
	copy(hdr[8:24], src.AsSlice())
	first := r.Seg6.Segs[0].As16()
	copy(hdr[24:40], first[:])
	hdr = append(hdr, srh...)
	if len(hdr) > srhMax {
		return nil, fmt.Errorf("route %s: header of %d bytes (at most %d)", r.Dst, len(hdr), srhMax)
	}
	var tmpl, tmplO [srhMax]byte
	copy(tmpl[:], hdr)
	copy(tmplO[:], hdr)
	tmplO[40+5] |= oflag
	m, err = loadRouteProg("oam_encap_xmit", map[string]any{"oam_hdr": tmpl, "oam_hdr_o": tmplO, "oam_hdr_len": uint32(len(hdr)), "oam_rate": rate})
	if err != nil {
		return nil, err
	}
	m.orig = r
	defer func() {
		if err != nil {
			m.coll.Close()
		}
	}()
	if m.rd, err = ringbuf.NewReader(m.coll.Maps["oam_sample_events"]); err != nil {
		return nil, err
	}
	enc := &netlink.BpfEncap{}
	if err = enc.SetProg(nl.LWT_BPF_XMIT, m.prog.FD(), "oam_encap_xmit"); err == nil {
		err = enc.SetXmitHeadroom(len(hdr))
	}
	if err != nil {
		m.rd.Close()
		return nil, err
	}
	ifc, err := net.InterfaceByName(r.Dev)
	if err != nil {
		m.rd.Close()
		return nil, err
	}
	nr := &netlink.Route{Dst: prefixNet(r.Dst), Table: r.Table, LinkIndex: ifc.Index, Gw: gw.AsSlice(), Encap: enc}
	if err := netlink.RouteReplace(nr); err != nil {
		m.rd.Close()
		return nil, fmt.Errorf("route %s: encap bpf xmit: %w", r.Dst, err)
	}
	go func() {
		defer close(m.done)
		for {
			if _, err := m.rd.Read(); err != nil {
				return
			}
		}
	}()
	return m, nil
}

// TCXTap is session 10's tap program (oam_sampled, TCX ingress) alone,
// loaded and not attached (segchain perf oam attaches it per arm).
func TCXTap() (*ebpf.Program, func(), error) {
	var objs oamSampleObjects
	if err := loadOamSampleObjects(&objs, nil); err != nil {
		return nil, nil, fmt.Errorf("load the tap: %w", err)
	}
	return objs.OamSampled, func() { objs.Close() }, nil
}
