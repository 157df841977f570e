package netfilter

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
)

// The netfilter loop: two devices inside the node. nf_in redirects the
// decapsulated inner packet into the ingress of LoopIn; a policy rule
// (priority RulePref: "iif LoopIn lookup Table") sends whatever enters
// there to Table, whose default routes (IPv4 and IPv6) point out of
// LoopOut, where nf_out re-encapsulates it. So the inner packet crosses
// PREROUTING (iif LoopIn), FORWARD (iif LoopIn, oif LoopOut) and
// POSTROUTING (oif LoopOut) with the node's own rule set and conntrack.
// Packets nf_out hands to the stack enter through LoopOut's ingress, which
// no rule diverts: the main table routes them.
//
// LoopIn is a persistent tun device (no process attached), not an
// Ethernet device: a tc redirect into the ingress of a device without a
// MAC header hands the packet to the stack at once (netif_receive_skb,
// __bpf_rx_skb_no_mac), where an Ethernet device (the veth pair of
// earlier versions) queues it on the CPU's backlog to be received later,
// a queue and a softirq round per packet (issue #32, docs/netfilter.md).
// LoopOut is a persistent tap device (nf_out works on Ethernet frames at
// its TCX egress, which runs before the device transmits: nothing is ever
// sent to the absent reader). Neither has a carrier; routes through them
// work (ignore_routes_with_linkdown is off by default).
const (
	LoopOut  = nodestate.NFLoopOut
	LoopIn   = nodestate.NFLoopIn
	Table    = 20038 // 0x4e46, "NF"
	RulePref = 99
	// RouteProto stamps the loop's rules and routes (rtnetlink protocol),
	// apart from the domain's (nodestate.Proto) so that the agent's
	// observation never takes them for drift.
	RouteProto = nodestate.ProtoNFLoop
	loopMTU    = 65535
	tapMTU     = 65521 // a tap device's maximum (inner packets that big cannot arrive encapsulated anyway)
)

// TunLoop selects the loop's layout when it is (re)built: true, LoopIn
// is a tun device (the synchronous hand-off above); false, the layout of
// earlier versions, LoopIn as LoopOut's veth peer (the tests compare the
// packets of both).
var TunLoop = true

var (
	// The gateways of Table's default routes: neighbours of the NOARP
	// LoopOut, owned by nobody, so that one neighbour entry per family
	// serves every inner destination.
	gw4 = netip.MustParseAddr("169.254.78.70")
	gw6 = netip.MustParseAddr("fe80::4e46")
)

// loopState is what nf_cfg_map needs of the loop.
type loopState struct {
	in, out       int
	inMAC, outMAC net.HardwareAddr
}

// sysctls the loop ends need, written before they come up. LoopIn
// forwards (IPv4 checks the input device's forwarding flag; IPv6 uses the
// node's global one, which an SRv6 node has on) and must not
// reverse-path-filter (the sources of inner packets are routed elsewhere).
// No IPv6 address of their own on either end: no ND, MLD or DAD traffic.
func loopSysctls() map[string]string {
	return map[string]string{
		"net/ipv6/conf/" + LoopIn + "/addr_gen_mode":  "1",
		"net/ipv6/conf/" + LoopOut + "/addr_gen_mode": "1",
		"net/ipv6/conf/" + LoopIn + "/accept_ra":      "0",
		"net/ipv6/conf/" + LoopOut + "/accept_ra":     "0",
		"net/ipv4/conf/" + LoopIn + "/forwarding":     "1",
		"net/ipv4/conf/" + LoopIn + "/rp_filter":      "0",
		"net/ipv4/conf/" + LoopOut + "/rp_filter":     "0",
	}
}

func writeSysctl(key, val string) error {
	if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(val), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, val, err)
	}
	return nil
}

