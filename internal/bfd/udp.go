package bfd

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Link is where a single-hop session runs: this end's address on the
// link, the peer's, and the interface.
type Link struct {
	Dev         string
	Local, Peer netip.Addr
}

func (l Link) String() string { return fmt.Sprintf("%s → %s dev %s", l.Local, l.Peer, l.Dev) }

// UDP is a session over RFC 5881 single-hop IPv6: it receives on
// [Local]:3784 bound to Dev and sends to [Peer]:3784 from one source port
// of 49152–65535, with hop limit 255; a received packet with another hop
// limit, or from another address than Peer, is dropped and counted.
type UDP struct {
	*Session
	link   Link
	rx, tx *net.UDPConn
	wg     sync.WaitGroup
	close  sync.Once
}

// ListenUDP opens the sockets of a session on link in the calling
// thread's network namespace and starts it. The addresses may still be
// tentative (IPV6_FREEBIND): packets flow once DAD is over.
func ListenUDP(link Link, cfg Config, onChange func(Event)) (*UDP, error) {
	if !link.Local.Is6() || !link.Peer.Is6() || link.Local.Is4In6() || link.Peer.Is4In6() {
		return nil, fmt.Errorf("bfd %s: IPv6 addresses only", link)
	}
	u := &UDP{link: link}
	var err error
	u.rx, err = listen(link, Port, true)
	if err != nil {
		return nil, fmt.Errorf("bfd %s: listen on port %d: %w", link, Port, err)
	}
	// One source port for the whole session (RFC 5881 §4), drawn until
	// a free one is found.
	for i := 0; i < 64; i++ {
		port := SourcePortMin + mrand.IntN(SourcePortMax-SourcePortMin+1)
		u.tx, err = listen(link, port, false)
		if !errors.Is(err, unix.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		u.rx.Close()
		return nil, fmt.Errorf("bfd %s: source port: %w", link, err)
	}
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(link.Peer, Port))
	u.Session, err = NewSession(cfg, func(b []byte) error {
		_, err := u.tx.WriteToUDP(b, dst)
		return err
	}, onChange)
	if err != nil {
		u.rx.Close()
		u.tx.Close()
		return nil, err
	}
	u.wg.Add(2)
	go func() { defer u.wg.Done(); u.Run() }()
	go func() { defer u.wg.Done(); u.read() }()
	return u, nil
}

// SourcePort is the port this end sends from.
func (u *UDP) SourcePort() int { return u.tx.LocalAddr().(*net.UDPAddr).Port }

// Close stops the session and closes its sockets.
func (u *UDP) Close() {
	u.close.Do(func() {
		u.Session.Close()
		u.rx.Close()
		u.tx.Close()
		u.wg.Wait()
	})
}

func listen(link Link, port int, rx bool) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			set := func(level, opt, v int) {
				if serr == nil {
					serr = unix.SetsockoptInt(int(fd), level, opt, v)
				}
			}
			if link.Dev != "" {
				if serr = unix.BindToDevice(int(fd), link.Dev); serr != nil {
					serr = fmt.Errorf("bind to %s: %w", link.Dev, serr)
					return
				}
			}
			set(unix.IPPROTO_IPV6, unix.IPV6_FREEBIND, 1)
			set(unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, HopLimit)
			if rx {
				set(unix.IPPROTO_IPV6, unix.IPV6_RECVHOPLIMIT, 1)
			}
		})
		return errors.Join(err, serr)
	}}
	c, err := lc.ListenPacket(context.Background(), "udp6", netip.AddrPortFrom(link.Local, uint16(port)).String())
	if err != nil {
		return nil, err
	}
	return c.(*net.UDPConn), nil
}

func (u *UDP) read() {
	buf := make([]byte, 1500)
	oob := make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, from, err := u.rx.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if from.Addr().Unmap() != u.link.Peer {
			u.Drop(ReasonSource)
			continue
		}
		if hl, ok := hopLimit(oob[:oobn]); !ok || hl != HopLimit {
			u.Drop(ReasonHopLimit)
			continue
		}
		u.Receive(buf[:n])
	}
}

// hopLimit is the IPV6_HOPLIMIT control message's value.
func hopLimit(oob []byte) (int, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_HOPLIMIT && len(m.Data) >= 4 {
			return int(int32(nativeEndian.Uint32(m.Data))), true
		}
	}
	return 0, false
}
