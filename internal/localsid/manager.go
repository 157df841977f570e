package localsid

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// Node is what `segchain sid` asks of one node's local SIDs. Arguments and
// results are plain data, so that an agent can serve it over its RPC as
// Manager serves it in-process; the CLI only parses flags and prints.
type Node interface {
	// Add installs the SID that args (SID BEHAVIOR [PARAMS...], the
	// syntax of Parse) describe; it fails if the SID exists.
	Add(ctx context.Context, args []string) (Added, error)
	// Del removes a hand-made SID; the domain's and other tools' are refused.
	Del(ctx context.Context, sid netip.Prefix) error
	// Show lists the node's SIDs (one SID's with filter), the boundary
	// filter's drops when filter is nil.
	Show(ctx context.Context, filter *netip.Prefix) ([]Row, error)
	// Flush removes every hand-made SID and returns how many.
	Flush(ctx context.Context) (int, error)
	// ClearCounters resets the counters of one SID or of all (with the
	// boundary filter's) and returns how many SIDs it reset.
	ClearCounters(ctx context.Context, filter *netip.Prefix) (int, error)
}

// Added is what Add installed.
type Added struct {
	SID     string `json:"sid"`               // the SID and behaviour as show prints them
	Warning string `json:"warning,omitempty"` // a reason the SID may not work as is
}

// Row is one SID as `sid show` lists it: the entry (-o json) and its line.
type Row struct {
	Entry Entry  `json:"entry"`
	Text  string `json:"text"`
}

// BindingDeleter is an Extension whose SIDs a process binds (userspace
// services) rather than sid add: Del hands it a dead binding to remove,
// bypass route included.
type BindingDeleter interface {
	DelBinding(netns string, sid netip.Prefix) (bool, error)
}

// Manager is the Node of one network namespace, and the one place holding
// the ownership rules of local SIDs: a SID sid add installs is hand-made
// (route protocol nodestate.ProtoManual, or the HandMade record for the
// eBPF SIDs of Exts); del and flush touch only those; the domain's
// (segchain apply) and other tools' are shown, never changed.
type Manager struct {
	Netns    string      // "" = the current namespace
	NodeName string      // the node as messages name it (default: the namespace, or the host name)
	Exts     []Extension // behaviours served in eBPF

	// features stands in for the kernel probe in tests (nil: Handle.Probe).
	features func(*dataplane.Handle) dataplane.Features
}

var _ Node = (*Manager)(nil)

func (m *Manager) nsName() string {
	if m.Netns == "" {
		return "current"
	}
	return m.Netns
}

func (m *Manager) nodeName() string {
	if m.NodeName != "" {
		return m.NodeName
	}
	if m.Netns != "" {
		return m.Netns
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h // the current namespace: the kernel is the host's anyway
	}
	return "current"
}

func (m *Manager) open() (*dataplane.Handle, error) {
	h, err := dataplane.Open(m.Netns)
	if err != nil {
		return nil, fmt.Errorf("open netns %q: %w", m.nsName(), err)
	}
	return h, nil
}

func (m *Manager) probe(h *dataplane.Handle) dataplane.Features {
	if m.features != nil {
		return m.features(h)
	}
	return h.Probe()
}

func (m *Manager) localSIDs(h *dataplane.Handle) ([]dataplane.LocalSID, error) {
	sids, err := h.LocalSIDs()
	if err != nil {
		return nil, fmt.Errorf("list local sids: %w", err)
	}
	return sids, nil
}

// Add implements Node.
func (m *Manager) Add(_ context.Context, args []string) (Added, error) {
	if len(args) > 2 && args[1] == "action" { // iproute2: ip -6 route add SID encap seg6local action End.X ...
		args = append(args[:1:1], args[2:]...)
	}
	if len(args) < 2 {
		return Added{}, errors.New("want SID[/LEN] BEHAVIOR [PARAMS...]")
	}
	if ext, canon := FindExtension(m.Exts, args[1]); ext != nil {
		sid, err := ParseSID(args[0])
		if err != nil {
			return Added{}, err
		}
		if err := ext.Add(m.Netns, sid, canon, args[2:]); err != nil {
			return Added{}, fmt.Errorf("add %s %s: %w", sid, canon, err)
		}
		// eBPF SIDs carry no route protocol: the ownership record tells
		// apply and destroy to leave this one alone.
		if err := MarkHandMade(m.Netns, sid, canon); err != nil {
			return Added{}, fmt.Errorf("add %s %s: record it as hand-made: %w", sid, canon, err)
		}
		return Added{SID: fmt.Sprintf("%s %s", sid, canon)}, nil
	}
	r, err := Parse(args)
	if err != nil {
		return Added{}, err
	}
	h, err := m.open()
	if err != nil {
		return Added{}, err
	}
	defer h.Close()
	// The one feature check apply's preflight makes too, in its words.
	if dataplane.NeedsProbe(r) {
		if err := m.probe(h).Explain(r, m.nodeName()); err != nil {
			return Added{}, err
		}
	}
	sids, err := m.localSIDs(h)
	if err != nil {
		return Added{}, err
	}
	for _, l := range sids {
		if l.Route.Dst == r.Dst && l.Route.Table == r.Table {
			if nodestate.Owned(l.Protocol) {
				return Added{}, fmt.Errorf("sid %s already exists and belongs to the domain (%s, installed by segchain apply)", r.Dst, Format(l.Route, nil))
			}
			return Added{}, fmt.Errorf("sid %s already exists (%s); del it first", r.Dst, Format(l.Route, nil))
		}
	}
	if err := h.ReplaceRouteAs(r, nodestate.ProtoManual); err != nil {
		return Added{}, fmt.Errorf("add %s: %w", r.Dst, err)
	}
	a := Added{SID: Format(r, nil)}
	if v, err := h.Sysctl("net.ipv6.conf.all.forwarding"); err == nil && strings.TrimSpace(v) == "0" {
		a.Warning = "net.ipv6.conf.all.forwarding is 0 in this namespace: SRv6 packets will not be forwarded"
	}
	return a, nil
}