// ensureLoop creates (idempotently) the loop, its sysctls, routes,
// neighbours and rules in the calling thread's namespace (run it under
// nsutil.Do).
func ensureLoop(nh *netlink.Handle) (loopState, error) {
	var st loopState
	// A loop of the other layout (earlier versions: a veth pair) is
	// replaced.
	if l, err := nh.LinkByName(LoopOut); err == nil {
		if _, veth := l.(*netlink.Veth); veth == TunLoop {
			if err := removeLoop(nh); err != nil {
				return st, fmt.Errorf("replace the older netfilter loop: %w", err)
			}
		}
	}
	if !TunLoop {
		if _, err := nh.LinkByName(LoopOut); err != nil {
			v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: LoopOut, MTU: loopMTU}, PeerName: LoopIn}
			if err := nh.LinkAdd(v); err != nil && !errors.Is(err, unix.EEXIST) {
				return st, fmt.Errorf("create netfilter loop %s: %w", LoopOut, err)
			}
		}
	}
	// Persistent tun/tap devices outlive this process; no queue is ever
	// attached (nothing reads or writes them from userspace).
	for _, d := range []struct {
		name string
		mode netlink.TuntapMode
	}{{LoopOut, netlink.TUNTAP_MODE_TAP}, {LoopIn, netlink.TUNTAP_MODE_TUN}} {
		if !TunLoop {
			break
		}
		if _, err := nh.LinkByName(d.name); err == nil {
			continue
		}
		t := &netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: d.name}, Mode: d.mode,
			Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_ONE_QUEUE}
		if err := nh.LinkAdd(t); err != nil && !errors.Is(err, unix.EEXIST) {
			return st, fmt.Errorf("create netfilter loop %s: %w", d.name, err)
		}
	}
	out, err := nh.LinkByName(LoopOut)
	if err != nil {
		return st, fmt.Errorf("netfilter loop %s: %w", LoopOut, err)
	}
	in, err := nh.LinkByName(LoopIn)
	if err != nil {
		return st, fmt.Errorf("netfilter loop %s: %w", LoopIn, err)
	}
	for k, v := range loopSysctls() {
		if err := writeSysctl(k, v); err != nil {
			return st, err
		}
	}
	mac := out.Attrs().HardwareAddr
	outMTU := loopMTU
	if TunLoop {
		outMTU = tapMTU
	}
	steps := []func() error{
		func() error { return nh.LinkSetARPOff(out) },
		func() error { return nh.LinkSetMTU(in, loopMTU) },
		func() error { return nh.LinkSetMTU(out, outMTU) },
		func() error { return nh.LinkSetUp(in) },
		func() error { return nh.LinkSetUp(out) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return st, fmt.Errorf("set up netfilter loop: %w", err)
		}
	}
	for _, gw := range []netip.Addr{gw4, gw6} {
		fam := unix.AF_INET6
		if gw.Is4() {
			fam = unix.AF_INET
		}
		if err := nh.NeighSet(&netlink.Neigh{LinkIndex: out.Attrs().Index, Family: fam,
			State: unix.NUD_PERMANENT, IP: gw.AsSlice(), HardwareAddr: mac}); err != nil {
			return st, fmt.Errorf("netfilter loop neighbour %s: %w", gw, err)
		}
		r := loopRoute(out.Attrs().Index, gw)
		if err := nh.RouteReplace(r); err != nil {
			if errors.Is(err, unix.EINVAL) && gw.Is4() {
				// Seen: the kernel refuses the on-link IPv4 gateway
				// ("Nexthop has invalid gateway") while lo is down.
				return st, fmt.Errorf("netfilter loop route %s: %w (is the loopback device up?)", r, err)
			}
			return st, fmt.Errorf("netfilter loop route %s: %w", r, err)
		}
		if err := nh.RuleAdd(loopRule(fam)); err != nil && !errors.Is(err, unix.EEXIST) {
			return st, fmt.Errorf("netfilter loop rule: %w", err)
		}
	}
	// Re-read: the MACs are what the frames need.
	if in, err = nh.LinkByName(LoopIn); err != nil {
		return st, err
	}
	return loopState{in: in.Attrs().Index, out: out.Attrs().Index,
		inMAC: in.Attrs().HardwareAddr, outMAC: mac}, nil
}

func loopRoute(oif int, gw netip.Addr) *netlink.Route {
	r := &netlink.Route{LinkIndex: oif, Table: Table, Gw: gw.AsSlice(), Protocol: RouteProto}
	if gw.Is4() {
		r.Dst = &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
		r.Flags = int(netlink.FLAG_ONLINK)
	} else {
		r.Dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	return r
}

func loopRule(fam int) *netlink.Rule {
	r := netlink.NewRule()
	r.Family = fam
	r.Priority = RulePref
	r.Table = Table
	r.IifName = LoopIn
	r.Protocol = RouteProto
	return r
}

// removeLoop deletes the rules and the veth pair (its routes and
// neighbours go with it). Missing pieces are not errors.
func removeLoop(nh *netlink.Handle) error {
	var errs []error
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		if err := nh.RuleDel(loopRule(fam)); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete netfilter loop rule: %w", err))
		}
	}
	for _, name := range []string{LoopOut, LoopIn} {
		if l, err := nh.LinkByName(name); err == nil {
			if err := nh.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("delete netfilter loop %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// loopRules lists the loop's policy rules present (observation).
func loopRules(nh *netlink.Handle) (int, error) {
	n := 0
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := nh.RuleList(fam)
		if err != nil {
			return 0, err
		}
		for _, r := range rs {
			if r.Priority == RulePref && r.Table == Table && r.IifName == LoopIn {
				n++
			}
		}
	}
	return n, nil
}

// newHandle opens a netlink handle in the calling thread's namespace.
func newHandle() (*netlink.Handle, error) { return netlink.NewHandle() }
