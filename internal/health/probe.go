package health

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// ProbeMark is the mark of in-band probes: the headend's pool selector
// lets marked packets pass (a probe names its instance). Equal to
// internal/pool/datapath.ProbeMark (its test checks).
const ProbeMark = 0x5c0029

// newProber returns a syncProber or a numberedProber.
func newProber(t Target) (any, error) {
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

func (p *carrierProber) check(context.Context) (bool, string) {
	l, err := p.h.LinkByName(p.t.Iface)
	if err != nil {
		return false, fmt.Sprintf("%s: %v", p.t.Iface, err)
	}
	a := l.Attrs()
	if a.Flags&net.FlagUp == 0 || a.RawFlags&unix.IFF_LOWER_UP == 0 {
		return false, fmt.Sprintf("%s has no carrier", p.t.Iface)
	}
	return true, ""
}
func (p *carrierProber) Close() error { p.h.Close(); return p.ns.Close() }

// tcpProber connects within the timeout.
type tcpProber struct{ t Target }

func (p *tcpProber) check(ctx context.Context) (bool, string) {
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
		return false, fmt.Sprintf("connect %s: %v", dst, err)
	}
	return true, ""
}
func (p *tcpProber) Close() error { return nil }

// numberedProber sends numbered probes (echo, in-band) and reads their
// answers without blocking, each with the kernel's receive time: the
// checker's loop reads them itself just before it judges, so an answer
// that arrived in time counts however late the checker runs (no reader
// goroutine to be scheduled), and its RTT is the path's, not the
// checker's (detector.go).
type numberedProber interface {
	send(seq uint64) error
	drain(saw func(seq uint64, at time.Time))
	Close() error
}

// syncProber answers at once (carrier, tcp).
type syncProber interface {
	check(ctx context.Context) (ok bool, why string)
	Close() error
}

// timestamped asks the kernel to stamp every datagram it queues on fd.
func timestamped(fd int) error {
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
}

// drainFd reads every queued datagram of fd without blocking and hands
// each to fn with its kernel receive time (now when the kernel gave none).
func drainFd(fd int, buf, oob []byte, fn func(b []byte, at time.Time)) {
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return // EAGAIN: nothing more; anything else: next time
		}
		at := time.Time{}
		if cms, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, cm := range cms {
				if cm.Header.Level == unix.SOL_SOCKET && cm.Header.Type == unix.SCM_TIMESTAMPNS && len(cm.Data) >= 16 {
					ts := (*unix.Timespec)(unsafe.Pointer(&cm.Data[0]))
					at = time.Unix(ts.Unix())
				}
			}
		}
		if at.IsZero() {
			at = time.Now()
		}
		fn(buf[:n], at)
	}
}

// echoProber sends ICMPv6 echo requests.
type echoProber struct {
	fd       int
	id       uint16
	dst      unix.Sockaddr
	last     uint64 // the last sequence number sent (16 bits on the wire)
	buf, oob []byte
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
	if err := timestamped(fd); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("receive timestamps: %w", err)
	}
	var id [2]byte
	rand.Read(id[:])
	return &echoProber{fd: fd, id: binary.BigEndian.Uint16(id[:]), dst: &unix.SockaddrInet6{Addr: t.Addr.As16()},
		buf: make([]byte, 1500), oob: make([]byte, 128)}, nil
}

func (p *echoProber) send(seq uint64) error {
	b := make([]byte, 8)
	b[0] = 128
	binary.BigEndian.PutUint16(b[4:], p.id)
	binary.BigEndian.PutUint16(b[6:], uint16(seq))
	p.last = seq
	if err := unix.Sendto(p.fd, b, 0, p.dst); err != nil {
		return fmt.Errorf("send echo: %w", err)
	}
	return nil
}

func (p *echoProber) drain(saw func(uint64, time.Time)) {
	drainFd(p.fd, p.buf, p.oob, func(b []byte, at time.Time) {
		if len(b) >= 8 && b[0] == 129 && binary.BigEndian.Uint16(b[4:]) == p.id {
			// Back to the full number: the newest sent with these 16 bits.
			w := binary.BigEndian.Uint16(b[6:])
			saw(p.last-uint64(uint16(p.last)-w), at)
		}
	})
}

func (p *echoProber) Close() error { return unix.Close(p.fd) }

// inbandProber sends an SRv6 probe along the instance's SID list; it comes
// back as a UDP datagram to the prober (after the chain's egress).
type inbandProber struct {
	fd, rfd  int // raw sender; UDP receiver
	t        Target
	port     uint16
	magic    uint64
	dst      unix.Sockaddr
	buf, oob []byte
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
	rfd, err := socketIn(t.Netns, unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDP)
	if err == nil {
		err = unix.Bind(rfd, &unix.SockaddrInet6{Addr: t.Src.As16()})
		if err == nil {
			err = timestamped(rfd)
		}
		if err != nil {
			unix.Close(rfd)
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("listen for probes on %s: %w", t.Src, err)
	}
	sa, err := unix.Getsockname(rfd)
	if err != nil {
		unix.Close(fd)
		unix.Close(rfd)
		return nil, fmt.Errorf("probe port: %w", err)
	}
	var m [8]byte
	rand.Read(m[:])
	return &inbandProber{fd: fd, rfd: rfd, t: t, port: uint16(sa.(*unix.SockaddrInet6).Port),
		magic: binary.BigEndian.Uint64(m[:]), dst: &unix.SockaddrInet6{Addr: t.Segs[0].As16()},
		buf: make([]byte, 1500), oob: make([]byte, 128)}, nil
}

func (p *inbandProber) send(seq uint64) error {
	pkt := Frame(p.t.Src, p.t.Segs, p.port, p.magic, seq)
	if err := unix.Sendto(p.fd, pkt, 0, p.dst); err != nil {
		return fmt.Errorf("send probe: %w", err)
	}
	return nil
}

func (p *inbandProber) drain(saw func(uint64, time.Time)) {
	drainFd(p.rfd, p.buf, p.oob, func(b []byte, at time.Time) {
		if len(b) >= 16 && binary.BigEndian.Uint64(b) == p.magic {
			saw(binary.BigEndian.Uint64(b[8:]), at)
		}
	})
}

func (p *inbandProber) Close() error {
	unix.Close(p.rfd)
	return unix.Close(p.fd)
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
