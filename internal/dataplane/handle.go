package dataplane

import (
	"fmt"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// Handle holds netlink sockets opened inside one network namespace: every
// call made through it acts on that namespace without switching threads
// (sysctls excepted, which go through nsutil.Do).
type Handle struct {
	netns  string
	nh     *netlink.Handle          // vishvananda handle (links, rules, genl lookup)
	socks  map[int]*nl.SocketHandle // our own sockets, extended ACK enabled
	mu     sync.Mutex               // guards seg6ID
	seg6ID uint16                   // genetlink family id of "SEG6", 0 until looked up

	// links caches linkIndex's answers (name → index) for the handle's
	// life, which is one request (an Execute's batch): ForgetLinks drops
	// it when an op may have created or removed interfaces.
	links map[string]int

	probeOnce sync.Once
	probed    Features
	isProbe   bool // the throwaway handle Probe works in: never probes itself
}

// Open opens netlink sockets inside the named namespace ("" = the current
// one). The sockets stay bound to that namespace for the Handle's lifetime.
func Open(netns string) (*Handle, error) {
	h := &Handle{netns: netns, socks: map[int]*nl.SocketHandle{}}
	err := nsutil.Do(netns, func() error {
		var err error
		h.nh, err = netlink.NewHandle(unix.NETLINK_ROUTE, unix.NETLINK_GENERIC)
		if err != nil {
			return fmt.Errorf("netlink handle: %w", err)
		}
		for _, proto := range []int{unix.NETLINK_ROUTE, unix.NETLINK_GENERIC} {
			s, err := nl.GetNetlinkSocketAt(vnetns.None(), vnetns.None(), proto)
			if err != nil {
				return fmt.Errorf("netlink socket %d: %w", proto, err)
			}
			// Kernel error strings ("Error: ...") make failures self-explaining.
			_ = s.SetExtAck(true)
			h.socks[proto] = &nl.SocketHandle{Socket: s}
		}
		return nil
	})
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("open dataplane in netns %q: %w", netns, err)
	}
	return h, nil
}

// Close releases the sockets.
func (h *Handle) Close() {
	if h == nil {
		return
	}
	if h.nh != nil {
		h.nh.Close()
		h.nh = nil
	}
	for _, s := range h.socks {
		s.Close()
	}
	h.socks = nil
}

// Netns returns the namespace name the handle was opened in ("" = current).
func (h *Handle) Netns() string { return h.netns }

// request returns a netlink request that executes on this handle's sockets.
func (h *Handle) request(msgType, flags int) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(msgType, flags)
	req.Sockets = h.socks
	return req
}

// LinkIndex resolves an interface name inside the namespace (cached for
// the handle's life: ForgetLinks).
func (h *Handle) LinkIndex(name string) (int, error) {
	if i, ok := h.links[name]; ok {
		return i, nil
	}
	l, err := h.nh.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("interface %s in netns %q: %w", name, h.netns, err)
	}
	if h.links == nil {
		h.links = map[string]int{}
	}
	h.links[name] = l.Attrs().Index
	return l.Attrs().Index, nil
}

// LinkMaster is the device ifindex is enslaved to (its index and kind,
// "bridge", "bond", "vrf", ...; 0 when none).
func (h *Handle) LinkMaster(ifindex int) (int, string, error) {
	l, err := h.nh.LinkByIndex(ifindex)
	if err != nil {
		return 0, "", fmt.Errorf("interface %d in netns %q: %w", ifindex, h.netns, err)
	}
	m := l.Attrs().MasterIndex
	if m == 0 {
		return 0, "", nil
	}
	ml, err := h.nh.LinkByIndex(m)
	if err != nil {
		return 0, "", fmt.Errorf("interface %d's master %d in netns %q: %w", ifindex, m, h.netns, err)
	}
	return m, ml.Type(), nil
}

// ForgetLinks drops the cached interface indexes: the next route or rule
// written looks its interfaces up again (after an op that may have
// created, removed or re-created interfaces).
func (h *Handle) ForgetLinks() {
	if h != nil {
		h.links = nil
	}
}

// linkNames returns an index→name resolver with a per-call cache.
func (h *Handle) linkNames() func(int) string {
	cache := map[int]string{}
	return func(idx int) string {
		if idx == 0 {
			return ""
		}
		if n, ok := cache[idx]; ok {
			return n
		}
		n := fmt.Sprintf("if%d", idx)
		if l, err := h.nh.LinkByIndex(idx); err == nil {
			n = l.Attrs().Name
		}
		cache[idx] = n
		return n
	}
}
