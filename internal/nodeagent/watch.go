package nodeagent

import (
	"context"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// LinkUps implements agent.LinkWatcher: an RTNLGRP_LINK subscription inside the
// node's namespace.
func (l *Local) LinkUps(ctx context.Context) (<-chan string, error) {
	var h vnetns.NsHandle
	var err error
	if l.netns == "" {
		h, err = vnetns.Get()
	} else {
		h, err = vnetns.GetFromPath(nsutil.Path(l.netns))
	}
	if err != nil {
		return nil, fmt.Errorf("node %s: open netns: %w", l.name, err)
	}
	defer h.Close()
	up := map[int]bool{}
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, fmt.Errorf("node %s: netlink: %w", l.name, err)
	}
	links, err := nh.LinkList()
	nh.Close()
	if err != nil {
		return nil, fmt.Errorf("node %s: list links: %w", l.name, err)
	}
	for _, k := range links {
		up[k.Attrs().Index] = isUp(k.Attrs())
	}
	updates := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	if err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{Namespace: &h}); err != nil {
		return nil, fmt.Errorf("node %s: watch links: %w", l.name, err)
	}
	out := make(chan string, 16)
	go func() {
		defer close(out)
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case u, ok := <-updates:
				if !ok {
					return
				}
				a := u.Attrs()
				now := isUp(a)
				was := up[a.Index]
				up[a.Index] = now
				if now && !was {
					select {
					case out <- a.Name:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	return out, nil
}

// isUp: administratively up with carrier.
func isUp(a *netlink.LinkAttrs) bool {
	return a.Flags&net.FlagUp != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0
}
