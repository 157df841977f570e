package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// baseSysctls are set on every node before any interface is created, on
// "all" and "default", so that every interface inherits them: no DAD, no
// router solicitations or RAs (the lab is fully static), addresses kept
// when a link goes down, and SRv6 processing enabled.
var baseSysctls = []struct{ key, val string }{
	{"net/ipv6/conf/all/accept_dad", "0"},
	{"net/ipv6/conf/default/accept_dad", "0"},
	{"net/ipv6/conf/all/router_solicitations", "0"},
	{"net/ipv6/conf/default/router_solicitations", "0"},
	{"net/ipv6/conf/all/accept_ra", "0"},
	{"net/ipv6/conf/default/accept_ra", "0"},
	{"net/ipv6/conf/all/keep_addr_on_down", "1"},
	{"net/ipv6/conf/default/keep_addr_on_down", "1"},
	{"net/ipv6/conf/all/seg6_enabled", "1"},
	{"net/ipv6/conf/default/seg6_enabled", "1"},
	// lo predates "default": set it explicitly (SIDs are often on lo).
	{"net/ipv6/conf/lo/seg6_enabled", "1"},
}

var routerSysctls = []struct{ key, val string }{
	{"net/ipv4/ip_forward", "1"},
	{"net/ipv4/conf/all/forwarding", "1"},
	{"net/ipv6/conf/all/forwarding", "1"},
	{"net/ipv6/conf/default/forwarding", "1"},
}

// Up creates the lab: a state file first, then one namespace per node,
// then the links. On any failure it removes everything it created and
// returns the error. It refuses (ErrExists) when the lab already has a state
// file or any of its namespaces exists.
func Up(t Topology) (*Lab, error) {
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("lab topology: %w", err)
	}
	name := t.labName()
	l := &Lab{
		Name:       name,
		Nodes:      make(map[string]string, len(t.Nodes)),
		Created:    time.Now().UTC().Truncate(time.Second),
		File:       t.File,
		Namespaces: []string{},
	}
	if _, err := Get(name); err == nil {
		return nil, fmt.Errorf("lab %s: %w (state file %s; run `segchain lab down --lab %s` first)",
			name, ErrExists, statePath(name), name)
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	var taken []string
	for _, n := range t.Nodes {
		ns := NetnsName(name, n.Name)
		l.Nodes[n.Name] = ns
		if nsutil.Exists(ns) {
			taken = append(taken, ns)
		}
	}
	if len(taken) > 0 {
		return nil, fmt.Errorf("lab %s: namespace %v: %w (not created by this lab; remove it or choose another --lab)",
			name, taken, ErrExists)
	}
	if err := l.create(); err != nil {
		return nil, err
	}
	b := &builder{lab: l, topo: t, ns: map[string]netns.NsHandle{}, h: map[string]*netlink.Handle{}}
	err := b.build()
	b.close()
	if err != nil {
		if derr := l.down(); derr != nil {
			err = errors.Join(err, fmt.Errorf("rollback: %w", derr))
		}
		return nil, fmt.Errorf("lab %s up: %w", name, err)
	}
	l.Complete = true
	if err := l.save(); err != nil {
		return l, err
	}
	return l, nil
}

// builder holds the open namespace and netlink handles while Up runs.
type builder struct {
	lab  *Lab
	topo Topology
	ns   map[string]netns.NsHandle  // node → namespace handle
	h    map[string]*netlink.Handle // node → netlink handle in it
}

func (b *builder) close() {
	for _, h := range b.h {
		h.Close()
	}
	for _, ns := range b.ns {
		ns.Close()
	}
}

// ifaceInfo is what the neighbour pass needs about one created interface.
type ifaceInfo struct {
	node, iface string
	index       int
	mac         net.HardwareAddr
	addrs       []netip.Prefix
}

