package dataplane

import (
	"context"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// Carrier reports whether a link is administratively up and has carrier
// (IFF_UP and IFF_LOWER_UP).
func Carrier(a *netlink.LinkAttrs) bool {
	return a.Flags&net.FlagUp != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0
}

// WatchCarrier follows the carrier of the links of namespace netns ("" =
// the current one): it hands initial every link's carrier now (by name),
// then, from one goroutine, calls changed for every link update (RTNLGRP_
// LINK) until ctx ends. The returned channel is closed when that goroutine
// has returned. initial runs before the subscription, so no change is
// reported before it.
func WatchCarrier(ctx context.Context, netns string, initial func(map[string]bool), changed func(name string, carrier bool)) (<-chan struct{}, error) {
	var h vnetns.NsHandle
	var err error
	if netns == "" {
		h, err = vnetns.Get()
	} else {
		h, err = vnetns.GetFromPath(nsutil.Path(netns))
	}
	if err != nil {
		return nil, fmt.Errorf("open netns %q: %w", netns, err)
	}
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("netns %q: netlink: %w", netns, err)
	}
	links, err := nh.LinkList()
	nh.Close()
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("netns %q: list links: %w", netns, err)
	}
	now := make(map[string]bool, len(links))
	for _, l := range links {
		now[l.Attrs().Name] = Carrier(l.Attrs())
	}
	initial(now)
	updates := make(chan netlink.LinkUpdate, 64)
	stop := make(chan struct{})
	err = netlink.LinkSubscribeWithOptions(updates, stop, netlink.LinkSubscribeOptions{Namespace: &h})
	h.Close() // the subscription holds its own socket in the namespace
	if err != nil {
		return nil, fmt.Errorf("netns %q: watch links: %w", netns, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(stop)
		for {
			select {
			case <-ctx.Done():
				return
			case u, ok := <-updates:
				if !ok {
					return
				}
				changed(u.Attrs().Name, Carrier(u.Attrs()))
			}
		}
	}()
	return done, nil
}
