// Package srv6svctest runs an srv6svc handler on packets without root,
// sockets or namespaces: build frames from bytes (or read them from a
// pcap), run a Handler, BatchHandler or End.ASM InnerFunc through the
// library's own parsing and verdict code, and inspect each packet's
// verdict and the exact bytes that would be sent.
//
//	h := srv6svctest.New(netip.MustParsePrefix("fc00:5::100/128"))
//	frame := srv6svctest.Frame(src, []netip.Addr{final, next, sid}, 2, srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1000, 53, []byte("q")))
//	r := h.Run(myHandler, frame)[0]
//	// r.Verdict, r.Sent, r.Out (Ethernet frame), r.Dropped
//
// What it does not model: the kernel (XDP steering, the rings, MAC
// addresses of the binding's veth pair: Out keeps the received ones).
package srv6svctest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/internal/offline"
)

// Result is what became of one frame.
type Result struct {
	// Ran: the handler got the packet (false for a malformed one).
	Ran bool
	// Verdict is the handler's answer (End.ASM: Drop for Discard,
	// Forward otherwise).
	Verdict srv6svc.Verdict
	// Sent: the packet left; Out is the frame as sent (Ethernet header
	// first: the SRH advanced, the destination rewritten, lengths and
	// checksums fixed).
	Sent bool
	Out  []byte
	// Dropped says why it did not leave: "verdict" (the handler said
	// Drop), "bad verdict" (it could not be applied: SkipNext with SL < 2,
	// a malformed inner packet after MarkInnerModified, an HMAC left
	// stale), "malformed: <reason>" (the library refused it before the
	// handler, as the live path counts in DropMalformed).
	Dropped string
	// Modified: the handler marked the inner packet modified.
	Modified bool
}

// Harness runs handlers as a binding of Bound would.
type Harness struct {
	// Bound are the binding's SIDs: Packet.Bound and Args come from them.
	Bound []netip.Prefix
	// BatchSize bounds a BatchHandler's batches (default 64).
	BatchSize int
	// CSID makes Bound uSIDs of this format (srv6svc.Config.CSID): a
	// container with uSIDs after the active one needs no SRH and Forward
	// shifts it; invalid padding is malformed.
	CSID srv6svc.CSIDFormat
}

// New returns a harness for a binding of bound.
func New(bound ...netip.Prefix) *Harness { return &Harness{Bound: bound} }

func (h *Harness) run(handler any, frames [][]byte) []Result {
	rs := offline.Run(frames, h.Bound, [2]int{h.CSID.LBLen, h.CSID.NFLen}, h.BatchSize, handler)
	out := make([]Result, len(rs))
	for i, r := range rs {
		out[i] = Result{Ran: r.Ran, Verdict: srv6svc.Verdict(r.Verdict), Sent: r.Out != nil, Out: r.Out, Dropped: r.Dropped, Modified: r.Modified}
	}
	return out
}

// Run runs a synchronous handler on each frame.
func (h *Harness) Run(handler srv6svc.Handler, frames ...[]byte) []Result {
	return h.run(handler, frames)
}

// RunBatch runs a batch handler on the frames, in batches of BatchSize.
func (h *Harness) RunBatch(handler srv6svc.BatchHandler, frames ...[]byte) []Result {
	return h.run(handler, frames)
}

// RunASM runs an SR-unaware End.ASM function on the frames.
func (h *Harness) RunASM(fn srv6svc.InnerFunc, frames ...[]byte) []Result { return h.run(fn, frames) }

// Protocol numbers for Frame's inner packet.
const (
	ProtoIPv4 = 4
	ProtoIPv6 = 41
)

