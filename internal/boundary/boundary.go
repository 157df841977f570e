package boundary

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
)

// ErrNotSupported wraps a kernel without TCX.
var ErrNotSupported = errors.New("boundary filter not supported by this kernel (needs TCX, Linux >= 6.6)")

// StateRoot keeps each namespace's trusted interface list (bpffs holds only
// pins): StateRoot/ns-<inode>-<cookie>.json.
const StateRoot = "/run/segchain/boundary"

const program = "boundary"

// loader is the boundary filter's pinned state in a namespace.
var loader = bpfpin.Program{Name: program, What: "boundary", Flush: "segchain destroy", Load: bpfpin.Parsed(loadBoundaryTC)}

// Direction is "out" for reasons counted on egress, "hmac" for the HMAC
// classifier's, "in" otherwise.
func (r DropReason) Direction() string {
	switch r {
	case DropLeakSID:
		return "out"
	case DropHMACMissing, DropHMACMalformed, DropHMACUnknownKey, DropHMACMisplaced:
		return "hmac"
	}
	return "in"
}

type node struct {
	netns string
	name  string
	dir   string
	objs  boundaryTCObjects
	// spec is the collection the programs are loaded from when an
	// interface first needs one (program).
	spec *ebpf.CollectionSpec
}

func stateFile(name string) string { return filepath.Join(StateRoot, name+".json") }

// open opens the pinned maps of netns; with create it makes them (the
// programs are loaded when attach needs them), else it returns nil when
// nothing is installed.
func open(netns string, create bool) (*node, error) {
	// With create, the state of deleted namespaces goes first: one whose
	// inode this one inherited, or whose links all lost their interface.
	name, dir, err := loader.Dir(netns, create, func(d string) {
		_ = bpfpin.Remove(d)
		_ = os.Remove(stateFile(filepath.Base(filepath.Dir(d))))
	})
	if err != nil {
		return nil, err
	}
	n := &node{netns: netns, name: name, dir: dir}
	if !create {
		if _, err := os.Stat(filepath.Join(n.dir, "bnd_lpm")); err != nil {
			return nil, nil
		}
	}
	spec, err := loader.Spec()
	if err != nil {
		return nil, err
	}
	if err := loader.Assign(spec, &n.objs.boundaryTCMaps, n.dir); err != nil {
		return nil, err
	}
	n.spec = spec
	return n, nil
}

// openRead is open(netns, false) for reading the maps only (Observe: an
// agent's every request): the pinned maps opened as they are, their
// layout checked (bpfpin.OpenPinned), without a copy of the spec; any
// doubt goes through open, which says what is wrong.
func openRead(netns string) (*node, error) {
	name, dir, err := loader.Dir(netns, false, nil)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "bnd_lpm")); err != nil {
		return nil, nil
	}
	n := &node{netns: netns, name: name, dir: dir}
	if err := loader.OpenPinned(&n.objs.boundaryTCMaps, dir); err != nil {
		return open(netns, false)
	}
	return n, nil
}

// program returns the named program of the filter, loading (verifying)
// it the first time: an apply loads only what it attaches — nothing when
// every link is in place, not hmac_in without HMAC SIDs, never
// boundary_xdp (measured by perf boundary, never attached). Verifying is
// most of what applying the boundary costs.
func (n *node) program(name string) (*ebpf.Program, error) {
	var slot **ebpf.Program
	switch name {
	case "boundary_in":
		slot = &n.objs.BoundaryIn
	case "boundary_out":
		slot = &n.objs.BoundaryOut
	case "hmac_in":
		slot = &n.objs.HmacIn
	default:
		return nil, fmt.Errorf("boundary: no program %q", name)
	}
	if *slot != nil {
		return *slot, nil
	}
	if n.spec == nil {
		return nil, fmt.Errorf("boundary: program %s: maps opened without a spec", name)
	}
	var err error
	switch name {
	case "boundary_in":
		var o struct {
			P *ebpf.Program `ebpf:"boundary_in"`
		}
		err = loader.Assign(n.spec, &o, n.dir)
		*slot = o.P
	case "boundary_out":
		var o struct {
			P *ebpf.Program `ebpf:"boundary_out"`
		}
		err = loader.Assign(n.spec, &o, n.dir)
		*slot = o.P
	case "hmac_in":
		var o struct {
			P *ebpf.Program `ebpf:"hmac_in"`
		}
		err = loader.Assign(n.spec, &o, n.dir)
		*slot = o.P
	}
	if err != nil {
		return nil, err
	}
	return *slot, nil
}

