package srunaware

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/nsutil"
)

// Node is the proxy state of one network namespace: the pinned maps and the
// loaded program. It is cheap to open; all state lives in bpffs, so it
// survives the process.
type Node struct {
	netns string
	dir   string
	objs  proxyTCObjects
}

// program is the proxies' pinned state in a namespace.
var program = bpfpin.Program{Name: "proxy", What: "proxy", Flush: "flush them", Load: bpfpin.Parsed(loadProxyTC)}

// Open loads (or re-opens) the pinned proxy maps of netns ("" = the
// calling thread's namespace).
func Open(netns string) (*Node, error) {
	dir, err := pinDir(netns, true)
	if err != nil {
		return nil, err
	}
	spec, err := program.Spec()
	if err != nil {
		return nil, err
	}
	n := &Node{netns: netns, dir: dir}
	if err := program.Assign(spec, &n.objs, dir); err != nil {
		return nil, err
	}
	return n, nil
}

// pinDir is bpfpin.Root()/ns-<inode>-<cookie>/proxy (bpfpin.Namespace). With
// clean, proxy state left by deleted namespaces is removed: by a dead
// namespace whose inode this one inherited, or whose links all lost their
// interface.
func pinDir(netns string, clean bool) (string, error) {
	_, dir, err := program.Dir(netns, clean, nil)
	return dir, err
}

// Close releases the process' handles; pinned state stays.
func (n *Node) Close() error { return n.objs.Close() }

// Dir is the pin directory of this namespace's proxies.
func (n *Node) Dir() string { return n.dir }

// ifaceInfo resolves interface names inside the namespace.
func (n *Node) ifaces() (map[string]net.Interface, error) {
	out := map[string]net.Interface{}
	err := nsutil.Do(n.netns, func() error {
		l, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, i := range l {
			out[i.Name] = i
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list interfaces of netns %q: %w", n.netns, err)
	}
	return out, nil
}

// attachAll attaches the program (TCX ingress, link pinned) to every
// interface but loopback that does not have it yet.
func (n *Node) attachAll() error {
	return program.Attach(n.netns, n.dir, func() (*ebpf.Program, error) { return n.objs.ProxyTc, nil }, ErrNotSupported)
}

// teardown removes the links and the pinned maps: nothing of the proxies
// is left in the namespace.
func (n *Node) teardown() error { return bpfpin.Remove(n.dir) }

func sidKey(p netip.Prefix) proxyTCIn6Addr {
	var k proxyTCIn6Addr
	k.In6U.U6Addr8 = p.Addr().As16()
	return k
}

type entry struct {
	sid netip.Prefix
	cfg proxyTCProxySid
}

func (n *Node) entries() ([]entry, error) {
	var (
		k   proxyTCIn6Addr
		v   proxyTCProxySid
		out []entry
	)
	it := n.objs.SidsMap.Iterate()
	for it.Next(&k, &v) {
		out = append(out, entry{netip.PrefixFrom(netip.AddrFrom16(k.In6U.U6Addr8), 128), v})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate proxy sids: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].sid.Addr().Less(out[j].sid.Addr()) })
	return out, nil
}

var behaviorCode = map[string]uint8{
	EndAS: uint8(proxyTCProxyBehaviorPROXY_AS), EndAD: uint8(proxyTCProxyBehaviorPROXY_AD),
	EndEAD: uint8(proxyTCProxyBehaviorPROXY_EAD), EndAM: uint8(proxyTCProxyBehaviorPROXY_AM),
}

func behaviorName(c uint8) string {
	for k, v := range behaviorCode {
		if v == c {
			return k
		}
	}
	return "unknown"
}

