package oam

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/plan"
)

// RFC 9259 ping and traceroute: ordinary ICMPv6 from a node's own stack,
// the segment list carried in an SRH the kernel builds from the socket's
// IPV6_RTHDR option (a type 4 routing header: Linux's ipv6_push_rthdr
// puts the destination in Segment List[0] and sends to the active
// segment), so what goes on the wire is what any SRv6 node would send.

// Reply is what came back for one probe.
type Reply struct {
	Seq  int     `json:"seq"`
	From string  `json:"from,omitempty"` // the responder's address
	Node string  `json:"node,omitempty"` // the lab node that owns it
	Type string  `json:"type"`           // echo-reply, time-exceeded, unreachable (code), parameter-problem, timeout
	RTT  float64 `json:"rtt_ms,omitempty"`
	// ActiveSID and SL are the destination and Segments Left of the probe
	// as the responder quoted it (ICMPv6 errors carry the invoking packet).
	ActiveSID string `json:"active_sid,omitempty"`
	SL        *int   `json:"sl,omitempty"`
}

// Socket sends ICMPv6 echo requests along a segment list from one
// namespace.
type Socket struct {
	fd     int
	id     uint16
	target netip.Addr
	segs   []netip.Addr
}

// OpenICMP opens a raw ICMPv6 socket in namespace netns ("" this one) for
// echo requests to target via segs (the segments before the target, in
// the order they are visited; none: a plain ping).
func OpenICMP(netns string, target netip.Addr, segs []netip.Addr) (*Socket, error) {
	if !target.Is6() || target.Is4In6() {
		return nil, fmt.Errorf("target %s: SRv6 ping and traceroute are IPv6", target)
	}
	s := &Socket{fd: -1, id: uint16(os.Getpid()), target: target, segs: segs}
	err := nsutil.Do(netns, func() error {
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMPV6)
		if err != nil {
			return fmt.Errorf("raw ICMPv6 socket: %w", err)
		}
		s.fd = fd
		if len(segs) == 0 {
			return nil
		}
		if err := unix.SetsockoptString(fd, unix.IPPROTO_IPV6, unix.IPV6_RTHDR, string(srhOption(segs))); err != nil {
			return fmt.Errorf("set the SRH (IPV6_RTHDR): %w", err)
		}
		return nil
	})
	if err != nil {
		if s.fd >= 0 {
			unix.Close(s.fd)
		}
		return nil, err
	}
	return s, nil
}

// srhOption is the routing header the socket option takes: type 4,
// Segment List[0] left for the kernel to fill with the destination, the
// first segment to visit last in the list (RFC 8754 order).
func srhOption(segs []netip.Addr) []byte {
	n := len(segs) + 1
	b := make([]byte, 8+16*n)
	b[1] = byte(2 * n) // Hdr Ext Len: 8-octet units after the first 8
	b[2] = 4           // Routing Type: SRH
	b[3] = byte(n - 1) // Segments Left
	b[4] = byte(n - 1) // Last Entry
	for i, s := range segs {
		a := s.As16()
		copy(b[8+16*(n-1-i):], a[:])
	}
	return b
}

// Close closes the socket.
func (s *Socket) Close() error { return unix.Close(s.fd) }

// Probe sends echo request seq with hop limit hops (0: the default) and
// waits up to timeout for its reply or an ICMPv6 error about it.
func (s *Socket) Probe(seq, hops int, timeout time.Duration) (Reply, error) {
	r := Reply{Seq: seq, Type: "timeout"}
	if hops > 0 {
		if err := unix.SetsockoptInt(s.fd, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, hops); err != nil {
			return r, fmt.Errorf("set hop limit: %w", err)
		}
	}
	req := make([]byte, 8+16)
	req[0] = 128 // echo request
	binary.BigEndian.PutUint16(req[4:], s.id)
	binary.BigEndian.PutUint16(req[6:], uint16(seq))
	copy(req[8:], "segchain ping\x00\x00\x00")
	sa := &unix.SockaddrInet6{Addr: s.target.As16()}
	start := time.Now()
	if err := unix.Sendto(s.fd, req, 0, sa); err != nil {
		return r, fmt.Errorf("send echo request to %s: %w", s.target, err)
	}
	deadline := start.Add(timeout)
	buf := make([]byte, 2048)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return r, nil
		}
		tv := unix.NsecToTimeval(left.Nanoseconds())
		if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return r, err
		}
		n, from, err := unix.Recvfrom(s.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return r, fmt.Errorf("receive: %w", err)
		}
		if ok := s.parse(buf[:n], &r, seq); ok {
			if f, isv6 := from.(*unix.SockaddrInet6); isv6 {
				r.From = netip.AddrFrom16(f.Addr).String()
			}
			r.RTT = float64(time.Since(start).Microseconds()) / 1000
			return r, nil
		}
	}
}

