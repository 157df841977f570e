package lab

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// Iface is an interface of a node as the kernel reports it.
type Iface struct {
	Name  string         `json:"name"`
	MAC   string         `json:"mac,omitempty"`
	Up    bool           `json:"up"`
	Addrs []netip.Prefix `json:"addrs"`
}

// Ifaces lists the interfaces of a node and their addresses (link-local
// included), read through netlink inside the node's namespace.
func (l *Lab) Ifaces(node string) ([]Iface, error) {
	ns, err := l.Netns(node)
	if err != nil {
		return nil, err
	}
	nh, err := netns.GetFromPath(nsutil.Path(ns))
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", ns, err)
	}
	defer nh.Close()
	h, err := netlink.NewHandleAt(nh)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", ns, err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links in %s: %w", ns, err)
	}
	var out []Iface
	for _, lk := range links {
		a := lk.Attrs()
		ifc := Iface{Name: a.Name, Up: a.Flags&net.FlagUp != 0, Addrs: []netip.Prefix{}}
		if len(a.HardwareAddr) > 0 {
			ifc.MAC = a.HardwareAddr.String()
		}
		addrs, err := h.AddrList(lk, unix.AF_UNSPEC)
		if err != nil {
			return nil, fmt.Errorf("list addresses of %s in %s: %w", a.Name, ns, err)
		}
		for _, ad := range addrs {
			ip, ok := netip.AddrFromSlice(ad.IP)
			if !ok {
				continue
			}
			ones, _ := ad.Mask.Size()
			ifc.Addrs = append(ifc.Addrs, netip.PrefixFrom(ip.Unmap(), ones))
		}
		out = append(out, ifc)
	}
	return out, nil
}