// Del implements Node.
func (m *Manager) Del(_ context.Context, sid netip.Prefix) error {
	for _, e := range m.Exts {
		if u, ok := e.(BindingDeleter); ok {
			if done, err := u.DelBinding(m.Netns, sid); err != nil {
				return fmt.Errorf("del %s: %w", sid, err)
			} else if done {
				return nil
			}
		}
	}
	h, err := m.open()
	if err != nil {
		return err
	}
	defer h.Close()
	sids, err := m.localSIDs(h)
	if err != nil {
		return err
	}
	n := 0
	for _, l := range sids {
		if l.Route.Dst != sid {
			continue
		}
		switch {
		case nodestate.HandMade(l.Protocol):
		case nodestate.Owned(l.Protocol):
			return fmt.Errorf("sid %s belongs to the domain (installed by segchain apply): remove it from the domain file and apply, or segchain destroy", sid)
		default:
			return fmt.Errorf("sid %s was not installed by segchain (route protocol %s): remove it with ip -6 route del", sid, ProtoName(l.Protocol))
		}
		if err := h.DeleteRouteAs(l.Route, l.Protocol); err != nil {
			return fmt.Errorf("del %s: %w", sid, err)
		}
		n++
	}
	hm, err := HandMade(m.Netns)
	if err != nil {
		return err
	}
	_, mine := hm[sid]
	for _, e := range m.Exts {
		if !mine {
			if err := m.refuseDomainExt(e, sid); err != nil {
				return err
			}
			continue
		}
		ok, err := e.Del(m.Netns, sid)
		if err != nil {
			return fmt.Errorf("del %s: %w", sid, err)
		}
		if ok {
			n++
		}
	}
	if mine {
		if err := MarkHandMade(m.Netns, sid, ""); err != nil {
			return err
		}
	}
	if n == 0 {
		return fmt.Errorf("sid %s not found in netns %s", sid, m.nsName())
	}
	return nil
}

// refuseDomainExt fails when extension e serves sid but did not get it from
// sid add: it is the domain's (segchain apply), not ours to delete.
func (m *Manager) refuseDomainExt(e Extension, sid netip.Prefix) error {
	entries, err := showExt(e, m.Netns)
	if err != nil {
		return err
	}
	for _, en := range entries {
		if en.SID == sid {
			return fmt.Errorf("sid %s (%s) belongs to the domain (installed by segchain apply): remove it from the domain file and apply, or segchain destroy", sid, en.Behavior)
		}
	}
	return nil
}

func showExt(e Extension, netns string) ([]Entry, error) {
	entries, err := e.Show(netns)
	if err != nil {
		return nil, fmt.Errorf("show %s: %w", strings.Join(e.Behaviors(), "/"), err)
	}
	return entries, nil
}

// Show implements Node: native SIDs annotated with their owner, the
// extensions' SIDs, and without filter the boundary filter's drops,
// sorted by SID.
func (m *Manager) Show(_ context.Context, filter *netip.Prefix) ([]Row, error) {
	h, err := m.open()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	sids, err := m.localSIDs(h)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, l := range sids {
		if filter != nil && l.Route.Dst != *filter {
			continue
		}
		text := Format(l.Route, l.Counters)
		switch {
		case nodestate.HandMade(l.Protocol):
		case nodestate.Owned(l.Protocol):
			text += "  [domain: installed by segchain apply]"
		case l.Protocol == srv6svc.RouteProtocol:
			text += "  [on-failure bypass route of a userspace service]"
		default:
			text += fmt.Sprintf("  [proto %s: not installed by segchain]", ProtoName(l.Protocol))
		}
		rows = append(rows, Row{Entry: NativeEntry(l.Route, l.Protocol, l.Counters), Text: text})
	}
	for _, e := range m.Exts {
		entries, err := showExt(e, m.Netns)
		if err != nil {
			return nil, err
		}
		for _, en := range entries {
			if filter != nil && en.SID != *filter {
				continue
			}
			rows = append(rows, Row{Entry: en, Text: FormatEntry(en)})
		}
	}
	if filter == nil {
		b, err := boundaryRows(m.Netns)
		if err != nil {
			return nil, err
		}
		rows = append(rows, b...)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].Entry.SID, rows[j].Entry.SID
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c < 0
		}
		return a.Bits() < b.Bits()
	})
	if filter != nil && len(rows) == 0 {
		return nil, fmt.Errorf("sid %s not found in netns %s", *filter, m.nsName())
	}
	return rows, nil
}

