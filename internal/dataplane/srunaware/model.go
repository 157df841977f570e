package srunaware

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
)

// This file is the pure-Go reference model of the proxy program: the same
// decisions written for clarity, from the behaviour definitions (DESIGN
// §3.2), not from the C. Tests run both on the same packets and state.

// Verdict is a tc verdict.
type Verdict int

// tc verdicts (linux/pkt_cls.h).
const (
	VerdictNext     Verdict = -1 // TC_ACT_UNSPEC = TCX_NEXT: not ours, the next TCX program decides
	VerdictPass     Verdict = 0  // TC_ACT_OK: rewritten by the proxy, handed to the stack
	VerdictDrop     Verdict = 2  // TC_ACT_SHOT
	VerdictRedirect Verdict = 7  // TC_ACT_REDIRECT
)

// ModelSID is the configuration the model needs of one proxy SID.
type ModelSID struct {
	ID       uint32
	Behavior string
	Inner    Inner
	Flow     bool
	FlowMax  int              // flow max (0: node-wide LRU); the model never expires flows
	MAC      net.HardwareAddr // S-ADDR as MAC (nil: neighbour resolution)
	OIFMAC   net.HardwareAddr
}

// ModelCache is one cache entry of the model.
type ModelCache struct {
	Hdr      []byte
	NhOff    int
	Terminal bool
}

// FIBResult is what the model's FIB answers for a destination.
type FIBResult struct {
	OK         bool // forwarded (BPF_FIB_LKUP_RET_SUCCESS)
	MTU        int
	Src        netip.Addr // the source address the FIB selects
	SMAC, DMAC net.HardwareAddr
}

// ModelStats mirrors the per-SID counters.
type ModelStats struct {
	In, InBytes, Out, OutBytes, Passed, CacheUpdates, ICMPErrors uint64
	Drops                                                        [numDropReasons]uint64
	// OutDrops counts the drops (of Drops) on the way back from the SF.
	OutDrops uint64
}

// Model is the state of one node: SIDs, IFACE-INs, caches, counters.
type Model struct {
	SIDs   map[netip.Addr]ModelSID
	Ifaces map[uint32]ModelSID
	Cache  map[uint32]ModelCache
	Flows  map[string]ModelCache
	Stats  map[uint32]*ModelStats
	FIB    func(dst netip.Addr) FIBResult
}

// Result is the model's outcome for one frame.
type Result struct {
	Verdict Verdict
	Out     []byte
	Reason  DropReason // when Verdict == VerdictDrop
}

func (m *Model) stats(id uint32) *ModelStats {
	if m.Stats == nil {
		m.Stats = map[uint32]*ModelStats{}
	}
	if m.Stats[id] == nil {
		m.Stats[id] = &ModelStats{}
	}
	return m.Stats[id]
}

// Run processes one Ethernet frame received on ifindex iif.
func (m *Model) Run(iif uint32, frame []byte) Result {
	pkt := append([]byte(nil), frame...)
	if cfg, ok := m.Ifaces[iif]; ok {
		r := m.outbound(cfg, pkt)
		if r.Verdict == VerdictDrop {
			m.stats(cfg.ID).OutDrops++
		}
		return r
	}
	return m.inbound(pkt)
}

func drop(st *ModelStats, r DropReason) Result {
	st.Drops[r]++
	return Result{Verdict: VerdictDrop, Reason: r}
}

// walk is the extension-header walk (hop-by-hop, destination options,
// one SRH) from offset 54 of an Ethernet + IPv6 frame.
type walk struct {
	srhOff, nhOff, upperOff int
	upper, sl               uint8
	err                     DropReason
	ok                      bool
}

func walkExt(p []byte) walk {
	w := walk{nhOff: 14 + 6}
	nh, off := p[14+6], 54
	for range 8 {
		switch nh {
		case 0, 60:
			if off+2 > len(p) {
				return walk{err: DropTruncated}
			}
			w.nhOff = off
			nh, off = p[off], off+(int(p[off+1])+1)*8
		case protoRouting:
			if off+8 > len(p) {
				return walk{err: DropTruncated}
			}
			h := p[off:]
			if h[2] != srhType || (int(h[4])+1)*2 > int(h[1]) || h[3] > h[4] || w.srhOff != 0 {
				return walk{err: DropBadSRH}
			}
			w.srhOff, w.sl, w.nhOff = off, h[3], off
			nh, off = h[0], off+(int(h[1])+1)*8
		case 44:
			return walk{err: DropFragment}
		default:
			if off > len(p) {
				return walk{err: DropTruncated}
			}
			w.upper, w.upperOff, w.ok = nh, off, true
			return w
		}
	}
	return walk{err: DropBadExt}
}

