package oam

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// How boundary marking follows the chain (docs/oam.md "O-flag
// sampling"): the O-flagged copies must change when apply (or an
// operator's `ip`) changes the chain's routes or rules. Re-reading them
// every second cost a route and a rule dump per sampled chain per second;
// instead one netlink socket per sampled namespace (per process) joins
// the IPv4 and IPv6 route and rule groups, and a notification is only a
// trigger: the state comes from segchain's own dump (dataplane.Handle,
// which decodes what vishvananda/netlink's decoder does not, the seg6
// HMAC routes). The marker's own changes (protocol ProtoSample) are not
// triggers, so it does not follow itself.

// rtWatch is a subscription to a namespace's route and rule
// notifications.
type rtWatch struct {
	f    *os.File
	done chan struct{}
}

// rtGroups are the rtnetlink groups whose notifications can change what
// a chain's marking holds.
var rtGroups = []int{unix.RTNLGRP_IPV4_ROUTE, unix.RTNLGRP_IPV6_ROUTE, unix.RTNLGRP_IPV4_RULE, unix.RTNLGRP_IPV6_RULE}

// watchRoutes subscribes, in ns ("" the caller's own namespace), to the
// route and rule notifications and calls kick for each batch read that
// holds one not caused by boundary marking, and kick(true) when the
// socket overran (ENOBUFS: notifications were lost, the state must be
// read again). close ends it.
func watchRoutes(ns string, kick func(overrun bool)) (*rtWatch, error) {
	var fd int
	err := nsutil.Do(ns, func() error {
		// The socket belongs to the namespace it is created in, whatever
		// the thread does after.
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("route notifications in %q: %w", ns, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("route notifications: bind: %w", err)
	}
	for _, g := range rtGroups {
		if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, g); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("route notifications: join group %d: %w", g, err)
		}
	}
	// An apply that rewrites many routes at once should not overrun it;
	// if it does, the overrun is a trigger too.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 1<<20)
	w := &rtWatch{f: os.NewFile(uintptr(fd), "rtnetlink"), done: make(chan struct{})}
	go w.read(kick)
	return w, nil
}

func (w *rtWatch) read(kick func(overrun bool)) {
	defer close(w.done)
	buf := make([]byte, 1<<16)
	for {
		n, err := w.f.Read(buf)
		if errors.Is(err, unix.ENOBUFS) {
			kick(true)
			continue
		}
		if err != nil {
			return // closed
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			kick(false) // unreadable: take it for a change
			continue
		}
		for _, m := range msgs {
			if rtTrigger(m) {
				kick(false)
				break
			}
		}
	}
}

// close ends the subscription.
func (w *rtWatch) close() {
	w.f.Close()
	<-w.done
}

// rtTrigger reports whether notification m may change a chain's marking:
// a route or rule added or deleted that is not boundary marking's own
// (protocol ProtoSample) and not a cached clone.
func rtTrigger(m syscall.NetlinkMessage) bool {
	switch m.Header.Type {
	case unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
		if len(m.Data) < unix.SizeofRtMsg {
			return true
		}
		// struct rtmsg: family, dst_len, src_len, tos, table, protocol,
		// scope, type, flags (u32).
		return m.Data[5] != ProtoSample && binary.NativeEndian.Uint32(m.Data[8:12])&unix.RTM_F_CLONED == 0
	case unix.RTM_NEWRULE, unix.RTM_DELRULE:
		return ruleProto(m.Data) != ProtoSample
	}
	return false
}

// ruleProto is the FRA_PROTOCOL attribute of a rule notification (after
// struct fib_rule_hdr), or -1.
func ruleProto(b []byte) int {
	const hdr = 12 // struct fib_rule_hdr
	if len(b) < hdr {
		return -1
	}
	for b = b[hdr:]; len(b) >= unix.SizeofRtAttr; {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) &^ unix.NLA_F_NESTED
		if l < unix.SizeofRtAttr || l > len(b) {
			return -1
		}
		if typ == unix.FRA_PROTOCOL && l > unix.SizeofRtAttr {
			return int(b[unix.SizeofRtAttr])
		}
		l = (l + unix.RTA_ALIGNTO - 1) &^ (unix.RTA_ALIGNTO - 1)
		if l > len(b) {
			return -1
		}
		b = b[l:]
	}
	return -1
}
