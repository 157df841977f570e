package netfilter

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/nsutil"
)

// ErrNotSupported wraps a kernel feature End.AN.NF needs (TCX) that is
// missing.
var ErrNotSupported = ebpf.ErrNotSupported

// lockRoot holds one lock file per namespace: one writer at a time.
const lockRoot = "/run/segchain/nf"

// Instance is one End.AN.NF SID prefix.
type Instance struct {
	SID netip.Prefix `json:"sid"`
	// ArgsBits: the rightmost ArgsBits bits of the active SID (0..32,
	// within the prefix's host part) become the packet mark while
	// netfilter runs; 0 leaves the mark alone.
	ArgsBits int `json:"args_bits,omitempty"`
	// CSIDLBLen/CSIDNFLen (bits) make SID a uSID (RFC 9800 NEXT-C-SID,
	// docs/usid.md): SID is block:uSID::/(LBLen+NFLen) and End shifts the
	// container while it holds more uSIDs. 0 for a full SID.
	CSIDLBLen int `json:"csid_lblen,omitempty"`
	CSIDNFLen int `json:"csid_nflen,omitempty"`
}

// Validate checks the instance's fields.
func (in Instance) Validate() error {
	if !in.SID.IsValid() || !in.SID.Addr().Is6() || in.SID.Addr().Is4In6() {
		return fmt.Errorf("%s: SID %s: want an IPv6 prefix", Behavior, in.SID)
	}
	if in.ArgsBits < 0 || in.ArgsBits > 32 {
		return fmt.Errorf("%s: args %d: want 0..32 bits", Behavior, in.ArgsBits)
	}
	if host := 128 - in.SID.Bits(); in.ArgsBits > host {
		return fmt.Errorf("%s: args %d: the prefix /%d leaves only %d bits for ARGS", Behavior, in.ArgsBits, in.SID.Bits(), host)
	}
	if in.CSIDNFLen != 0 || in.CSIDLBLen != 0 {
		lb, nf := in.CSIDLBLen, in.CSIDNFLen
		if lb <= 0 || nf <= 0 || lb%8 != 0 || nf%8 != 0 || lb+nf != in.SID.Bits() || in.ArgsBits != 0 {
			return fmt.Errorf("%s: usid %d/%d: want multiples of 8 bits summing to the prefix length /%d, and no ARGS", Behavior, lb, nf, in.SID.Bits())
		}
	}
	return nil
}

// Counters of one SID (sums over CPUs).
type Counters struct {
	Packets     uint64 `json:"packets"`      // addressed to the SID
	Bytes       uint64 `json:"bytes"`        // their bytes as received
	ToNetfilter uint64 `json:"to_netfilter"` // decapsulated, handed to netfilter
	// Accepted: back out of netfilter, re-encapsulated, End applied and
	// sent on.
	Accepted uint64 `json:"accepted"`
	ToStack  uint64 `json:"to_stack"` // of those, handed to the stack (the FIB could not forward)
	// DroppedNetfilter: handed to netfilter and never back: dropped by
	// a rule (DROP, REJECT), or by the stack between the hooks (no
	// route, a local inner destination ...). ToNetfilter - returned, so
	// a packet still in flight while the counters are read counts too.
	DroppedNetfilter uint64            `json:"dropped_netfilter"`
	Malformed        uint64            `json:"dropped_malformed"` // drops for malformed input (Drops of malformedReasons)
	Drops            map[string]uint64 `json:"drops,omitempty"`   // every drop of the programs, by reason
}

// malformedReasons are the drops of bad input (not of the loop's state).
var malformedReasons = map[DropReason]bool{
	DropTruncated: true, DropNoSRH: true, DropBadSRH: true, DropBadExt: true, DropFragment: true,
	DropSLZero: true, DropInsert: true, DropBadInner: true, DropHdrTooBig: true, DropHopLimit: true,
	DropCsidPadding: true,
}

// Status is an instance with its counters.
type Status struct {
	Instance
	ID       uint32   `json:"id"`
	Counters Counters `json:"counters"`
}

