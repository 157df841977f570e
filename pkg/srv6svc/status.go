package srv6svc

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
)

// Binding is a registered binding as `segchain sid show` lists it.
type Binding struct {
	Slot      int            `json:"slot"`
	Name      string         `json:"name"`
	SIDs      []netip.Prefix `json:"sids"`
	OnFailure string         `json:"on_failure"`
	// State is "serving" (its process is alive), "dead" (the process died
	// without closing: on-failure applies) or "closed".
	State  string `json:"state"`
	PID    int    `json:"pid,omitempty"`
	Kind   string `json:"kind"` // "service" or "End.ASM"
	Batch  bool   `json:"batch"`
	Queues int    `json:"queues"`
	Mode   string `json:"mode"`
	// StaleBypassRoute: an on-failure bypass End route (RouteProtocol) is
	// installed for one of its SIDs while its policy is drop: a process
	// bound it with bypass before. RemoveStaleBypassRoutes removes it.
	StaleBypassRoute bool `json:"stale_bypass_route,omitempty"`
	// USID is the C-SID format the SIDs are served in (Config.CSID,
	// "32/16"), "" for full SIDs.
	USID     string    `json:"usid,omitempty"`
	Since    time.Time `json:"since"`
	Counters Counters  `json:"counters"`
}

// ErrNoBindings is returned by Status when the namespace has no steering
// state at all.
var ErrNoBindings = errors.New("no userspace service bindings")

func kernelCounters(m *ebpf.Map, slot uint32) Counters {
	var per []steerXDPSvcStats
	var c Counters
	if err := m.Lookup(slot, &per); err != nil {
		return c
	}
	for _, s := range per {
		c.Steered += s.Steered
		c.SteeredBytes += s.SteeredBytes
		c.NoSocketDrop += s.NosockDrop
		c.NoSocketBypass += s.NosockBypass
		c.DropMalformed += s.Malformed
		c.TooBig += s.TooBig
		c.CSIDPadding += s.CsidPadding
		c.DropHopLimit += s.HopLimit
	}
	return c
}

type pinnedMaps struct {
	sids, counters, infos *ebpf.Map
}

func openPinned(netns string) (*pinnedMaps, string, error) {
	dir, err := pinDir(netns)
	if err != nil {
		return nil, "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "svc_sids")); err != nil {
		return nil, dir, ErrNoBindings
	}
	var pm pinnedMaps
	for name, mp := range map[string]**ebpf.Map{"svc_sids": &pm.sids, "svc_counters": &pm.counters, "svc_infos": &pm.infos} {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if err != nil {
			pm.close()
			return nil, dir, fmt.Errorf("open pinned map %s: %w", name, err)
		}
		*mp = m
	}
	return &pm, dir, nil
}

func (pm *pinnedMaps) close() {
	for _, m := range []*ebpf.Map{pm.sids, pm.counters, pm.infos} {
		if m != nil {
			m.Close()
		}
	}
}