func (m *Model) toSF(cfg ModelSID, st *ModelStats, p []byte) Result {
	st.In++
	st.InBytes += uint64(len(p))
	if cfg.MAC != nil && cfg.Inner != InnerEthernet {
		copy(p[0:6], cfg.MAC)
		copy(p[6:12], cfg.OIFMAC)
	}
	return Result{Verdict: VerdictRedirect, Out: p}
}

func (m *Model) inbound(p []byte) Result {
	if len(p) < 54 || binary.BigEndian.Uint16(p[12:]) != 0x86dd {
		return Result{Verdict: VerdictNext, Out: p}
	}
	cfg, ok := m.SIDs[netip.AddrFrom16([16]byte(p[38:54]))]
	if !ok {
		return Result{Verdict: VerdictNext, Out: p}
	}
	st := m.stats(cfg.ID)
	hop := p[21]
	w := walkExt(p)
	if !w.ok {
		return drop(st, w.err)
	}
	if cfg.Behavior == EndAM {
		if w.srhOff == 0 {
			return drop(st, DropNoSRH)
		}
		if w.sl == 0 {
			return drop(st, DropSLZero)
		}
		if w.srhOff+8+16 > len(p) {
			return drop(st, DropTruncated)
		}
		copy(p[38:54], p[w.srhOff+8:w.srhOff+24]) // DA <- Segment List[0]
		return m.toSF(cfg, st, p)
	}
	var inner Inner
	minLeft := 40
	switch w.upper {
	case protoIPv6:
		inner = InnerIPv6
	case protoIPv4:
		inner, minLeft = InnerIPv4, 20
	case protoEthernet:
		inner, minLeft = InnerEthernet, 20
	default:
		return drop(st, DropInnerType)
	}
	if inner != cfg.Inner {
		return drop(st, DropInnerType)
	}
	hdrLen := w.upperOff - 14
	if hdrLen > cacheHdrMax {
		return drop(st, DropHdrTooLong)
	}
	if w.upperOff >= len(p) {
		return drop(st, DropTruncated)
	}
	if cfg.Behavior == EndAD || cfg.Behavior == EndEAD {
		var c ModelCache
		fk := ""
		if cfg.Flow {
			var err bool
			if fk, err = flowKeyOf(p[w.upperOff:], inner, cfg.ID); err {
				return drop(st, DropTruncated)
			}
		}
		if w.srhOff == 0 || w.sl == 0 {
			if cfg.Behavior != EndEAD {
				return drop(st, DropSLZero)
			}
			c.Terminal = true
		} else {
			if hop <= 1 {
				return drop(st, DropHopLimit)
			}
			sl := w.sl - 1
			segOff := w.srhOff + 8 + 16*int(sl)
			if segOff+16 > len(p) {
				return drop(st, DropTruncated)
			}
			c.Hdr = append([]byte(nil), p[14:w.upperOff]...)
			copy(c.Hdr[24:40], p[segOff:segOff+16])
			c.Hdr[7] = hop - 1
			c.Hdr[4], c.Hdr[5] = 0, 0 // payload length: set per packet on the way out
			c.Hdr[w.srhOff-14+3] = sl
			c.NhOff = w.nhOff - 14
		}
		var old ModelCache
		var had bool
		if cfg.Flow {
			old, had = m.Flows[fk]
		} else {
			old, had = m.Cache[cfg.ID]
		}
		if !had || old.Terminal != c.Terminal || old.NhOff != c.NhOff || !bytes.Equal(old.Hdr, c.Hdr) {
			if cfg.Flow && !had && cfg.FlowMax > 0 && m.flowCount(cfg.ID) >= cfg.FlowMax {
				return drop(st, DropFlowFull) // a new flow, the SID's cache is full
			}
			if cfg.Flow {
				m.Flows[fk] = c
			} else {
				m.Cache[cfg.ID] = c
			}
			st.CacheUpdates++
		}
	}
	strip := hdrLen
	var ieth []byte
	if inner == InnerEthernet {
		if w.upperOff+14 > len(p) {
			return drop(st, DropTruncated)
		}
		ieth = append([]byte(nil), p[w.upperOff:w.upperOff+14]...)
		strip += 14
	}
	if left := len(p) - 14 - strip; left <= 0 || left < minLeft {
		return drop(st, DropAdjustRoom)
	}
	out := append(append([]byte(nil), p[:14]...), p[14+strip:]...)
	switch inner {
	case InnerEthernet:
		copy(out[0:14], ieth)
	case InnerIPv4:
		binary.BigEndian.PutUint16(out[12:], 0x0800)
	}
	return m.toSF(cfg, st, out)
}