func (n *node) close() { _ = n.objs.Close() }

func pin(dir string, ifindex int, dir2 string) string {
	return filepath.Join(dir, fmt.Sprintf("tcx-%d-%s", ifindex, dir2))
}

// iface is a non-loopback interface of the namespace.
type iface struct {
	index int
	name  string
}

func interfaces(netns string) ([]iface, error) {
	var out []iface
	err := nsutil.Do(netns, func() error {
		l, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, i := range l {
			if i.Flags&net.FlagLoopback == 0 {
				out = append(out, iface{i.Index, i.Name})
			}
		}
		return nil
	})
	return out, err
}

func unpin(p string) error {
	lk, err := link.LoadPinnedLink(p, nil)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return os.Remove(p) // defunct: the interface is gone
	}
	defer lk.Close()
	return lk.Unpin()
}

// Apply installs or updates the boundary of netns: the destination table
// first, then the filter on every boundary interface (ingress at the head
// of the TCX chain, so it runs before the firewall and the proxies, and
// egress), and off every interface that is now trusted.
func Apply(netns string, b nodestate.Boundary) error {
	n, err := open(netns, true)
	if err != nil {
		return err
	}
	defer n.close()
	if err := n.sync(b); err != nil {
		return err
	}
	if err := n.attach(b.Trusted, len(b.HMACSIDs) > 0); err != nil {
		return err
	}
	if err := os.MkdirAll(StateRoot, 0o755); err != nil {
		return err
	}
	st, _ := json.Marshal(b.Trusted)
	return os.WriteFile(stateFile(n.name), st, 0o644)
}

func lpmKey(p netip.Prefix) boundaryTCBndKey {
	k := boundaryTCBndKey{Prefixlen: uint32(p.Bits())}
	k.Addr.In6U.U6Addr8 = p.Masked().Addr().As16()
	return k
}

func keyPrefix(k boundaryTCBndKey) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom16(k.Addr.In6U.U6Addr8), int(k.Prefixlen))
}

func wanted(b nodestate.Boundary) map[netip.Prefix]uint32 {
	w := map[netip.Prefix]uint32{}
	for _, a := range b.Nodes {
		w[netip.PrefixFrom(a, 128)] = uint32(boundaryTCBndKindBND_NODE)
	}
	for _, a := range b.SFs {
		w[netip.PrefixFrom(a, 128)] = uint32(boundaryTCBndKindBND_SF)
	}
	for _, p := range b.Locators {
		w[p.Masked()] = uint32(boundaryTCBndKindBND_SID)
	}
	for _, p := range b.External {
		w[p.Masked()] = uint32(boundaryTCBndKindBND_EXTERNAL)
	}
	return w
}

func (n *node) entries() (map[netip.Prefix]uint32, error) {
	// In batches (a few syscalls for the whole table: observation reads
	// it on every request), else key by key on a kernel without batch
	// lookups on LPM tries.
	got, err := n.batchEntries()
	if err == nil {
		return got, nil
	}
	if !errors.Is(err, ebpf.ErrNotSupported) {
		return nil, fmt.Errorf("read boundary table: %w", err)
	}
	return n.iterEntries()
}

func (n *node) iterEntries() (map[netip.Prefix]uint32, error) {
	got := map[netip.Prefix]uint32{}
	var (
		k boundaryTCBndKey
		v boundaryTCBndDest
	)
	it := n.objs.BndLpm.Iterate()
	for it.Next(&k, &v) {
		got[keyPrefix(k)] = v.Kind
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read boundary table: %w", err)
	}
	return got, nil
}

func (n *node) batchEntries() (map[netip.Prefix]uint32, error) {
	const chunk = 256
	got := map[netip.Prefix]uint32{}
	keys := make([]boundaryTCBndKey, chunk)
	vals := make([]boundaryTCBndDest, chunk)
	var cursor ebpf.MapBatchCursor
	for {
		c, err := n.objs.BndLpm.BatchLookup(&cursor, keys, vals, nil)
		for i := range c {
			got[keyPrefix(keys[i])] = vals[i].Kind
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return got, nil // the end of the table
		}
		if err != nil {
			return nil, err
		}
	}
}