// Status lists the bindings of netns ("" = the caller's), by slot.
func Status(netns string) ([]Binding, error) {
	pm, _, err := openPinned(netns)
	if err != nil {
		if errors.Is(err, ErrNoBindings) {
			return nil, nil
		}
		return nil, err
	}
	defer pm.close()
	entries, err := readSIDs(pm.sids)
	if err != nil {
		return nil, err
	}
	bySlot := map[uint32]*Binding{}
	for _, e := range entries {
		b := bySlot[e.slot]
		if b == nil {
			b = &Binding{Slot: int(e.slot), OnFailure: "drop"}
			bySlot[e.slot] = b
		}
		b.SIDs = append(b.SIDs, e.prefix)
		if e.flags&flagBypass != 0 {
			b.OnFailure = "bypass"
		}
		if e.csid.ok() {
			b.USID = e.csid.String()
		}
	}
	var routed map[netip.Prefix]bool
	if err := nsutil.Do(netns, func() (err error) { routed, err = bypassRouted(); return err }); err != nil {
		return nil, err
	}
	var out []Binding
	for slot, b := range bySlot {
		if b.OnFailure == "drop" {
			for _, p := range b.SIDs {
				b.StaleBypassRoute = b.StaleBypassRoute || routed[p]
			}
		}
		var in steerXDPSvcInfo
		_ = pm.infos.Lookup(slot, &in)
		b.Name = cString(in.Name[:])
		b.Mode = cString(in.Mode[:])
		b.Queues = int(in.Queues)
		b.Kind = "service"
		if in.Flags&infoASM != 0 {
			b.Kind = "End.ASM"
		}
		b.Batch = in.Flags&infoBatch != 0
		if in.StartedNs != 0 {
			b.Since = time.Unix(0, int64(in.StartedNs)).UTC()
		}
		switch {
		case in.Pid != 0 && alive(in.Pid):
			b.State, b.PID = "serving", int(in.Pid)
		case in.Pid != 0:
			b.State, b.PID = "dead", int(in.Pid)
		default:
			b.State = "closed"
		}
		c := kernelCounters(pm.counters, slot)
		c.RX, c.TX, c.DropVerdict, c.DropTxFull, c.Modified = in.Rx, in.Tx, in.DropVerdict, in.DropTxFull, in.Modified
		c.DropMalformed += in.DropMalformed
		b.Counters = c
		sort.Slice(b.SIDs, func(i, j int) bool { return b.SIDs[i].String() < b.SIDs[j].String() })
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slot < out[j].Slot })
	return out, nil
}

// Unbind removes the binding named name from netns: its SIDs leave the
// steering map, its End routes and loop interface are deleted. A process
// still serving it is refused. When no binding is left, the steering
// program leaves the interfaces and its pins are removed.
func Unbind(netns, name string) error { return unbind(netns, name, false) }

// unbind is Unbind; self also removes a binding this process serves
// (Release).
func unbind(netns, name string, self bool) error {
	pm, dir, err := openPinned(netns)
	if err != nil {
		if errors.Is(err, ErrNoBindings) {
			return fmt.Errorf("binding %q: %w", name, err)
		}
		return err
	}
	defer pm.close()
	entries, err := readSIDs(pm.sids)
	if err != nil {
		return err
	}
	slot := int64(-1)
	for i := uint32(0); i < MaxServices; i++ {
		var in steerXDPSvcInfo
		if pm.infos.Lookup(i, &in) == nil && in.Flags&infoUsed != 0 && cString(in.Name[:]) == name {
			if in.Pid != 0 && alive(in.Pid) && !(self && int(in.Pid) == os.Getpid()) {
				return fmt.Errorf("binding %q is served by pid %d: stop it first", name, in.Pid)
			}
			slot = int64(i)
		}
	}
	if slot < 0 {
		return fmt.Errorf("binding %q not found", name)
	}
	var errs []error
	left := 0
	err = nsutil.Do(netns, func() error {
		for _, e := range entries {
			if e.slot != uint32(slot) {
				left++
				continue
			}
			k := sidKey(e.prefix)
			if err := pm.sids.Delete(&k); err != nil {
				errs = append(errs, err)
			}
			r := &netlink.Route{Dst: &net.IPNet{IP: e.prefix.Addr().AsSlice(), Mask: net.CIDRMask(e.prefix.Bits(), 128)},
				Protocol: RouteProtocol}
			if rs, _ := netlink.RouteListFiltered(netlink.FAMILY_V6, r, netlink.RT_FILTER_DST|netlink.RT_FILTER_PROTOCOL); len(rs) > 0 {
				for _, rr := range rs {
					errs = append(errs, netlink.RouteDel(&rr))
				}
			}
		}
		if l, err := netlink.LinkByName(fmt.Sprintf("%s%d", nodestate.UserspaceLoopPrefix, slot)); err == nil {
			// Its FIB-forwarding flag (svc_fwd, absent in a namespace
			// bound by an older version): an index is reused.
			if m, err := ebpf.LoadPinnedMap(filepath.Join(dir, "svc_fwd"), nil); err == nil {
				if err := m.Delete(uint32(l.Attrs().Index)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
					errs = append(errs, fmt.Errorf("svc_fwd entry %d: %w", l.Attrs().Index, err))
				}
				m.Close()
			}
			for _, idx := range []int{l.Attrs().Index, l.Attrs().ParentIndex} { // the pair's pins
				for _, pre := range []string{xdpPinPrefix, tcxPinPrefix} {
					_ = os.Remove(filepath.Join(dir, fmt.Sprintf("%s%d", pre, idx)))
				}
			}
			errs = append(errs, netlink.LinkDel(l))
		}
		errs = append(errs, pm.infos.Put(uint32(slot), &steerXDPSvcInfo{}))
		var zero []steerXDPSvcStats
		if n, err := ebpf.PossibleCPU(); err == nil {
			zero = make([]steerXDPSvcStats, n)
			errs = append(errs, pm.counters.Put(uint32(slot), zero))
		}
		if left == 0 {
			errs = append(errs, detachAll(dir))
		}
		return nil
	})
	errs = append(errs, err)
	return errors.Join(errs...)
}