// boundaryRows are the drops of the namespace's SR domain boundary filter,
// one row per interface and direction with a counter per reason (SID ::/0:
// the filter covers every destination on the interface).
func boundaryRows(netns string) ([]Row, error) {
	cs, err := boundary.Counters(netns)
	if err != nil {
		return nil, fmt.Errorf("boundary counters: %w", err)
	}
	byKey := map[[2]string]*Entry{}
	var keys [][2]string
	for _, c := range cs {
		k := [2]string{c.Iface, c.Direction}
		e := byKey[k]
		if e == nil {
			e = &Entry{SID: netip.PrefixFrom(netip.IPv6Unspecified(), 0), Behavior: "boundary",
				Params: map[string]string{"dev": c.Iface, "dir": c.Direction}, Counters: map[string]uint64{}}
			byKey[k] = e
			keys = append(keys, k)
		}
		e.Counters[c.Reason] += c.Packets
		e.Counters["bytes"] += c.Bytes
	}
	var rows []Row
	for _, k := range keys {
		rows = append(rows, Row{Entry: *byKey[k], Text: FormatEntry(*byKey[k])})
	}
	return rows, nil
}

// ProtoName is the name iproute2 gives a route protocol number, or the number.
func ProtoName(p int) string {
	switch p {
	case 2:
		return "kernel"
	case 3:
		return "boot"
	case 4:
		return "static"
	}
	return fmt.Sprint(p)
}

// Flush implements Node: the hand-made SIDs only, the domain's and other
// tools' stay. It goes on past a SID it cannot remove and returns every
// such error with the count of those it removed.
func (m *Manager) Flush(_ context.Context) (int, error) {
	h, err := m.open()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	sids, err := m.localSIDs(h)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, l := range sids {
		if !nodestate.HandMade(l.Protocol) {
			continue
		}
		if err := h.DeleteRouteAs(l.Route, l.Protocol); err != nil {
			errs = append(errs, fmt.Errorf("del %s: %w", l.Route.Dst, err))
			continue
		}
		n++
	}
	hm, err := HandMade(m.Netns)
	if err != nil {
		return n, errors.Join(append(errs, err)...)
	}
	for _, e := range m.Exts {
		entries, err := showExt(e, m.Netns)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, en := range entries {
			if _, mine := hm[en.SID]; !mine {
				continue
			}
			if _, err := e.Del(m.Netns, en.SID); err != nil {
				errs = append(errs, fmt.Errorf("del %s: %w", en.SID, err))
				continue
			}
			if err := MarkHandMade(m.Netns, en.SID, ""); err != nil {
				errs = append(errs, err)
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}

// ClearCounters implements Node.
func (m *Manager) ClearCounters(_ context.Context, filter *netip.Prefix) (int, error) {
	h, err := m.open()
	if err != nil {
		return 0, err
	}
	defer h.Close()
	sids, err := m.localSIDs(h)
	if err != nil {
		return 0, err
	}
	n, found := 0, false
	if filter == nil {
		if err := boundary.ClearCounters(m.Netns); err != nil {
			return 0, fmt.Errorf("clear boundary counters: %w", err)
		}
	}
	for _, l := range sids {
		if filter != nil && l.Route.Dst != *filter {
			continue
		}
		found = true
		if l.Counters == nil {
			continue
		}
		if err := h.ClearCounters(l.Route); err != nil {
			return 0, fmt.Errorf("clear counters of %s: %w", l.Route.Dst, err)
		}
		n++
	}
	for _, e := range m.Exts {
		if filter != nil {
			entries, err := showExt(e, m.Netns)
			if err != nil {
				return 0, err
			}
			mine := false
			for _, en := range entries {
				mine = mine || en.SID == *filter
			}
			if !mine {
				continue
			}
			found = true
		}
		if err := e.ClearCounters(m.Netns, filter); err != nil {
			return 0, fmt.Errorf("clear counters: %w", err)
		}
		n++
	}
	if filter != nil && !found {
		return 0, fmt.Errorf("sid %s not found in netns %s", *filter, m.nsName())
	}
	return n, nil
}