// sync makes the destination table hold exactly b's prefixes. Updates come
// before deletions, so a prefix that stays is never missing.
func (n *node) sync(b nodestate.Boundary) error {
	got, err := n.entries()
	if err != nil {
		return err
	}
	want := wanted(b)
	for p, kind := range want {
		if got[p] == kind {
			continue
		}
		if err := n.objs.BndLpm.Put(lpmKey(p), boundaryTCBndDest{Kind: kind}); err != nil {
			return fmt.Errorf("boundary table: add %s: %w", p, err)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			if err := n.objs.BndLpm.Delete(lpmKey(p)); err != nil {
				return fmt.Errorf("boundary table: delete %s: %w", p, err)
			}
		}
	}
	return n.syncHMAC(b)
}

// syncHMAC makes the HMAC classifier's tables hold exactly b's signed SIDs
// and key ids.
func (n *node) syncHMAC(b nodestate.Boundary) error {
	sids, keys, err := n.hmacEntries()
	if err != nil {
		return err
	}
	want := map[netip.Prefix]bool{}
	for _, p := range b.HMACSIDs {
		want[p.Masked()] = true
		if err := n.objs.BndHmacSids.Put(lpmKey(p), uint32(1)); err != nil {
			return fmt.Errorf("hmac sids: add %s: %w", p, err)
		}
	}
	for _, p := range sids {
		if !want[p] {
			if err := n.objs.BndHmacSids.Delete(lpmKey(p)); err != nil {
				return fmt.Errorf("hmac sids: delete %s: %w", p, err)
			}
		}
	}
	wantK := map[uint32]bool{}
	for _, k := range b.HMACKeys {
		wantK[k] = true
		if err := n.objs.BndHmacKeys.Put(k, uint32(1)); err != nil {
			return fmt.Errorf("hmac keys: add %d: %w", k, err)
		}
	}
	for _, k := range keys {
		if !wantK[k] {
			if err := n.objs.BndHmacKeys.Delete(k); err != nil {
				return fmt.Errorf("hmac keys: delete %d: %w", k, err)
			}
		}
	}
	return nil
}

func (n *node) hmacEntries() ([]netip.Prefix, []uint32, error) {
	var (
		k    boundaryTCBndKey
		v    uint32
		sids []netip.Prefix
		keys []uint32
		id   uint32
	)
	it := n.objs.BndHmacSids.Iterate()
	for it.Next(&k, &v) {
		sids = append(sids, keyPrefix(k))
	}
	if err := it.Err(); err != nil {
		return nil, nil, fmt.Errorf("read hmac sids: %w", err)
	}
	it = n.objs.BndHmacKeys.Iterate()
	for it.Next(&id, &v) {
		keys = append(keys, id)
	}
	if err := it.Err(); err != nil {
		return nil, nil, fmt.Errorf("read hmac keys: %w", err)
	}
	return sids, keys, nil
}

// attachment is one program on one hook of an interface, pinned as
// tcx-<ifindex>-<name>.
type attachment struct {
	name   string
	prog   string // the program's name (node.program loads it)
	at     ebpf.AttachType
	anchor link.Anchor
}

// wantedOn lists what an interface needs: the filter both ways unless it
// is trusted, and the HMAC classifier everywhere when hmac.
func (n *node) wantedOn(trusted, hmac bool) []attachment {
	var out []attachment
	if !trusted {
		out = append(out,
			attachment{"in", "boundary_in", ebpf.AttachTCXIngress, link.Head()},
			attachment{"out", "boundary_out", ebpf.AttachTCXEgress, link.Tail()})
	}
	if hmac {
		out = append(out, attachment{"hmac", "hmac_in", ebpf.AttachTCXIngress, link.Tail()})
	}
	return out
}

// trustSet tells whether an interface name is trusted: equal to an entry,
// or matching an entry that is a shell pattern (path.Match: the userspace
// services' loop veths, nodestate.UserspaceLoopPattern).
func trustSet(trusted []string) func(string) bool {
	exact := map[string]bool{}
	var patterns []string
	for _, t := range trusted {
		if strings.ContainsAny(t, "*?[") {
			patterns = append(patterns, t)
		} else {
			exact[t] = true
		}
	}
	return func(name string) bool {
		if exact[name] {
			return true
		}
		for _, p := range patterns {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
		}
		return false
	}
}