// detachAll removes the steering program from every interface and the
// namespace's pins.
func detachAll(dir string) error {
	pins, _ := filepath.Glob(filepath.Join(dir, xdpPinPrefix+"*"))
	tcx, _ := filepath.Glob(filepath.Join(dir, tcxPinPrefix+"*"))
	pins = append(pins, tcx...)
	var errs []error
	for _, p := range pins {
		if lk, err := link.LoadPinnedLink(p, nil); err == nil {
			errs = append(errs, lk.Unpin(), lk.Close())
		} else {
			errs = append(errs, os.Remove(p))
		}
	}
	// Every map pinned there (listing them by name forgot one added
	// later, svc_devs, and left a directory per namespace behind).
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	_ = os.Remove(filepath.Dir(dir))
	return errors.Join(errs...)
}

// bypassRouted lists the SIDs with an on-failure bypass End route (call
// in the namespace).
func bypassRouted() (map[netip.Prefix]bool, error) {
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Protocol: RouteProtocol, Table: unix.RT_TABLE_UNSPEC},
		netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return nil, fmt.Errorf("list bypass routes: %w", err)
	}
	out := map[netip.Prefix]bool{}
	for _, r := range rs {
		if r.Dst == nil {
			continue
		}
		a, _ := netip.AddrFromSlice(r.Dst.IP)
		bits, _ := r.Dst.Mask.Size()
		out[netip.PrefixFrom(a, bits)] = true
	}
	return out, nil
}

// delBypassRoutes removes the on-failure bypass End routes of p (call in
// the namespace).
func delBypassRoutes(p netip.Prefix) error {
	r := &netlink.Route{Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), 128)}, Protocol: RouteProtocol}
	rs, err := netlink.RouteListFiltered(netlink.FAMILY_V6, r, netlink.RT_FILTER_DST|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("list bypass routes of %s: %w", p, err)
	}
	var errs []error
	for _, rr := range rs {
		if err := netlink.RouteDel(&rr); err != nil {
			errs = append(errs, fmt.Errorf("delete bypass route of %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// RemoveStaleBypassRoutes removes, in netns, the on-failure bypass End
// routes of the SIDs whose binding drops on failure (left by a process
// that bound them with bypass before, e.g. an older version).
func RemoveStaleBypassRoutes(netns string) error {
	bs, err := Status(netns)
	if err != nil {
		return err
	}
	return nsutil.Do(netns, func() error {
		var errs []error
		for _, b := range bs {
			if !b.StaleBypassRoute {
				continue
			}
			for _, p := range b.SIDs {
				errs = append(errs, delBypassRoutes(p))
			}
		}
		return errors.Join(errs...)
	})
}
