package testutil

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// Ping sends ICMP echo requests (ICMPv6 or ICMP after dst's family) from
// inside namespace ns and returns nil as soon as dst answers one. It needs no
// ping binary: it uses a raw socket opened in the namespace. timeout bounds
// the wait; it is not an assertion about speed.
func Ping(ns string, dst netip.Addr, timeout time.Duration) error {
	var fd int
	err := nsutil.Do(ns, func() error {
		var err error
		if dst.Is4() {
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		} else {
			fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("ping %s in %s: socket: %w", dst, ns, err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	id := uint16(rand.Uint32()) // not the pid: concurrent Pings of one process would share it
	var sa unix.Sockaddr
	if dst.Is4() {
		sa = &unix.SockaddrInet4{Addr: dst.As4()}
	} else {
		sa = &unix.SockaddrInet6{Addr: dst.As16()}
	}
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 1500)
	for seq := uint16(1); time.Now().Before(deadline); seq++ {
		req := make([]byte, 16)
		req[0] = 128 // ICMPv6 echo request; the kernel fills the checksum
		if dst.Is4() {
			req[0] = 8
		}
		binary.BigEndian.PutUint16(req[4:], id)
		binary.BigEndian.PutUint16(req[6:], seq)
		copy(req[8:], "segchain")
		if dst.Is4() {
			binary.BigEndian.PutUint16(req[2:], icmpChecksum(req))
		}
		if err := unix.Sendto(fd, req, 0, sa); err != nil {
			return fmt.Errorf("ping %s in %s: send: %w", dst, ns, err)
		}
		for time.Now().Before(deadline) {
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				break // resend
			}
			if err != nil {
				return fmt.Errorf("ping %s in %s: recv: %w", dst, ns, err)
			}
			if isEchoReply(buf[:n], from, dst, id) {
				return nil
			}
		}
	}
	return fmt.Errorf("ping %s in %s: no reply within %s", dst, ns, timeout)
}

func isEchoReply(b []byte, from unix.Sockaddr, dst netip.Addr, id uint16) bool {
	switch f := from.(type) {
	case *unix.SockaddrInet6:
		return netip.AddrFrom16(f.Addr) == dst && len(b) >= 8 && b[0] == 129 &&
			binary.BigEndian.Uint16(b[4:]) == id
	case *unix.SockaddrInet4:
		if netip.AddrFrom4(f.Addr) != dst || len(b) < 20 {
			return false
		}
		b = b[int(b[0]&0x0f)*4:] // raw IPv4 sockets deliver the IP header
		return len(b) >= 8 && b[0] == 0 && binary.BigEndian.Uint16(b[4:]) == id
	}
	return false
}

func icmpChecksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = (s & 0xffff) + s>>16
	}
	return ^uint16(s)
}