// Add installs one proxy SID. It fails if the SID exists or if the IFACE-IN
// is taken by another (non-End.AM) proxy.
func (n *Node) Add(s Spec) error {
	if err := s.Validate(); err != nil {
		return err
	}
	ents, err := n.entries()
	if err != nil {
		return err
	}
	ifs, err := n.ifaces()
	if err != nil {
		return err
	}
	iif, err := n.iface(ifs, s, "iif", s.IIF)
	if err != nil {
		return err
	}
	used := map[uint32]bool{}
	for _, e := range ents {
		used[e.cfg.Id] = true
		if e.sid == s.SID {
			return fmt.Errorf("%s: SID exists (%s): delete it first", s.SID, behaviorName(e.cfg.Behavior))
		}
		if ifaceInConflict(s, e, uint32(iif.Index)) {
			return fmt.Errorf("%s: iif %s is already the IFACE-IN of %s (IFACE-IN is exclusive)", s.SID, s.IIF, e.sid)
		}
	}
	var id uint32
	for used[id] {
		id++
	}
	if id >= uint32(n.objs.StatsMap.MaxEntries()) {
		return fmt.Errorf("%s: too many proxy SIDs (max %d)", s.SID, n.objs.StatsMap.MaxEntries())
	}
	cfg, err := n.config(s, id, ifs)
	if err != nil {
		return err
	}
	if err := n.zeroStats(id); err != nil {
		return err
	}
	if err := n.setFlowCap(id, s.FlowMax); err != nil {
		return fmt.Errorf("%s: %w", s.SID, err)
	}
	if s.Behavior == EndAS {
		if err := n.putStaticCache(s, id); err != nil {
			return err
		}
	} else {
		_ = n.objs.CacheMap.Delete(id)
	}
	if err := n.objs.IfacesMap.Put(cfg.Iif, &cfg); err != nil {
		return fmt.Errorf("%s: write iif: %w", s.SID, err)
	}
	if s.CSIDNFLen > 0 {
		// The program masks a DA to this length for uSID SIDs (one
		// format per domain, so per node).
		if err := n.objs.CsidMap.Put(uint32(0), uint32((s.CSIDLBLen+s.CSIDNFLen)/8)); err != nil {
			return fmt.Errorf("%s: write usid length: %w", s.SID, err)
		}
	}
	key := sidKey(s.SID)
	if err := n.objs.SidsMap.Put(&key, &cfg); err != nil {
		return fmt.Errorf("%s: write sid: %w", s.SID, err)
	}
	return n.attachAll()
}

// ifaceInConflict reports whether installing s with IFACE-IN iif clashes
// with the installed entry e (IFACE-IN is exclusive, except between End.AM
// SIDs, which may share one).
func ifaceInConflict(s Spec, e entry, iif uint32) bool {
	return e.cfg.Iif == iif && !(s.Behavior == EndAM && e.cfg.Behavior == behaviorCode[EndAM])
}

// config is the map entry of s with identifier id.
func (n *Node) config(s Spec, id uint32, ifs map[string]net.Interface) (proxyTCProxySid, error) {
	oif, err := n.iface(ifs, s, "oif", s.OIF)
	if err != nil {
		return proxyTCProxySid{}, err
	}
	iif, err := n.iface(ifs, s, "iif", s.IIF)
	if err != nil {
		return proxyTCProxySid{}, err
	}
	cfg := proxyTCProxySid{
		Id: id, Behavior: behaviorCode[s.Behavior], Inner: uint8(s.Inner),
		Oif: uint32(oif.Index), Iif: uint32(iif.Index),
		FlowTimeoutNs: uint64(s.FlowTimeout), FlowMax: s.FlowMax,
		CsidLblen: uint8(s.CSIDLBLen), CsidNflen: uint8(s.CSIDNFLen),
	}
	if s.Flow {
		cfg.Flags |= uint8(flagFlow)
	}
	switch {
	case s.Inner == InnerEthernet:
		// No S-ADDR: frames leave on IFACE-OUT unchanged.
	case s.MAC != nil:
		cfg.Flags |= uint8(flagMAC)
		copy(cfg.Dmac[:], s.MAC)
		copy(cfg.Smac[:], oif.HardwareAddr)
		peer, err := n.peerElsewhere(oif.Index)
		if err != nil {
			return proxyTCProxySid{}, fmt.Errorf("%s: oif %s: %w", s.SID, s.OIF, err)
		}
		if peer {
			cfg.Flags |= uint8(flagPeer)
		}
	case s.NH.Is4():
		cfg.NhFamily = unix.AF_INET
		a := s.NH.As4()
		cfg.Nh[0] = nativeU32(a[:])
	default:
		cfg.NhFamily = unix.AF_INET6
		a := s.NH.As16()
		for i := range 4 {
			cfg.Nh[i] = nativeU32(a[4*i:])
		}
	}
	return cfg, nil
}