// attach puts the programs on every interface lacking one it needs and
// takes them off where they are no longer needed (trusted interfaces,
// interfaces that no longer exist).
func (n *node) attach(trusted []string, hmac bool) error {
	ifs, err := interfaces(n.netns)
	if err != nil {
		return err
	}
	trust := trustSet(trusted)
	keep := map[string]bool{}
	for _, i := range ifs {
		for _, a := range n.wantedOn(trust(i.name), hmac) {
			p := pin(n.dir, i.index, a.name)
			keep[p] = true
			if bpfpin.LiveTCX(p) {
				if a.name != "in" || n.samples(p) {
					continue
				}
				// boundary_in of a segchain before O-flag sampling
				// (session 15): the new one takes its place.
				if err := n.replace(i, a, p); err != nil {
					return err
				}
				continue
			}
			_ = unpin(p)
			prog, err := n.program(a.prog)
			if err != nil {
				return err
			}
			if err := n.attachOne(i, prog, a.at, a.anchor, p); err != nil {
				return err
			}
		}
	}
	pins, _ := filepath.Glob(filepath.Join(n.dir, "tcx-*"))
	var errs []error
	for _, p := range pins {
		if !keep[p] {
			errs = append(errs, unpin(p))
		}
	}
	return errors.Join(errs...)
}

// samples reports whether the boundary_in linked at p reads the node's
// sampling map (a program of this segchain, not an older one).
func (n *node) samples(p string) bool {
	info, err := n.objs.BndSample.Info()
	if err != nil {
		return false
	}
	id, _ := info.ID()
	return samplingProgram(p, id) == nil
}

// replace puts the current program of a in place of the older one
// linked at p: the new link first (head of the chain), then the old one
// goes, so the interface is never without its filter.
func (n *node) replace(i iface, a attachment, p string) error {
	prog, err := n.program(a.prog)
	if err != nil {
		return err
	}
	return nsutil.Do(n.netns, func() error {
		lk, err := link.AttachTCX(link.TCXOptions{Interface: i.index, Program: prog, Attach: a.at, Anchor: a.anchor})
		if err != nil {
			return fmt.Errorf("replace boundary on %s: tcx: %w", i.name, err)
		}
		defer lk.Close()
		if err := unpin(p); err != nil {
			_ = lk.Close()
			return fmt.Errorf("replace boundary on %s: %w", i.name, err)
		}
		if err := lk.Pin(p); err != nil {
			return fmt.Errorf("pin boundary link on %s: %w", i.name, err)
		}
		return nil
	})
}

func (n *node) attachOne(i iface, prog *ebpf.Program, at ebpf.AttachType, anchor link.Anchor, p string) error {
	return nsutil.Do(n.netns, func() error {
		lk, err := link.AttachTCX(link.TCXOptions{Interface: i.index, Program: prog, Attach: at, Anchor: anchor})
		if errors.Is(err, ebpf.ErrNotSupported) {
			return fmt.Errorf("attach boundary to %s: %w: %w", i.name, ErrNotSupported, err)
		}
		if err != nil {
			return fmt.Errorf("attach boundary to %s: tcx: %w", i.name, err)
		}
		defer lk.Close()
		if err := lk.Pin(p); err != nil {
			return fmt.Errorf("pin boundary link on %s: %w", i.name, err)
		}
		return nil
	})
}