// flowCount is the number of flows cached for SID id.
func (m *Model) flowCount(id uint32) int {
	prefix := string(binary.BigEndian.AppendUint32(nil, id))
	n := 0
	for k := range m.Flows {
		if len(k) >= 4 && k[:4] == prefix {
			n++
		}
	}
	return n
}

// flowKeyOf is the inner 5-tuple (plus SID id) as a map key.
func flowKeyOf(ip []byte, inner Inner, id uint32) (string, bool) {
	var proto uint8
	var src, dst []byte
	l4 := 0
	frag := false
	switch inner {
	case InnerIPv6:
		if len(ip) < 40 {
			return "", true
		}
		proto, src, dst, l4 = ip[6], ip[8:24], ip[24:40], 40
	case InnerIPv4:
		if len(ip) < 20 {
			return "", true
		}
		proto, src, dst, l4 = ip[9], ip[12:16], ip[16:20], int(ip[0]&0xf)*4
		frag = binary.BigEndian.Uint16(ip[6:])&0x1fff != 0
	default:
		return "", true
	}
	var ports []byte
	if !frag && (proto == 6 || proto == 17 || proto == 132) && l4+4 <= len(ip) {
		ports = ip[l4 : l4+4]
	}
	return string(binary.BigEndian.AppendUint32(nil, id)) + string([]byte{proto}) + string(src) + string(dst) + string(ports), false
}

func isLocalScope6(a []byte) bool {
	return (a[0] == 0xfe && a[1]&0xc0 == 0x80) || a[0] == 0xff
}

func isLocalScope4(a []byte) bool {
	return (a[0] == 169 && a[1] == 254) || a[0]&0xf0 == 0xe0 || bytes.Equal(a, []byte{255, 255, 255, 255})
}

func (m *Model) forward(st *ModelStats, p []byte, fib FIBResult) Result {
	st.Out++
	st.OutBytes += uint64(len(p))
	if fib.OK {
		copy(p[0:6], fib.DMAC)
		copy(p[6:12], fib.SMAC)
		return Result{Verdict: VerdictRedirect, Out: p}
	}
	return Result{Verdict: VerdictPass, Out: p}
}