// iface resolves the interface name of s's parameter param.
func (n *Node) iface(ifs map[string]net.Interface, s Spec, param, name string) (net.Interface, error) {
	i, ok := ifs[name]
	if !ok {
		return net.Interface{}, fmt.Errorf("%s: %s %s: no such interface in netns %q", s.SID, param, name, n.netns)
	}
	return i, nil
}

// putStaticCache writes the configured CACHE of the End.AS s into slot id.
func (n *Node) putStaticCache(s Spec, id uint32) error {
	hdr, nhOff := BuildEncap(s.Src, s.Segs, s.Tag, s.Inner)
	var c proxyTCProxyCache
	c.Valid = 1
	c.Len = uint32(len(hdr))
	c.NhOff = uint16(nhOff)
	c.UpdatedNs = monoNow()
	copy(c.Hdr[:], hdr)
	if err := n.objs.CacheMap.Put(id, &c); err != nil {
		return fmt.Errorf("%s: write cache: %w", s.SID, err)
	}
	return nil
}

const (
	flagFlow = proxyTCProxyFlag(1)
	flagMAC  = proxyTCProxyFlag(2)
	flagPeer = proxyTCProxyFlag(4)
)

// PeerRedirect lets the inbound half of a proxy with a MAC S-ADDR hand
// the packet straight to the ingress of the SF's end of the link
// (bpf_redirect_peer) when IFACE-OUT is a veth whose peer lives in another
// namespace: no transmit on IFACE-OUT and no backlog queue (issue #32,
// docs/proxies.md "Fast path"). It is read when a SID is installed; false
// installs every SID with the classic redirect (the tests compare the two
// paths' packets byte for byte).
var PeerRedirect = true

// peerElsewhere reports whether interface idx of the node is a veth whose
// peer is in another namespace (rtnetlink reports the peer's netns id only
// then): the condition of bpf_redirect_peer, which drops the packet if the
// peer is in the same namespace.
func (n *Node) peerElsewhere(idx int) (bool, error) {
	if !PeerRedirect {
		return false, nil
	}
	var peer bool
	err := nsutil.Do(n.netns, func() error {
		l, err := netlink.LinkByIndex(idx)
		if err != nil {
			return err
		}
		_, veth := l.(*netlink.Veth)
		peer = veth && l.Attrs().NetNsID >= 0
		return nil
	})
	return peer, err
}

type proxyTCProxyFlag uint8

func nativeU32(b []byte) uint32 {
	// The program copies nh[] byte-wise into struct bpf_redir_neigh, so the
	// words hold the address bytes in memory order (host = little endian).
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func monoNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

func (n *Node) zeroStats(id uint32) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	if err := n.objs.StatsMap.Put(id, make([]proxyTCProxyStats, ncpu)); err != nil {
		return fmt.Errorf("reset counters of proxy %d: %w", id, err)
	}
	return nil
}

// Del removes one proxy SID; false means it was not a proxy SID here. The
// last SID removed takes the program and maps away with it.
func (n *Node) Del(sid netip.Prefix) (bool, error) {
	ents, err := n.entries()
	if err != nil {
		return false, err
	}
	var me *entry
	for i := range ents {
		if ents[i].sid == sid {
			me = &ents[i]
		}
	}
	if me == nil {
		return false, nil
	}
	key := sidKey(sid)
	if err := n.objs.SidsMap.Delete(&key); err != nil {
		return true, fmt.Errorf("delete %s: %w", sid, err)
	}
	n.releaseIif(ents, *me)
	for _, e := range ents {
		if e.sid != sid && e.cfg.Id == me.cfg.Id {
			// A hand-over (Apply) shares the slot with the successor:
			// its cache, flows and counters stay.
			return true, nil
		}
	}
	_ = n.objs.CacheMap.Delete(me.cfg.Id)
	n.deleteFlows(&me.cfg.Id)
	_ = n.setFlowCap(me.cfg.Id, 0)
	_ = n.zeroStats(me.cfg.Id)
	if len(ents) == 1 {
		return true, n.teardown()
	}
	return true, nil
}