func (b *builder) build() error {
	for _, n := range b.topo.Nodes {
		if err := b.addNode(n); err != nil {
			return err
		}
	}
	var pairs [][2]ifaceInfo
	for i, lk := range b.topo.Links {
		a, z, err := b.addLink(lk)
		if err != nil {
			return fmt.Errorf("links[%d] %s-%s: %w", i, lk.A, lk.B, err)
		}
		pairs = append(pairs, [2]ifaceInfo{a, z})
	}
	for _, p := range pairs {
		for _, e := range p {
			if err := b.waitReady(e); err != nil {
				return err
			}
		}
		if err := b.addNeighbours(p[0], p[1]); err != nil {
			return err
		}
		if err := b.addNeighbours(p[1], p[0]); err != nil {
			return err
		}
	}
	// User sysctls last: they may name interfaces.
	for _, n := range b.topo.Nodes {
		if len(n.Sysctls) == 0 {
			continue
		}
		keys := make([]string, 0, len(n.Sysctls))
		for k := range n.Sysctls {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		err := nsutil.Do(b.lab.Nodes[n.Name], func() error {
			for _, k := range keys {
				p, err := sysctlPath(k)
				if err != nil {
					return err
				}
				if err := writeProc(p, n.Sysctls[k]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

func (b *builder) addNode(n Node) error {
	ns := b.lab.Nodes[n.Name]
	// Record before creating so a crash leaves a trace Down can follow.
	b.lab.Namespaces = append(b.lab.Namespaces, ns)
	if err := b.lab.save(); err != nil {
		return err
	}
	if err := nsutil.Create(ns); err != nil {
		// O_EXCL lost a race: the namespace is not ours, forget it.
		b.lab.Namespaces = slices.DeleteFunc(b.lab.Namespaces, func(s string) bool { return s == ns })
		if serr := b.lab.save(); serr != nil {
			err = errors.Join(err, serr)
		}
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("node %s: %w", n.Name, ErrExists)
		}
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	h, err := netns.GetFromPath(nsutil.Path(ns))
	if err != nil {
		return fmt.Errorf("node %s: open netns: %w", n.Name, err)
	}
	b.ns[n.Name] = h
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return fmt.Errorf("node %s: netlink handle: %w", n.Name, err)
	}
	b.h[n.Name] = nh
	lo, err := nh.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("node %s: lo: %w", n.Name, err)
	}
	if err := nh.LinkSetUp(lo); err != nil {
		return fmt.Errorf("node %s: lo up: %w", n.Name, err)
	}
	err = nsutil.Do(ns, func() error {
		for _, s := range baseSysctls {
			if err := writeProc("/proc/sys/"+s.key, s.val); err != nil {
				return err
			}
		}
		if n.NoSRv6 {
			for _, k := range []string{"all", "default", "lo"} {
				if err := writeProc("/proc/sys/net/ipv6/conf/"+k+"/seg6_enabled", "0"); err != nil {
					return err
				}
			}
		}
		if n.Router {
			for _, s := range routerSysctls {
				if err := writeProc("/proc/sys/"+s.key, s.val); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// addLink creates the veth pair directly across the two namespaces: the
// kernel checks each name in its own namespace, so equal names on both
// sides (eth0 ↔ eth0) are fine.
func (b *builder) addLink(lk Link) (ifaceInfo, ifaceInfo, error) {
	ha, hb := b.h[lk.A.Node], b.h[lk.B.Node]
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: lk.A.Iface, MTU: lk.MTU},
		PeerName:      lk.B.Iface,
		PeerNamespace: netlink.NsFd(b.ns[lk.B.Node]),
	}
	if err := ha.LinkAdd(veth); err != nil {
		return ifaceInfo{}, ifaceInfo{}, fmt.Errorf("create veth: %w", err)
	}
	b.lab.Links = append(b.lab.Links, LinkState{
		A: lk.A.String(), B: lk.B.String(),
		AAddrs: prefixStrings(lk.A.Addrs), BAddrs: prefixStrings(lk.B.Addrs),
	})
	if err := b.lab.save(); err != nil {
		return ifaceInfo{}, ifaceInfo{}, err
	}
	a, err := b.setupEnd(ha, lk.A)
	if err != nil {
		return ifaceInfo{}, ifaceInfo{}, err
	}
	z, err := b.setupEnd(hb, lk.B)
	if err != nil {
		return ifaceInfo{}, ifaceInfo{}, err
	}
	return a, z, nil
}

func (b *builder) setupEnd(h *netlink.Handle, e Endpoint) (ifaceInfo, error) {
	link, err := h.LinkByName(e.Iface)
	if err != nil {
		return ifaceInfo{}, fmt.Errorf("%s: %w", e, err)
	}
	for _, p := range e.Addrs {
		a := &netlink.Addr{IPNet: prefixToIPNet(p)}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(link, a); err != nil {
			return ifaceInfo{}, fmt.Errorf("%s: add address %s: %w", e, p, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return ifaceInfo{}, fmt.Errorf("%s: up: %w", e, err)
	}
	seg6 := "1"
	for _, n := range b.topo.Nodes {
		if n.Name == e.Node && n.NoSRv6 {
			seg6 = "0"
		}
	}
	err = nsutil.Do(b.lab.Nodes[e.Node], func() error {
		return writeProc("/proc/sys/net/ipv6/conf/"+e.Iface+"/seg6_enabled", seg6)
	})
	if err != nil {
		return ifaceInfo{}, fmt.Errorf("%s: %w", e, err)
	}
	return ifaceInfo{
		node: e.Node, iface: e.Iface, index: link.Attrs().Index,
		mac: link.Attrs().HardwareAddr, addrs: e.Addrs,
	}, nil
}

// readyTimeout bounds the wait for a veth's carrier. The kernel's linkwatch
// may delay the carrier event by up to a second (veth ends in different
// namespaces often share an ifindex, which makes the event non-urgent).
const readyTimeout = 10 * time.Second

// waitReady waits until the interface is operationally up and has its
// link-local address: before that its qdisc drops every packet, so a lab
// handed out earlier would lose the first packets of a test or benchmark.
func (b *builder) waitReady(e ifaceInfo) error {
	h := b.h[e.node]
	want := linkLocal(e.mac)
	deadline := time.Now().Add(readyTimeout)
	for {
		link, err := h.LinkByIndex(e.index)
		if err != nil {
			return fmt.Errorf("%s:%s: %w", e.node, e.iface, err)
		}
		up := link.Attrs().OperState == netlink.OperUp
		hasLL := false
		if up {
			addrs, err := h.AddrList(link, unix.AF_INET6)
			if err != nil {
				return fmt.Errorf("%s:%s: list addresses: %w", e.node, e.iface, err)
			}
			for _, a := range addrs {
				hasLL = hasLL || a.IP.Equal(net.IP(want.AsSlice()))
			}
		}
		if up && hasLL {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s:%s: not ready after %s (oper up %v, link-local %s present %v)",
				e.node, e.iface, readyTimeout, up, want, hasLL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addNeighbours installs permanent neighbour entries on local for every
// address of peer, including the peer's EUI-64 link-local address, so no
// traffic in the lab depends on neighbour discovery or ARP.
func (b *builder) addNeighbours(local, peer ifaceInfo) error {
	h := b.h[local.node]
	ips := []netip.Addr{linkLocal(peer.mac)}
	for _, p := range peer.addrs {
		ips = append(ips, p.Addr())
	}
	for _, ip := range ips {
		fam := unix.AF_INET6
		if ip.Is4() {
			fam = unix.AF_INET
		}
		n := &netlink.Neigh{
			LinkIndex:    local.index,
			Family:       fam,
			State:        netlink.NUD_PERMANENT,
			IP:           net.IP(ip.AsSlice()),
			HardwareAddr: peer.mac,
		}
		if err := h.NeighSet(n); err != nil {
			return fmt.Errorf("%s:%s: neighbour %s: %w", local.node, local.iface, ip, err)
		}
	}
	return nil
}

// linkLocal is the EUI-64 link-local address the kernel derives from mac
// (addr_gen_mode 0, the default).
func linkLocal(mac net.HardwareAddr) netip.Addr {
	var a [16]byte
	a[0], a[1] = 0xfe, 0x80
	if len(mac) == 6 {
		a[8], a[9], a[10] = mac[0]^0x02, mac[1], mac[2]
		a[11], a[12] = 0xff, 0xfe
		a[13], a[14], a[15] = mac[3], mac[4], mac[5]
	}
	return netip.AddrFrom16(a)
}

func prefixToIPNet(p netip.Prefix) *net.IPNet {
	bits := 128
	if p.Addr().Is4() {
		bits = 32
	}
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}

func prefixStrings(ps []netip.Prefix) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return s
}

// writeProc writes one /proc/sys file in the calling thread's namespace.
func writeProc(path, val string) error {
	if err := os.WriteFile(path, []byte(val), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", path, val, err)
	}
	return nil
}