func (m *Model) outbound(cfg ModelSID, p []byte) Result {
	st := m.stats(cfg.ID)
	pass := func() Result { st.Passed++; return Result{Verdict: VerdictNext, Out: p} }
	if len(p) < 14 {
		return pass()
	}
	et := binary.BigEndian.Uint16(p[12:])
	if cfg.Behavior == EndAM {
		if et != 0x86dd || len(p) < 54 {
			return pass()
		}
		w := walkExt(p)
		if !w.ok {
			return drop(st, w.err)
		}
		if w.srhOff == 0 || w.sl == 0 {
			return pass()
		}
		sl := w.sl - 1
		segOff := w.srhOff + 8 + 16*int(sl)
		if segOff+16 > len(p) {
			return drop(st, DropTruncated)
		}
		da := netip.AddrFrom16([16]byte(p[segOff:]))
		fib := m.FIB(da)
		if fib.OK && len(p)-14 > fib.MTU {
			fib.OK = false // too big: the stack answers
		}
		if fib.OK {
			if p[21] <= 1 {
				return drop(st, DropHopLimit)
			}
			p[21]--
		}
		copy(p[38:54], p[segOff:segOff+16])
		p[w.srhOff+3] = sl
		return m.forward(st, p, fib)
	}
	if cfg.Inner == InnerEthernet {
		return m.outboundEthernet(cfg, st, p)
	}
	var innerNH uint8
	var inner Inner
	switch et {
	case 0x86dd:
		if len(p) < 54 {
			return pass()
		}
		src, dst := p[22:38], p[38:54]
		if (src[0] == 0xfe && src[1]&0xc0 == 0x80) || bytes.Equal(src, make([]byte, 16)) ||
			isLocalScope6(dst) {
			return pass()
		}
		if p[14+6] == 58 && len(p) > 54 && p[54] >= 133 && p[54] <= 137 { // neighbour discovery
			return pass()
		}
		innerNH, inner = protoIPv6, InnerIPv6
	case 0x0800:
		if len(p) < 34 || isLocalScope4(p[26:30]) || isLocalScope4(p[30:34]) {
			return pass()
		}
		innerNH, inner = protoIPv4, InnerIPv4
	default:
		return pass()
	}
	var c ModelCache
	var ok bool
	if cfg.Flow {
		fk, bad := flowKeyOf(p[14:], inner, cfg.ID)
		if bad {
			return drop(st, DropTruncated)
		}
		if c, ok = m.Flows[fk]; !ok {
			return drop(st, DropFlowMiss)
		}
	} else if c, ok = m.Cache[cfg.ID]; !ok {
		return drop(st, DropCacheEmpty)
	}
	if c.Terminal {
		return pass()
	}
	tot := len(p) - 14 + len(c.Hdr)
	if tot-40 > 0xffff {
		return drop(st, DropTooBig)
	}
	fib := m.FIB(netip.AddrFrom16([16]byte(c.Hdr[24:40])))
	if fib.OK && tot > fib.MTU {
		return m.packetTooBig(st, p, inner, fib.MTU, len(c.Hdr))
	}
	out := append(append(append([]byte(nil), p[:14]...), c.Hdr...), p[14:]...)
	binary.BigEndian.PutUint16(out[12:], 0x86dd)
	binary.BigEndian.PutUint16(out[14+4:], uint16(tot-40))
	out[14+c.NhOff] = innerNH
	return m.forward(st, out, fib)
}

// packetTooBig is what Linux does when a packet does not fit its seg6
// encapsulation: an ICMPv6 Packet Too Big to the inner source announcing the
// MTU less the encapsulation (never below 1280), quoting the packet (cut to
// 1232 bytes, and to a multiple of 4 by the program's checksum helper).
func (m *Model) packetTooBig(st *ModelStats, p []byte, inner Inner, mtu, encap int) Result {
	if inner != InnerIPv6 {
		return m.fragNeeded(st, p, mtu, encap)
	}
	src := p[22:38]
	if src[0] == 0xff || bytes.Equal(src, make([]byte, 16)) || (p[20] == 58 && (len(p) < 55 || p[54] < 128)) {
		return drop(st, DropMTU)
	}
	back := m.FIB(netip.AddrFrom16([16]byte(src)))
	if !back.OK {
		return drop(st, DropMTU)
	}
	report := 1280
	if mtu > encap+1280 {
		report = mtu - encap
	}
	quoted := min(len(p)-14, 1280-48) &^ 3
	msg := make([]byte, 8, 8+quoted)
	msg[0] = 2
	binary.BigEndian.PutUint32(msg[4:], uint32(report))
	msg = append(msg, p[14:14+quoted]...)
	s16 := back.Src.As16()
	binary.BigEndian.PutUint16(msg[2:], icmp6Checksum(s16[:], src, msg))
	ip := make([]byte, 40, 40+len(msg))
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(msg)))
	ip[6], ip[7] = 58, 64
	copy(ip[8:], s16[:])
	copy(ip[24:], src)
	out := append(append(append(append([]byte{}, back.DMAC...), back.SMAC...), 0x86, 0xdd), append(ip, msg...)...)
	st.ICMPErrors++
	return Result{Verdict: VerdictRedirect, Out: out}
}

