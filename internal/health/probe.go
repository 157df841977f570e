package health

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// ProbeMark is the mark of in-band probes: the headend's pool selector
// lets marked packets pass (a probe names its instance). Equal to
// internal/pool/datapath.ProbeMark (its test checks).
const ProbeMark = 0x5c0029

func newProber(t Target) (prober, error) {
	switch t.Spec.Kind {
	case Carrier:
		return newCarrier(t)
	case Echo:
		return newEcho(t)
	case TCP:
		return &tcpProber{t: t}, nil
	case SRv6:
		return newInband(t)
	}
	return nil, fmt.Errorf("unknown check kind %q", t.Spec.Kind)
}

// carrierProber reads the SF interface's flags.
type carrierProber struct {
	h  *netlink.Handle
	ns vnetns.NsHandle
	t  Target
}

func newCarrier(t Target) (*carrierProber, error) {
	ns, err := vnetns.GetFromPath(nsutil.Path(t.Netns))
	if t.Netns == "" {
		ns, err = vnetns.Get()
	}
	if err != nil {
		return nil, fmt.Errorf("open netns %q: %w", t.Netns, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, err
	}
	return &carrierProber{h: h, ns: ns, t: t}, nil
}

func (p *carrierProber) check(context.Context) (bool, bool, string) {
	l, err := p.h.LinkByName(p.t.Iface)
	if err != nil {
		return false, false, fmt.Sprintf("%s: %v", p.t.Iface, err)
	}
	a := l.Attrs()
	if a.Flags&net.FlagUp == 0 || a.RawFlags&unix.IFF_LOWER_UP == 0 {
		return false, false, fmt.Sprintf("%s has no carrier", p.t.Iface)
	}
	return true, false, ""
}
func (p *carrierProber) result() (bool, string) { return false, "" }
func (p *carrierProber) Close() error           { p.h.Close(); return p.ns.Close() }

// tcpProber connects within the timeout.
type tcpProber struct{ t Target }

func (p *tcpProber) check(ctx context.Context) (bool, bool, string) {
	var err error
	dst := netip.AddrPortFrom(p.t.Addr, uint16(p.t.Port)).String()
	_ = nsutil.Do(p.t.Netns, func() error {
		var c net.Conn
		c, err = (&net.Dialer{Timeout: p.t.Spec.Timeout}).DialContext(ctx, "tcp", dst)
		if err == nil {
			c.Close()
		}
		return nil
	})
	if err != nil {
		return false, false, fmt.Sprintf("connect %s: %v", dst, err)
	}
	return true, false, ""
}
func (p *tcpProber) result() (bool, string) { return false, "" }
func (p *tcpProber) Close() error           { return nil }

// asyncProber sends a numbered probe per tick; a reader marks the highest
// number answered; the result of probe n is read at the next tick.
type asyncProber struct {
	sent     uint64
	answered atomic.Uint64
	what     string
	closers  []func() error
}

func (a *asyncProber) result() (bool, string) {
	if a.answered.Load() >= a.sent {
		return true, ""
	}
	return false, fmt.Sprintf("%s %d not answered within the interval", a.what, a.sent)
}

func (a *asyncProber) Close() error {
	for _, c := range a.closers {
		c()
	}
	return nil
}

func (a *asyncProber) saw(n uint64) {
	for {
		o := a.answered.Load()
		if n <= o || a.answered.CompareAndSwap(o, n) {
			return
		}
	}
}

// echoProber sends ICMPv6 echo requests.
type echoProber struct {
	asyncProber
	fd  int
	id  uint16
	dst unix.Sockaddr
}

func socketIn(netns string, domain, typ, proto int) (int, error) {
	fd := -1
	err := nsutil.Do(netns, func() error {
		var err error
		fd, err = unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
		return err
	})
	return fd, err
}

func newEcho(t Target) (*echoProber, error) {
	fd, err := socketIn(t.Netns, unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_ICMPV6)
	if err != nil {
		return nil, fmt.Errorf("icmpv6 socket: %w", err)
	}
	var id [2]byte
	rand.Read(id[:])
	p := &echoProber{fd: fd, id: binary.BigEndian.Uint16(id[:]), dst: &unix.SockaddrInet6{Addr: t.Addr.As16()}}
	p.what = "echo request"
	p.closers = append(p.closers, func() error { return unix.Close(fd) })
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	go func() {
		b := make([]byte, 1500)
		for {
			n, _, err := unix.Recvfrom(fd, b, 0)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			if n >= 8 && b[0] == 129 && binary.BigEndian.Uint16(b[4:]) == p.id {
				p.saw(uint64(binary.BigEndian.Uint16(b[6:])))
			}
		}
	}()
	return p, nil
}

func (p *echoProber) check(context.Context) (bool, bool, string) {
	p.sent++
	b := make([]byte, 8)
	b[0] = 128
	binary.BigEndian.PutUint16(b[4:], p.id)
	binary.BigEndian.PutUint16(b[6:], uint16(p.sent))
	if err := unix.Sendto(p.fd, b, 0, p.dst); err != nil {
		return false, false, fmt.Sprintf("send echo: %v", err)
	}
	// Sequence numbers are 16 bits on the wire: compare in that space.
	p.sent = uint64(uint16(p.sent))
	return false, true, ""
}

// inbandProber sends an SRv6 probe along the instance's SID list; it comes
// back as a UDP datagram to the prober (after the chain's egress).
type inbandProber struct {
	asyncProber
	fd    int
	t     Target
	port  uint16
	magic uint64
	dst   unix.Sockaddr
}

func newInband(t Target) (*inbandProber, error) {
	if len(t.Segs) == 0 || !t.Src.Is6() {
		return nil, fmt.Errorf("in-band probe needs a SID list and an IPv6 source")
	}
	fd, err := socketIn(t.Netns, unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		return nil, fmt.Errorf("raw socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, ProbeMark); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mark probes: %w", err)
	}
	var conn *net.UDPConn
	err = nsutil.Do(t.Netns, func() error {
		var err error
		conn, err = net.ListenUDP("udp6", &net.UDPAddr{IP: t.Src.AsSlice()})
		return err
	})
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listen for probes on %s: %w", t.Src, err)
	}
	var m [8]byte
	rand.Read(m[:])
	p := &inbandProber{fd: fd, t: t, port: uint16(conn.LocalAddr().(*net.UDPAddr).Port),
		magic: binary.BigEndian.Uint64(m[:]), dst: &unix.SockaddrInet6{Addr: t.Segs[0].As16()}}
	p.what = "in-band probe"
	p.closers = append(p.closers, func() error { return unix.Close(fd) }, conn.Close)
	go func() {
		b := make([]byte, 1500)
		for {
			n, err := conn.Read(b)
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					continue
				}
				return
			}
			if n >= 16 && binary.BigEndian.Uint64(b) == p.magic {
				p.saw(binary.BigEndian.Uint64(b[8:]))
			}
		}
	}()
	return p, nil
}