// releaseIif gives up me's IFACE-IN if me owns it: another SID of ents with
// the same IFACE-IN (End.AM sharing it, or the party of a hand-over) takes
// it over in one map update, so the outbound half never misses an entry;
// without one the entry is deleted.
func (n *Node) releaseIif(ents []entry, me entry) {
	var cur proxyTCProxySid
	if err := n.objs.IfacesMap.Lookup(me.cfg.Iif, &cur); err != nil || cur.Id != me.cfg.Id {
		return
	}
	for _, e := range ents {
		if e.sid != me.sid && e.cfg.Iif == me.cfg.Iif {
			if cur != e.cfg {
				_ = n.objs.IfacesMap.Put(e.cfg.Iif, &e.cfg)
			}
			return
		}
	}
	_ = n.objs.IfacesMap.Delete(me.cfg.Iif)
}

func (n *Node) deleteFlows(id *uint32) {
	var (
		k    proxyTCProxyFlowKey
		v    proxyTCProxyCache
		keys []proxyTCProxyFlowKey
	)
	it := n.objs.FlowsMap.Iterate()
	for it.Next(&k, &v) {
		if id == nil || k.Id == *id {
			keys = append(keys, k)
		}
	}
	for i := range keys {
		_ = n.objs.FlowsMap.Delete(&keys[i])
	}
}

// setFlowCap gives SID id a per-flow cache of its own with max entries
// (flow max), or none (max 0). The outer map holds the only reference: the
// cache lives as long as the SID, in bpffs terms as long as the pinned
// outer map.
func (n *Node) setFlowCap(id, max uint32) error {
	if max == 0 {
		if err := n.objs.FlowCapsMap.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("remove flow cache of proxy %d: %w", id, err)
		}
		return nil
	}
	spec, err := loadProxyTC()
	if err != nil {
		return err
	}
	inner := spec.Maps["flow_caps_map"].InnerMap.Copy()
	inner.Name = fmt.Sprintf("proxy_flows_%d", id)
	inner.MaxEntries = max
	m, err := ebpf.NewMap(inner)
	if err != nil {
		return fmt.Errorf("create flow cache of %d entries: %w", max, err)
	}
	defer m.Close()
	n.carryFlows(id, m, int(max))
	if err := n.objs.FlowCapsMap.Put(id, m); err != nil {
		return fmt.Errorf("install flow cache: %w", err)
	}
	return nil
}

// carryFlows copies up to limit (0: no limit) of the flows SID id has
// learnt, from the cache it uses now (its own, or the node-wide one), into
// dst, the cache a flow max change gives it: a packet the SF returns right
// after the change is re-encapsulated from its flow's cache, not dropped
// for the lack of one.
func (n *Node) carryFlows(id uint32, dst *ebpf.Map, limit int) {
	from := n.flowCap(id)
	if from == nil {
		from = n.objs.FlowsMap
	} else {
		defer from.Close()
	}
	if from != dst {
		copyFlows(dst, from, id, limit)
	}
}

// copyFlows copies up to limit (0: no limit) of SID id's flows from one
// flow cache to another.
func copyFlows(dst, src *ebpf.Map, id uint32, limit int) {
	var (
		k proxyTCProxyFlowKey
		v proxyTCProxyCache
		n int
	)
	it := src.Iterate()
	for it.Next(&k, &v) && (limit == 0 || n < limit) {
		if k.Id == id && dst.Put(&k, &v) == nil {
			n++
		}
	}
}

// flowCap opens SID id's own per-flow cache (nil: it has none).
func (n *Node) flowCap(id uint32) *ebpf.Map {
	var m *ebpf.Map
	if err := n.objs.FlowCapsMap.Lookup(id, &m); err != nil {
		return nil
	}
	return m
}