// LoopStatus is the loop's own view: drops of packets nf_out could not
// attribute to a SID.
type LoopStatus struct {
	Drops map[string]uint64 `json:"drops,omitempty"`
}

// node is the End.AN.NF state of one network namespace: pinned maps and
// links.
type node struct {
	netns string
	dir   string
	objs  nfTCObjects
}

func nsDir(netns string, clean bool) (name, dir string, err error) {
	root, err := bpfpin.Root()
	if err != nil {
		return "", "", err
	}
	name, ino, err := bpfpin.Namespace(netns)
	if err != nil {
		return "", "", err
	}
	if clean {
		for _, d := range append(bpfpin.Stale(name, ino, "nf"), bpfpin.Defunct("nf", name)...) {
			_ = bpfpin.Remove(d)
		}
	}
	return name, filepath.Join(root, name, "nf"), nil
}

func installed(netns string) bool {
	_, dir, err := nsDir(netns, false)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "nf_sids"))
	return err == nil
}

func spec() (*ebpf.CollectionSpec, error) {
	s, err := loadNfTC()
	if err != nil {
		return nil, fmt.Errorf("load End.AN.NF spec: %w", err)
	}
	for name, m := range s.Maps {
		if !strings.HasPrefix(name, ".") {
			m.Pinning = ebpf.PinByName
		}
	}
	return s, nil
}

func open(netns string) (*node, error) {
	_, dir, err := nsDir(netns, true)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pin dir: %w", err)
	}
	s, err := spec()
	if err != nil {
		return nil, err
	}
	n := &node{netns: netns, dir: dir}
	if err := s.LoadAndAssign(&n.objs.nfTCMaps, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}}); err != nil {
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return n, fmt.Errorf("pinned End.AN.NF maps in %s are from another segchain version: %w", dir, err)
		}
		return nil, fmt.Errorf("load End.AN.NF maps: %w", err)
	}
	return n, nil
}

// upgrade replaces the state another segchain version left in n.dir (maps
// of another layout): it reads the SIDs from the old nf_sids (whose
// layout has not changed), removes everything, and installs them again
// (their counters start at zero). Without a readable nf_sids the SIDs are
// lost and the state is removed all the same: a node must never be stuck
// with state nothing can load.
func upgrade(netns string, n *node) error {
	var keep []Instance
	if m, err := ebpf.LoadPinnedMap(filepath.Join(n.dir, "nf_sids"), nil); err == nil {
		var (
			k nfTCNfSidKey
			v nfTCNfSid
		)
		it := m.Iterate()
		for it.Next(&k, &v) {
			keep = append(keep, Instance{SID: netip.PrefixFrom(netip.AddrFrom16(k.Addr), int(k.Prefixlen)), ArgsBits: int(v.ArgsBits),
				CSIDLBLen: int(v.CsidLblen), CSIDNFLen: int(v.CsidNflen)})
		}
		m.Close()
	}
	if err := n.teardown(); err != nil {
		return err
	}
	fresh, err := open(netns)
	if err != nil {
		return err
	}
	defer fresh.Close()
	for _, in := range keep {
		if err := fresh.apply(in); err != nil {
			return fmt.Errorf("reinstall %s after an upgrade: %w", in.SID, err)
		}
	}
	return nil
}

func (n *node) Close() error { return n.objs.Close() }

// FIBCache selects nf_out's next-hop cache when the programs are loaded:
// true, an answer of its FIB lookup is reused while the namespace's IPv6
// routing generation (fib6_sernum) is unchanged; false, every packet
// takes the full lookup, the path before issue #32 (the tests compare
// the packets of both).
var FIBCache = true

// fibCacheNs overrides the cache entries' lifetime in ns (0: the
// program's own); the tests make it longer than a test so that only the
// routing generation can renew an entry.
var fibCacheNs uint64