// Frame is the probe's packet: outer IPv6 (Src → first SID) + SRH with
// the SID list + inner IPv6 (Src → Src) + UDP (port → port) carrying
// magic and seq.
func Frame(src netip.Addr, segs []netip.Addr, port uint16, magic, seq uint64) []byte {
	payload := make([]byte, 16)
	binary.BigEndian.PutUint64(payload, magic)
	binary.BigEndian.PutUint64(payload[8:], seq)
	udp := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], port)
	binary.BigEndian.PutUint16(udp[2:], port)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	udp = append(udp, payload...)
	binary.BigEndian.PutUint16(udp[6:], udpChecksum(src, src, udp))
	inner := ipv6(src, src, unix.IPPROTO_UDP, udp)
	srh := make([]byte, 8, 8+16*len(segs)+len(inner))
	srh[0] = unix.IPPROTO_IPV6
	srh[1] = uint8(2 * len(segs))
	srh[2] = 4
	srh[3] = uint8(len(segs) - 1)
	srh[4] = uint8(len(segs) - 1)
	for i := len(segs) - 1; i >= 0; i-- {
		a := segs[i].As16()
		srh = append(srh, a[:]...)
	}
	srh = append(srh, inner...)
	return ipv6(src, segs[0], unix.IPPROTO_ROUTING, srh)
}

func ipv6(src, dst netip.Addr, nh uint8, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(payload)))
	b[6], b[7] = nh, 64
	s, d := src.As16(), dst.As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, payload...)
}

func udpChecksum(src, dst netip.Addr, udp []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	s, d := src.As16(), dst.As16()
	add(s[:])
	add(d[:])
	sum += uint32(len(udp)) + unix.IPPROTO_UDP
	add(udp)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	if c == 0 {
		c = 0xffff
	}
	return c
}

func (p *inbandProber) check(context.Context) (bool, bool, string) {
	p.sent++
	pkt := Frame(p.t.Src, p.t.Segs, p.port, p.magic, p.sent)
	if err := unix.Sendto(p.fd, pkt, 0, p.dst); err != nil {
		return false, false, fmt.Sprintf("send probe: %v", err)
	}
	return false, true, ""
}