// Flush removes every proxy SID of the namespace, the program and the maps.
func (n *Node) Flush() error {
	return n.teardown()
}

// ClearCounters zeroes the counters of one SID (nil: all).
func (n *Node) ClearCounters(sid *netip.Prefix) error {
	ents, err := n.entries()
	if err != nil {
		return err
	}
	for _, e := range ents {
		if sid == nil || e.sid == *sid {
			if err := n.zeroStats(e.cfg.Id); err != nil {
				return err
			}
		}
	}
	return nil
}

// Counters are one proxy SID's statistics, summed over CPUs.
type Counters struct {
	InPackets    uint64            `json:"in_packets"`
	InBytes      uint64            `json:"in_bytes"`
	OutPackets   uint64            `json:"out_packets"`
	OutBytes     uint64            `json:"out_bytes"`
	Passed       uint64            `json:"passed"`
	CacheUpdates uint64            `json:"cache_updates"`
	ICMPErrors   uint64            `json:"icmp_errors"` // Packet Too Big sent
	Drops        map[string]uint64 `json:"drops,omitempty"`
	// OutDrops are the drops (of Drops) on the way back from the SF;
	// the others happened on the way in.
	OutDrops uint64 `json:"out_drops"`
}

// NotReturned is how many packets the proxy sent to the SF that never came
// back: sent (InPackets) less those that returned, whether re-encapsulated
// (OutPackets) or dropped on the way back (OutDrops); 0 when more came
// back than went (an SF that generates packets). An SF that drops silently
// (a firewall policy, a dead process, a lost route back) makes it grow by
// every packet it swallows. Meaningful for a forwarding SF; End.EAD
// traffic whose SF is the last segment, and SFs that terminate
// connections, never return what they receive.
func (c Counters) NotReturned() uint64 {
	back := c.OutPackets + c.OutDrops
	if back >= c.InPackets {
		return 0
	}
	return c.InPackets - back
}

// Status is one installed proxy SID as Show reports it.
type Status struct {
	Spec     Spec         `json:"spec"`
	ID       uint32       `json:"id"`
	Counters Counters     `json:"counters"`
	Cache    []CacheEntry `json:"cache,omitempty"`
	// PeerRedirect: packets to the SF enter its end of the veth directly
	// (bpf_redirect_peer; see PeerRedirect).
	PeerRedirect bool `json:"peer-redirect,omitempty"`
}

// CacheEntry is one cached encapsulation (per SID, or per flow).
type CacheEntry struct {
	Flow     string        `json:"flow,omitempty"` // "proto src sport > dst dport"
	Age      time.Duration `json:"age"`
	Terminal bool          `json:"terminal,omitempty"`
	Header   HeaderView    `json:"header,omitzero"`
}

func (n *Node) counters(id uint32) (Counters, error) {
	var per []proxyTCProxyStats
	if err := n.objs.StatsMap.Lookup(id, &per); err != nil {
		return Counters{}, fmt.Errorf("read counters of proxy %d: %w", id, err)
	}
	c := Counters{Drops: map[string]uint64{}}
	for _, p := range per {
		c.InPackets += p.InPackets
		c.InBytes += p.InBytes
		c.OutPackets += p.OutPackets
		c.OutBytes += p.OutBytes
		c.Passed += p.Passed
		c.CacheUpdates += p.CacheUpdates
		c.ICMPErrors += p.IcmpErrors
		for r, v := range p.Drops {
			if v != 0 {
				c.Drops[DropReason(r).String()] += v
			}
		}
		c.OutDrops += p.OutDrops
	}
	return c, nil
}

