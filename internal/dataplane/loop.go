package dataplane

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nodestate"
)

// The service loop carries a packet whose next SID is served by a tc
// (TCX) program on the same node (the SR proxies, the SR-aware firewall)
// back into an ingress hook. Those SIDs have no route of their own: the
// programs catch them on ingress, before routing. A packet the node itself
// has just processed (native End, End.X ...; or an eBPF service whose output
// the FIB forwards) never goes through ingress again, so a route lookup of
// such a SID found no route (or the node's default route) and the packet was
// lost: two services back to back on one node lost 100 % of their traffic.
//
// nodestate.LoopDev and LoopPeer are the two ends of a veth pair inside the node.
// A SID that needs it gets a route "via LoopGateway dev LoopDev": the stack
// (after native End) or bpf_fib_lookup (after an eBPF service) sends the
// packet out of LoopDev, it arrives on LoopPeer's ingress where the TCX
// programs run (they attach to every interface) and serve it. LoopDev is
// NOARP, so its neighbours resolve to its own MAC with no neighbour
// discovery (the gateway's entry is made permanent); LoopPeer carries the
// same MAC, so the frame is for this host.
// Both have the largest MTU a veth takes: the loop never limits a packet.
const (
	LoopDev  = nodestate.LoopDev
	LoopPeer = nodestate.LoopPeer
	loopMTU  = 65535
)

// EnsureLoop creates the service loop if it is missing (idempotent) and
// sets both ends up.
func (h *Handle) EnsureLoop() error {
	if _, err := h.nh.LinkByName(LoopDev); err == nil {
		return h.loopUp()
	}
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: LoopDev, MTU: loopMTU}, PeerName: LoopPeer}
	h.ForgetLinks()
	if err := h.nh.LinkAdd(v); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create service loop %s in netns %q: %w", LoopDev, h.netns, err)
	}
	return h.loopUp()
}

func (h *Handle) loopUp() error {
	dev, err := h.nh.LinkByName(LoopDev)
	if err != nil {
		return fmt.Errorf("service loop %s in netns %q: %w", LoopDev, h.netns, err)
	}
	peer, err := h.nh.LinkByName(LoopPeer)
	if err != nil {
		return fmt.Errorf("service loop %s in netns %q: %w", LoopPeer, h.netns, err)
	}
	steps := []func() error{
		func() error { return h.nh.LinkSetARPOff(dev) },
		func() error { return h.nh.LinkSetMTU(peer, loopMTU) },
		func() error { return h.nh.LinkSetHardwareAddr(peer, dev.Attrs().HardwareAddr) },
		func() error { return h.nh.LinkSetUp(peer) },
		func() error { return h.nh.LinkSetUp(dev) },
		// A permanent neighbour for the gateway: bpf_fib_lookup then
		// succeeds from the first packet on (a NOARP neighbour is only
		// created by the stack's first use, and may be collected).
		func() error {
			return h.nh.NeighSet(&netlink.Neigh{LinkIndex: dev.Attrs().Index, Family: unix.AF_INET6,
				State: unix.NUD_PERMANENT, IP: nodestate.LoopGateway.AsSlice(), HardwareAddr: dev.Attrs().HardwareAddr})
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("set up service loop in netns %q: %w", h.netns, err)
		}
	}
	return nil
}

// RemoveLoopIfUnused deletes the service loop when no route uses it any
// more (the last SID that needed it is gone).
func (h *Handle) RemoveLoopIfUnused() error {
	dev, err := h.nh.LinkByName(LoopDev)
	if err != nil {
		return nil // not there
	}
	rs, err := h.Routes()
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Dev == LoopDev {
			return nil
		}
	}
	h.ForgetLinks()
	if err := h.nh.LinkDel(dev); err != nil {
		return fmt.Errorf("delete service loop in netns %q: %w", h.netns, err)
	}
	return nil
}