func (n *node) loadProgs() error {
	if n.objs.NfIn != nil {
		return nil
	}
	s, err := spec()
	if err != nil {
		return err
	}
	if !FIBCache {
		if err := s.Variables["nf_fib_cache_on"].Set(uint32(0)); err != nil {
			return fmt.Errorf("End.AN.NF next-hop cache off: %w", err)
		}
	}
	if fibCacheNs != 0 {
		if err := s.Variables["nf_fib_cache_ns"].Set(fibCacheNs); err != nil {
			return fmt.Errorf("End.AN.NF next-hop cache lifetime: %w", err)
		}
	}
	if err := s.LoadAndAssign(&n.objs.nfTCPrograms, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: n.dir}}); err != nil {
		return fmt.Errorf("load End.AN.NF programs: %w", err)
	}
	return nil
}

// setup makes the loop, writes nf_cfg and attaches both programs.
func (n *node) setup() error {
	var ls loopState
	err := nsutil.Do(n.netns, func() error {
		nh, err := newHandle()
		if err != nil {
			return err
		}
		defer nh.Close()
		ls, err = ensureLoop(nh)
		return err
	})
	if err != nil {
		return err
	}
	cfg := nfTCNfCfg{InIfindex: uint32(ls.in), OutIfindex: uint32(ls.out)}
	copy(cfg.InMac[:], ls.inMAC)
	copy(cfg.OutMac[:], ls.outMAC)
	if err := n.objs.NfCfgMap.Put(uint32(0), &cfg); err != nil {
		return fmt.Errorf("write End.AN.NF loop config: %w", err)
	}
	return n.attach(ls.out)
}

// attach attaches nf_in to the ingress of every interface lacking it but
// LoopIn, and nf_out to the egress of LoopOut.
//
// Not LoopIn: only nf_in's own redirects enter there, decapsulated inner
// packets that nf_in must not take again (it returned at once for them;
// issue #32: the hook was a second nf_in run per packet). LoopOut's
// ingress keeps nf_in: what nf_out hands to the stack enters there, and
// its next SID may be an End.AN.NF SID of this node.
func (n *node) attach(out int) error {
	err := bpfpin.AttachAllExcept(n.netns, n.dir, ebpf.AttachTCXIngress, func(name string) bool { return name == LoopIn },
		func() (*ebpf.Program, error) {
			if err := n.loadProgs(); err != nil {
				return nil, err
			}
			return n.objs.NfIn, nil
		})
	if err != nil {
		return fmt.Errorf("attach End.AN.NF: %w", err)
	}
	if err := n.detachLoopIn(); err != nil {
		return err
	}
	pin := filepath.Join(n.dir, fmt.Sprintf("tcx-out-%d", out))
	if _, err := os.Stat(pin); err == nil {
		return nil
	}
	if err := n.loadProgs(); err != nil {
		return err
	}
	return nsutil.Do(n.netns, func() error {
		lk, err := link.AttachTCX(link.TCXOptions{Interface: out, Program: n.objs.NfOut, Attach: ebpf.AttachTCXEgress})
		if err != nil {
			return fmt.Errorf("attach End.AN.NF to %s egress: %w", LoopOut, err)
		}
		defer lk.Close()
		if err := lk.Pin(pin); err != nil {
			return fmt.Errorf("pin End.AN.NF link on %s: %w", LoopOut, err)
		}
		return nil
	})
}

// detachLoopIn removes nf_in from LoopIn where an earlier version
// attached it (its link pin tcx-<LoopIn's ifindex>).
func (n *node) detachLoopIn() error {
	var idx int
	_ = nsutil.Do(n.netns, func() error {
		l, err := net.InterfaceByName(LoopIn)
		if err == nil {
			idx = l.Index
		}
		return err
	})
	if idx == 0 {
		return nil
	}
	pin := filepath.Join(n.dir, fmt.Sprintf("tcx-%d", idx))
	lk, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		// A link of a gone device: the pin alone.
		if rerr := os.Remove(pin); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return fmt.Errorf("detach End.AN.NF from %s: %w", LoopIn, err)
		}
		return nil
	}
	defer lk.Close()
	if err := lk.Unpin(); err != nil {
		return fmt.Errorf("detach End.AN.NF from %s: %w", LoopIn, err)
	}
	return nil
}