// Show lists the proxy SIDs with counters and cache contents.
func (n *Node) Show() ([]Status, error) {
	ents, err := n.entries()
	if err != nil {
		return nil, err
	}
	ifs, err := n.ifaces()
	if err != nil {
		return nil, err
	}
	names := map[uint32]string{}
	for name, i := range ifs {
		names[uint32(i.Index)] = name
	}
	now := monoNow()
	flows := map[uint32][]CacheEntry{}
	var (
		fk proxyTCProxyFlowKey
		fv proxyTCProxyCache
	)
	it := n.objs.FlowsMap.Iterate()
	for it.Next(&fk, &fv) {
		flows[fk.Id] = append(flows[fk.Id], cacheEntry(&fv, now, flowString(&fk)))
	}
	var out []Status
	for _, e := range ents {
		st := Status{ID: e.cfg.Id, Spec: specOf(e, names), PeerRedirect: e.cfg.Flags&uint8(flagPeer) != 0}
		if st.Counters, err = n.counters(e.cfg.Id); err != nil {
			return nil, err
		}
		var c proxyTCProxyCache
		if err := n.objs.CacheMap.Lookup(e.cfg.Id, &c); err == nil && c.Valid != 0 {
			st.Cache = append(st.Cache, cacheEntry(&c, now, ""))
			if st.Spec.Behavior == EndAS {
				hv := st.Cache[0].Header
				st.Spec.Src, st.Spec.Tag = hv.Src, hv.Tag
				st.Spec.Segs = hv.Path
			}
		}
		st.Cache = append(st.Cache, flows[e.cfg.Id]...)
		if m := n.flowCap(e.cfg.Id); m != nil {
			it := m.Iterate()
			for it.Next(&fk, &fv) {
				st.Cache = append(st.Cache, cacheEntry(&fv, now, flowString(&fk)))
			}
			m.Close()
		}
		out = append(out, st)
	}
	return out, nil
}

func cacheEntry(c *proxyTCProxyCache, now uint64, flow string) CacheEntry {
	ce := CacheEntry{Flow: flow, Terminal: c.Terminal != 0}
	if now > c.UpdatedNs {
		ce.Age = time.Duration(now - c.UpdatedNs).Truncate(time.Millisecond)
	}
	if !ce.Terminal && c.Len <= uint32(len(c.Hdr)) {
		ce.Header = DecodeHeader(c.Hdr[:c.Len])
	}
	return ce
}

func flowString(k *proxyTCProxyFlowKey) string {
	var s, d netip.Addr
	if k.Family == unix.AF_INET {
		s = netip.AddrFrom4([4]byte(k.Saddr[:4]))
		d = netip.AddrFrom4([4]byte(k.Daddr[:4]))
	} else {
		s = netip.AddrFrom16(k.Saddr)
		d = netip.AddrFrom16(k.Daddr)
	}
	return fmt.Sprintf("proto %d %s:%d > %s:%d", k.Proto, s, ntohs(k.Sport), d, ntohs(k.Dport))
}

func ntohs(v uint16) uint16 { return v>>8 | v<<8 }

func specOf(e entry, names map[uint32]string) Spec {
	c := e.cfg
	s := Spec{SID: e.sid, Behavior: behaviorName(c.Behavior), Inner: Inner(c.Inner),
		OIF: names[c.Oif], IIF: names[c.Iif],
		Flow: c.Flags&uint8(flagFlow) != 0, FlowTimeout: time.Duration(c.FlowTimeoutNs), FlowMax: c.FlowMax,
		CSIDLBLen: int(c.CsidLblen), CSIDNFLen: int(c.CsidNflen)}
	if s.OIF == "" {
		s.OIF = fmt.Sprintf("if%d", c.Oif)
	}
	if s.IIF == "" {
		s.IIF = fmt.Sprintf("if%d", c.Iif)
	}
	switch {
	case s.Inner == InnerEthernet:
	case c.Flags&uint8(flagMAC) != 0:
		s.MAC = net.HardwareAddr(append([]byte(nil), c.Dmac[:]...))
	case c.NhFamily == unix.AF_INET:
		var a [4]byte
		putNative(a[:], c.Nh[0])
		s.NH = netip.AddrFrom4(a)
	default:
		var a [16]byte
		for i := range 4 {
			putNative(a[4*i:], c.Nh[i])
		}
		s.NH = netip.AddrFrom16(a)
	}
	return s
}

func putNative(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