// Frame builds an Ethernet frame: an outer IPv6 header from src to
// segs[sl] (the active segment), an SRH with segs in wire order (segs[0]
// is the last segment) and Segments Left sl, any TLVs (each type, length,
// value; padded to 8 octets), then inner, an IPv4 or IPv6 packet (its
// version sets the SRH's Next Header).
func Frame(src netip.Addr, segs []netip.Addr, sl uint8, inner []byte, tlvs ...[]byte) []byte {
	nh := uint8(ProtoIPv6)
	if len(inner) > 0 && inner[0]>>4 == 4 {
		nh = ProtoIPv4
	}
	var tl []byte
	for _, t := range tlvs {
		tl = append(tl, t...)
	}
	srhLen := 8 + 16*len(segs) + len(tl)
	if pad := (8 - srhLen%8) % 8; pad == 1 {
		tl = append(tl, 0)
	} else if pad > 1 {
		tl = append(tl, 4, uint8(pad-2))
		tl = append(tl, make([]byte, pad-2)...)
	}
	srhLen = 8 + 16*len(segs) + len(tl)
	b := make([]byte, 14+40+srhLen, 14+40+srhLen+len(inner))
	copy(b[0:12], []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(b[12:], 0x86dd)
	ip := b[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(srhLen+len(inner)))
	ip[6], ip[7] = 43, 64
	s16 := src.As16()
	copy(ip[8:24], s16[:])
	if int(sl) < len(segs) {
		d := segs[sl].As16()
		copy(ip[24:40], d[:])
	}
	s := ip[40:]
	s[0], s[1], s[2], s[3] = nh, uint8(srhLen/8-1), 4, sl
	if len(segs) > 0 {
		s[4] = uint8(len(segs) - 1)
	}
	for i, a := range segs {
		x := a.As16()
		copy(s[8+16*i:], x[:])
	}
	copy(s[8+16*len(segs):], tl)
	return append(b, inner...)
}

// Container builds an Ethernet frame without SRH: an outer IPv6 header
// from src to the uSID container da (the whole rest of the chain, H.Encaps.Red
// with one container), then inner, an IPv4 or IPv6 packet (its version
// sets the outer Next Header). For a harness with CSID set.
func Container(src, da netip.Addr, inner []byte) []byte {
	nh := uint8(ProtoIPv6)
	if len(inner) > 0 && inner[0]>>4 == 4 {
		nh = ProtoIPv4
	}
	b := make([]byte, 14+40, 14+40+len(inner))
	copy(b[0:12], []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(b[12:], 0x86dd)
	ip := b[14:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(inner)))
	ip[6], ip[7] = nh, 64
	s16, d16 := src.As16(), da.As16()
	copy(ip[8:24], s16[:])
	copy(ip[24:40], d16[:])
	return append(b, inner...)
}

// TLV encodes one SRH TLV for Frame.
func TLV(typ uint8, value []byte) []byte { return append([]byte{typ, uint8(len(value))}, value...) }

// UDP4 builds an IPv4/UDP packet with correct checksums.
func UDP4(src, dst string, sport, dport uint16, payload []byte) []byte {
	return ip4(src, dst, 17, udp(sport, dport, payload))
}

// UDP6 builds an IPv6/UDP packet with a correct checksum.
func UDP6(src, dst string, sport, dport uint16, payload []byte) []byte {
	return ip6(src, dst, 17, udp(sport, dport, payload))
}

// TCP4 builds an IPv4/TCP segment (flags ACK|PSH) with correct checksums.
func TCP4(src, dst string, sport, dport uint16, payload []byte) []byte {
	return ip4(src, dst, 6, tcp(sport, dport, payload))
}

// TCP6 builds an IPv6/TCP segment (flags ACK|PSH) with a correct checksum.
func TCP6(src, dst string, sport, dport uint16, payload []byte) []byte {
	return ip6(src, dst, 6, tcp(sport, dport, payload))
}

func udp(sport, dport uint16, payload []byte) []byte {
	b := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
	copy(b[8:], payload)
	return b
}

func tcp(sport, dport uint16, payload []byte) []byte {
	b := make([]byte, 20+len(payload))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	b[12], b[13] = 5<<4, 0x18
	binary.BigEndian.PutUint16(b[14:], 65535)
	copy(b[20:], payload)
	return b
}

func ip4(src, dst string, proto uint8, l4 []byte) []byte {
	b := make([]byte, 20+len(l4))
	b[0], b[8], b[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	binary.BigEndian.PutUint16(b[10:], ^fold(sum(b[:20], 0)))
	copy(b[20:], l4)
	l4checksum(b[20:], proto, sum(b[12:20], 0)+uint32(proto)+uint32(len(l4)))
	return b
}

func ip6(src, dst string, proto uint8, l4 []byte) []byte {
	b := make([]byte, 40+len(l4))
	b[0], b[6], b[7] = 0x60, proto, 64
	binary.BigEndian.PutUint16(b[4:], uint16(len(l4)))
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(b[8:24], s[:])
	copy(b[24:40], d[:])
	copy(b[40:], l4)
	l4checksum(b[40:], proto, sum(b[8:40], 0)+uint32(proto)+uint32(len(l4)))
	return b
}

func l4checksum(l4 []byte, proto uint8, pseudo uint32) {
	at := 16
	if proto == 17 {
		at = 6
	}
	c := ^fold(sum(l4, pseudo))
	if c == 0 && proto == 17 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(l4[at:], c)
}

// Checksum reports whether an IPv4 or IPv6 packet's TCP or UDP checksum
// (and an IPv4 header checksum) verify: for checking Out's inner packet.
func Checksum(pkt []byte) bool {
	var l4 []byte
	var proto uint8
	var pseudo uint32
	switch {
	case len(pkt) >= 20 && pkt[0]>>4 == 4:
		ihl := int(pkt[0]&0xf) * 4
		if fold(sum(pkt[:ihl], 0)) != 0xffff {
			return false
		}
		l4, proto = pkt[ihl:binary.BigEndian.Uint16(pkt[2:])], pkt[9]
		pseudo = sum(pkt[12:20], 0) + uint32(proto) + uint32(len(l4))
	case len(pkt) >= 40 && pkt[0]>>4 == 6:
		l4, proto = pkt[40:40+int(binary.BigEndian.Uint16(pkt[4:]))], pkt[6]
		pseudo = sum(pkt[8:40], 0) + uint32(proto) + uint32(len(l4))
	default:
		return false
	}
	if proto != 6 && proto != 17 {
		return true
	}
	return fold(sum(l4, pseudo)) == 0xffff
}

func sum(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// ReadPCAP reads the frames of a pcap file (Ethernet, or raw IP: an
// Ethernet header is added).
func ReadPCAP(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("pcap %s: %w", path, err)
	}
	raw := false
	switch r.LinkType() {
	case layers.LinkTypeEthernet:
	case layers.LinkTypeRaw, layers.LinkTypeIPv6, 228 /* DLT_IPV4 */ :
		raw = true
	default:
		return nil, fmt.Errorf("pcap %s: link type %s: want Ethernet or raw IP", path, r.LinkType())
	}
	var out [][]byte
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("pcap %s: packet %d: %w", path, len(out)+1, err)
		}
		if raw {
			data = append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd}, data...)
		}
		out = append(out, append([]byte(nil), data...))
	}
}