// teardown removes links, maps and the loop.
func (n *node) teardown() error {
	err := bpfpin.Remove(n.dir)
	// The records of loaded rule sets (kind.go) go with the SIDs.
	_ = os.RemoveAll(filepath.Join(lockRoot, filepath.Base(filepath.Dir(n.dir))))
	lerr := nsutil.Do(n.netns, func() error {
		nh, err := newHandle()
		if err != nil {
			return err
		}
		defer nh.Close()
		return removeLoop(nh)
	})
	return errors.Join(err, lerr)
}

func sidKey(p netip.Prefix) nfTCNfSidKey {
	return nfTCNfSidKey{Prefixlen: uint32(p.Bits()), Addr: p.Masked().Addr().As16()}
}

// sidEntry is an End.AN.NF SID: its prefix and its nf_sids value.
type sidEntry = bpfpin.SIDEntry[nfTCNfSid]

func (n *node) sids() ([]sidEntry, error) {
	return bpfpin.SIDEntries[nfTCNfSid](n.objs.NfSids, "End.AN.NF")
}

func (n *node) zeroStats(id uint32) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	return n.objs.NfStatsMap.Put(id, make([]nfTCNfStats, ncpu))
}

// apply installs or updates one SID (its ARGS bits); counters of an
// existing SID are kept.
func (n *node) apply(in Instance) error {
	es, err := n.sids()
	if err != nil {
		return err
	}
	used := map[uint32]bool{}
	var id uint32
	found := false
	for _, e := range es {
		used[e.Val.Id] = true
		if e.SID == in.SID {
			id, found = e.Val.Id, true
		}
	}
	if !found {
		if len(es) >= MaxSIDs {
			return fmt.Errorf("%s: at most %d End.AN.NF SIDs per node", in.SID, MaxSIDs)
		}
		for used[id] {
			id++
		}
		if err := n.zeroStats(id); err != nil {
			return fmt.Errorf("%s: reset counters: %w", in.SID, err)
		}
	}
	// The loop and the programs first, the SID last: a packet is caught
	// only once everything it needs is there. The first SID's failure
	// leaves nothing behind (no maps, no half-made loop).
	if err := n.setup(); err != nil {
		if len(es) == 0 {
			return errors.Join(err, n.teardown())
		}
		return err
	}
	k := sidKey(in.SID)
	if err := n.objs.NfSids.Put(&k, &nfTCNfSid{Id: id, ArgsBits: uint32(in.ArgsBits),
		CsidLblen: uint8(in.CSIDLBLen), CsidNflen: uint8(in.CSIDNFLen)}); err != nil {
		return fmt.Errorf("%s: activate: %w", in.SID, err)
	}
	return nil
}

func (n *node) remove(sid netip.Prefix) (bool, error) {
	es, err := n.sids()
	if err != nil {
		return false, err
	}
	for _, e := range es {
		if e.SID != sid {
			continue
		}
		if len(es) == 1 {
			return true, n.teardown()
		}
		k := sidKey(sid)
		if err := n.objs.NfSids.Delete(&k); err != nil {
			return true, fmt.Errorf("delete %s: %w", sid, err)
		}
		return true, nil
	}
	return false, nil
}

func (n *node) stats(id uint32) (nfTCNfStats, error) {
	var per []nfTCNfStats
	var sum nfTCNfStats
	if err := n.objs.NfStatsMap.Lookup(id, &per); err != nil {
		return sum, err
	}
	for _, p := range per {
		sum.Packets += p.Packets
		sum.Bytes += p.Bytes
		sum.ToNetfilter += p.ToNetfilter
		sum.Returned += p.Returned
		sum.Accepted += p.Accepted
		sum.ToStack += p.ToStack
		for r, v := range p.Drops {
			sum.Drops[r] += v
		}
	}
	return sum, nil
}

func countersOf(s nfTCNfStats) Counters {
	c := Counters{Packets: s.Packets, Bytes: s.Bytes, ToNetfilter: s.ToNetfilter, Accepted: s.Accepted,
		ToStack: s.ToStack, Drops: map[string]uint64{}}
	if s.ToNetfilter > s.Returned {
		c.DroppedNetfilter = s.ToNetfilter - s.Returned
	}
	for r, v := range s.Drops {
		if v == 0 {
			continue
		}
		c.Drops[DropReason(r).String()] += v
		if malformedReasons[DropReason(r)] {
			c.Malformed += v
		}
	}
	return c
}