// Remove takes the boundary off every interface of netns and deletes its
// maps and state. Nothing installed is not an error.
func Remove(netns string) error {
	name, _, err := bpfpin.Namespace(netns)
	if err != nil {
		return err
	}
	dir, err := bpfpin.Dir(name, program)
	if err != nil {
		return err
	}
	if err := bpfpin.Remove(dir); err != nil {
		return err
	}
	if err := os.Remove(stateFile(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Observe reads the boundary installed in netns (nil: none): the table's
// prefixes, the trusted interfaces, and the boundary interfaces the filter
// is not attached to in both directions.
func Observe(netns string) (*nodestate.Boundary, error) {
	return ObserveWith(netns, nil)
}

// Interfaces are netns's interfaces but loopback, as Observe reads them
// (an agent that keeps them current from link events hands them to
// ObserveWith instead of having them listed per request).
type Interfaces []Iface

// Iface is one interface: its index and name.
type Iface struct {
	Index int
	Name  string
}

// ListInterfaces lists netns's interfaces but loopback.
func ListInterfaces(netns string) (Interfaces, error) {
	ifs, err := interfaces(netns)
	out := make(Interfaces, len(ifs))
	for i, f := range ifs {
		out[i] = Iface{f.index, f.name}
	}
	return out, err
}

// ObserveWith is Observe with the namespace's interfaces listed by the
// caller (nil: listed here).
func ObserveWith(netns string, known Interfaces) (*nodestate.Boundary, error) {
	n, err := openRead(netns)
	if err != nil || n == nil {
		return nil, err
	}
	defer n.close()
	return observe(n, sampleMapID(n), known)
}

// sampleMapID is n's bnd_sample's map ID (0 when it cannot say): the
// sampling program's check compares it.
func sampleMapID(n *node) ebpf.MapID {
	var id ebpf.MapID
	if info, err := n.objs.BndSample.Info(); err == nil {
		id, _ = info.ID()
	}
	return id
}

// observe reads the boundary of n's maps (sampleID: bnd_sample's), its
// interfaces being known (nil: listed here).
func observe(n *node, sampleID ebpf.MapID, known Interfaces) (*nodestate.Boundary, error) {
	got, err := n.entries()
	if err != nil {
		return nil, err
	}
	b := &nodestate.Boundary{Locators: []netip.Prefix{}}
	for p, kind := range got {
		switch kind {
		case uint32(boundaryTCBndKindBND_SID):
			b.Locators = append(b.Locators, p)
		case uint32(boundaryTCBndKindBND_EXTERNAL):
			b.External = append(b.External, p)
		case uint32(boundaryTCBndKindBND_NODE):
			b.Nodes = append(b.Nodes, p.Addr())
		case uint32(boundaryTCBndKindBND_SF):
			b.SFs = append(b.SFs, p.Addr())
		}
	}
	if b.HMACSIDs, b.HMACKeys, err = n.hmacEntries(); err != nil {
		return nil, err
	}
	if st, err := os.ReadFile(stateFile(n.name)); err == nil {
		_ = json.Unmarshal(st, &b.Trusted)
	}
	var ifs []iface
	if known != nil {
		for _, f := range known {
			ifs = append(ifs, iface{f.Index, f.Name})
		}
	} else if ifs, err = interfaces(n.netns); err != nil {
		return nil, err
	}
	trust := trustSet(b.Trusted)
	for _, i := range ifs {
		for _, a := range n.wantedOn(trust(i.name), len(b.HMACSIDs) > 0) {
			p := pin(n.dir, i.index, a.name)
			// boundary_in must be this segchain's (it reads the sampling
			// map): an older one is unfiltered too, so apply replaces it.
			if a.name == "in" && samplingProgram(p, sampleID) != nil || !bpfpin.LiveTCX(p) {
				b.Unfiltered = append(b.Unfiltered, i.name)
				break
			}
		}
	}
	b.Sort()
	return b, nil
}

// Counters reads the drop counters of netns, summed over CPUs, one per
// interface and reason that dropped something (none when nothing is
// installed).
func Counters(netns string) ([]nodestate.BoundaryCounter, error) {
	n, err := open(netns, false)
	if err != nil || n == nil {
		return nil, err
	}
	defer n.close()
	names := map[int]string{}
	if ifs, err := interfaces(netns); err == nil {
		for _, i := range ifs {
			names[i.index] = i.name
		}
	}
	var (
		k   boundaryTCBndCtrKey
		vs  []boundaryTCBndCtr
		out []nodestate.BoundaryCounter
	)
	it := n.objs.BndCounters.Iterate()
	for it.Next(&k, &vs) {
		c := nodestate.BoundaryCounter{Iface: names[int(k.Ifindex)], Direction: DropReason(k.Reason).Direction(),
			Reason: DropReason(k.Reason).String()}
		if c.Iface == "" {
			c.Iface = "ifindex " + strconv.Itoa(int(k.Ifindex))
		}
		for _, v := range vs {
			c.Packets += v.Packets
			c.Bytes += v.Bytes
		}
		out = append(out, c)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read boundary counters: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Iface != out[j].Iface {
			return out[i].Iface < out[j].Iface
		}
		return out[i].Reason < out[j].Reason
	})
	return out, nil
}

// ClearCounters zeroes the drop counters of netns.
func ClearCounters(netns string) error {
	n, err := open(netns, false)
	if err != nil || n == nil {
		return err
	}
	defer n.close()
	var (
		k    boundaryTCBndCtrKey
		keys []boundaryTCBndCtrKey
	)
	var vs []boundaryTCBndCtr
	it := n.objs.BndCounters.Iterate()
	for it.Next(&k, &vs) {
		keys = append(keys, k)
	}
	var errs []error
	for _, k := range keys {
		errs = append(errs, n.objs.BndCounters.Delete(k))
	}
	return errors.Join(errs...)
}

// Reasons lists every drop reason name (for docs and tests).
func Reasons() []string {
	out := make([]string, 0, numDropReasons)
	for r := 0; r < numDropReasons; r++ {
		out = append(out, DropReason(r).String())
	}
	return out
}