// parse fills r from an ICMPv6 message (a raw socket delivers it without
// the IPv6 header) if it answers echo request seq of this socket.
func (s *Socket) parse(b []byte, r *Reply, seq int) bool {
	if len(b) < 8 {
		return false
	}
	typ, code := b[0], b[1]
	if typ == 129 {
		if binary.BigEndian.Uint16(b[4:]) != s.id || binary.BigEndian.Uint16(b[6:]) != uint16(seq) {
			return false
		}
		r.Type = "echo-reply"
		return true
	}
	if typ > 4 || typ == 0 {
		return false
	}
	// An error: the invoking packet follows the 8-byte header. Ours if its
	// payload is our echo request.
	q := b[8:]
	if len(q) < 40 || q[0]>>4 != 6 {
		return false
	}
	da, _ := netip.AddrFromSlice(q[24:40])
	nh, off := q[6], 40
	sl := -1
	for i := 0; i < 8 && off+8 <= len(q); i++ {
		switch nh {
		case 0, 43, 60:
			if nh == 43 && q[off+2] == 4 {
				sl = int(q[off+3])
			}
			nh, off = q[off], off+(int(q[off+1])+1)*8
			continue
		}
		break
	}
	if nh != 58 || off+8 > len(q) || q[off] != 128 ||
		binary.BigEndian.Uint16(q[off+4:]) != s.id || binary.BigEndian.Uint16(q[off+6:]) != uint16(seq) {
		return false
	}
	r.ActiveSID = da.String()
	if sl >= 0 {
		r.SL = &sl
	}
	switch typ {
	case 1:
		r.Type = fmt.Sprintf("unreachable (code %d)", code)
	case 2:
		r.Type = "packet-too-big"
	case 3:
		r.Type = "time-exceeded"
	case 4:
		r.Type = fmt.Sprintf("parameter-problem (code %d)", code)
	}
	return true
}

// Ping sends count echo requests (one a second at most: the next goes as
// soon as the previous one is answered, or timed out, and interval has
// passed) and returns what came back for each.
func Ping(netns string, target netip.Addr, segs []netip.Addr, count int, interval, timeout time.Duration) ([]Reply, error) {
	s, err := OpenICMP(netns, target, segs)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out []Reply
	for seq := 1; seq <= count; seq++ {
		start := time.Now()
		r, err := s.Probe(seq, 0, timeout)
		if err != nil {
			return out, err
		}
		out = append(out, r)
		if seq < count {
			time.Sleep(interval - time.Since(start))
		}
	}
	return out, nil
}

// Traceroute sends echo requests with hop limits 1, 2, ... maxHops along
// segs to target and returns one reply per hop limit, up to the first that
// is not a Time Exceeded (the target's echo reply, an unreachable, a
// parameter problem) or maxHops.
func Traceroute(netns string, target netip.Addr, segs []netip.Addr, maxHops int, timeout time.Duration) ([]Reply, error) {
	s, err := OpenICMP(netns, target, segs)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out []Reply
	for h := 1; h <= maxHops; h++ {
		r, err := s.Probe(h, h, timeout)
		if err != nil {
			return out, err
		}
		out = append(out, r)
		if r.Type != "time-exceeded" && r.Type != "timeout" {
			break
		}
	}
	return out, nil
}

// NodeOf names the lab node that owns addr: a link address, a SID of the
// plan, or an address in a node's locator; "" if none.
func (d Domain) NodeOf(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	for _, l := range d.Plan.Links {
		for _, p := range l.Addrs {
			if p.Addr() == a {
				return l.Node
			}
		}
	}
	if s, ok := d.SIDAt(a); ok {
		return s.Node
	}
	for name, n := range d.Config.Nodes {
		if p, err := netip.ParsePrefix(n.Locator); err == nil && p.Contains(a) {
			return name
		}
	}
	return ""
}

// SIDAt is the plan's SID that a falls in (its LOC:FUNCT prefix, any
// ARGS), if any.
func (d Domain) SIDAt(a netip.Addr) (plan.SIDInfo, bool) {
	for _, s := range d.Plan.SIDs {
		if s.SID.Contains(a) {
			return s, true
		}
	}
	return plan.SIDInfo{}, false
}

// NoEchoHint says why target, a SID of the plan, answered no echo
// request: Linux's seg6local behaviours (and segchain's tc-served SIDs)
// do not process an upper-layer header addressed to a SID. "" when
// target is no SID of the plan.
func (d Domain) NoEchoHint(target netip.Addr) string {
	s, ok := d.SIDAt(target)
	if !ok {
		return ""
	}
	what := s.Behavior + " SID"
	if s.Service != "" {
		what += " (" + s.Service + ")"
	}
	return fmt.Sprintf("%s is %s's %s, which answers no echo request by itself (Linux's seg6local does not process an upper-layer header sent to a SID; docs/oam.md)", target, s.Node, what)
}

// Resolve turns a SID list's words (addresses or service names of the
// plan: "nfv1-end", "web egress") into addresses.
func (d Domain) Resolve(words []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, w := range words {
		if a, err := netip.ParseAddr(w); err == nil {
			out = append(out, a)
			continue
		}
		found := false
		for _, s := range d.Plan.SIDs {
			if s.Service == w {
				out = append(out, s.SID.Addr())
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%q is neither an IPv6 address nor a service of domain %s", w, d.Plan.Domain)
		}
	}
	return out, nil
}