// icmp6Checksum is the RFC 4443 checksum over the pseudo-header and msg.
func icmp6Checksum(src, dst, msg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src)
	add(dst)
	add(binary.BigEndian.AppendUint32(nil, uint32(len(msg))))
	add([]byte{0, 0, 0, 58})
	add(msg)
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// fragNeeded is the IPv4 counterpart (RFC 1191): for a DF packet, ICMP
// Destination Unreachable / Fragmentation Needed to the source with the MTU
// less the encapsulation (at least 68), quoting up to 548 bytes (576 in
// total, cut to a multiple of 4). Without DF Linux would fragment: dropped.
func (m *Model) fragNeeded(st *ModelStats, p []byte, mtu, encap int) Result {
	ip := p[14:]
	src := netip.AddrFrom4([4]byte(ip[12:16]))
	frag := binary.BigEndian.Uint16(ip[6:])
	if frag&0x4000 == 0 || frag&0x1fff != 0 || isLocalScope4(ip[12:16]) || src.IsUnspecified() {
		return drop(st, DropMTU)
	}
	if ip[9] == 1 {
		l4 := int(ip[0]&0xf) * 4
		if l4 >= len(ip) {
			return drop(st, DropMTU)
		}
		switch ip[l4] {
		case 0, 8, 13, 14, 15, 16:
		default:
			return drop(st, DropMTU)
		}
	}
	back := m.FIB(src)
	if !back.OK {
		return drop(st, DropMTU)
	}
	report := 68
	if mtu > encap+68 {
		report = mtu - encap
	}
	quoted := min(len(ip), 576-28) &^ 3
	msg := make([]byte, 8, 8+quoted)
	msg[0], msg[1] = 3, 4
	binary.BigEndian.PutUint16(msg[6:], uint16(min(report, 0xffff)))
	msg = append(msg, ip[:quoted]...)
	binary.BigEndian.PutUint16(msg[2:], inetChecksum(msg))
	hdr := make([]byte, 20)
	hdr[0] = 0x45
	binary.BigEndian.PutUint16(hdr[2:], uint16(20+len(msg)))
	hdr[8], hdr[9] = 64, 1
	s4 := back.Src.As4()
	copy(hdr[12:], s4[:])
	copy(hdr[16:], ip[12:16])
	binary.BigEndian.PutUint16(hdr[10:], inetChecksum(hdr))
	out := append(append(append(append([]byte{}, back.DMAC...), back.SMAC...), 0x08, 0x00), append(hdr, msg...)...)
	st.ICMPErrors++
	return Result{Verdict: VerdictRedirect, Out: out}
}

// inetChecksum is the RFC 1071 checksum of b.
func inetChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// outboundEthernet: End.AS/End.AD with inner ethernet. Every frame from the
// SF, whatever it carries (but link-constrained control frames), becomes the payload (Next Header 143) of the
// cached outer headers behind a new Ethernet header. A frame cannot be
// answered with an ICMP error nor handed to the stack: too big or not
// forwardable by the FIB, it is dropped.
func (m *Model) outboundEthernet(cfg ModelSID, st *ModelStats, p []byte) Result {
	// IEEE 802.1 link-constrained destinations (01:80:c2:00:00:0x: STP,
	// LACP, LLDP) stay on the SF's link.
	if bytes.Equal(p[:5], []byte{0x01, 0x80, 0xc2, 0, 0}) && p[5]&0xf0 == 0 {
		st.Passed++
		return Result{Verdict: VerdictNext, Out: p}
	}
	c, ok := m.Cache[cfg.ID]
	if !ok {
		return drop(st, DropCacheEmpty)
	}
	if c.Terminal {
		st.Passed++
		return Result{Verdict: VerdictNext, Out: p}
	}
	tot := len(p) + len(c.Hdr)
	if tot-40 > 0xffff {
		return drop(st, DropTooBig)
	}
	fib := m.FIB(netip.AddrFrom16([16]byte(c.Hdr[24:40])))
	if fib.OK && tot > fib.MTU {
		return drop(st, DropMTU)
	}
	if !fib.OK {
		return drop(st, DropNoFIB)
	}
	out := append(append(append([]byte(nil), p[:14]...), c.Hdr...), p...)
	binary.BigEndian.PutUint16(out[12:], 0x86dd)
	binary.BigEndian.PutUint16(out[14+4:], uint16(tot-40))
	out[14+c.NhOff] = protoEthernet
	return m.forward(st, out, fib)
}