func (n *node) list() ([]Status, error) {
	es, err := n.sids()
	if err != nil {
		return nil, err
	}
	var out []Status
	for _, e := range es {
		s, err := n.stats(e.Val.Id)
		if err != nil {
			return nil, fmt.Errorf("read counters of %s: %w", e.SID, err)
		}
		out = append(out, Status{Instance: Instance{SID: e.SID, ArgsBits: int(e.Val.ArgsBits),
			CSIDLBLen: int(e.Val.CsidLblen), CSIDNFLen: int(e.Val.CsidNflen)}, ID: e.Val.Id, Counters: countersOf(s)})
	}
	return out, nil
}

// withNode runs fn on the namespace's state under its lock (one writer
// at a time), upgrading state another segchain version left first.
func withNode(netns string, fn func(*node) error) error {
	name, _, err := nsDir(netns, false)
	if err != nil {
		return err
	}
	lf, err := bpfpin.LockFile(filepath.Join(lockRoot, name+".lock"), "End.AN.NF state")
	if err != nil {
		return err
	}
	defer lf.Close()
	n, err := open(netns)
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		if err = upgrade(netns, n); err == nil {
			n, err = open(netns)
		}
	}
	if err != nil {
		return err
	}
	defer n.Close()
	return fn(n)
}

// state is End.AN.NF in a namespace as the verbs below reach it.
var state = bpfpin.Locked[*node]{Installed: installed, With: withNode}

// Apply installs the End.AN.NF SID in.SID in netns ("" = current), or
// changes its ARGS bits; the first one creates the netfilter loop and
// attaches the programs.
func Apply(netns string, in Instance) error {
	in.SID = in.SID.Masked()
	if err := in.Validate(); err != nil {
		return err
	}
	return withNode(netns, func(n *node) error { return n.apply(in) })
}

// Remove deletes the SID; false means it was not installed. The last one
// takes the programs, maps, links and the loop with it.
func Remove(netns string, sid netip.Prefix) (bool, error) {
	return bpfpin.Read(state, netns, func(n *node) (bool, error) { return n.remove(sid.Masked()) })
}

// List returns every SID of netns with its counters.
func List(netns string) ([]Status, error) { return bpfpin.Read(state, netns, (*node).list) }

// Loop returns the drops nf_out could not attribute to a SID.
func Loop(netns string) (LoopStatus, error) {
	return bpfpin.Read(state, netns, func(n *node) (LoopStatus, error) {
		s, err := n.stats(uint32(MaxSIDs))
		return LoopStatus{Drops: countersOf(s).Drops}, err
	})
}

// ClearCounters zeroes the counters of one SID (nil: all, and the loop's).
func ClearCounters(netns string, sid *netip.Prefix) error {
	return state.Do(netns, func(n *node) error {
		es, err := n.sids()
		if err != nil {
			return err
		}
		for _, e := range es {
			if sid == nil || e.SID == sid.Masked() {
				if err := n.zeroStats(e.Val.Id); err != nil {
					return err
				}
			}
		}
		if sid == nil {
			return n.zeroStats(uint32(MaxSIDs))
		}
		return nil
	})
}

// Flush removes every End.AN.NF SID of netns, with the loop. It does not
// load the pinned maps, so it also clears the state of another segchain
// version (whose maps no longer load).
func Flush(netns string) error {
	if !installed(netns) {
		return nil
	}
	_, dir, err := nsDir(netns, false)
	if err != nil {
		return err
	}
	return (&node{netns: netns, dir: dir}).teardown()
}

// AttachNew attaches nf_in to interfaces created after the SIDs (the
// service loop ...). Without End.AN.NF SIDs it does nothing.
func AttachNew(netns string) error {
	return state.Do(netns, func(n *node) error {
		var out int
		err := nsutil.Do(netns, func() error {
			l, err := netlink.LinkByName(LoopOut)
			if err == nil {
				out = l.Attrs().Index
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("netfilter loop: %w", err)
		}
		return n.attach(out)
	})
}
