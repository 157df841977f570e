package oam

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nsutil"
)

// Probe is the packet a trace sends: one flow of the chain's classifier.
type Probe struct {
	Src, Dst netip.Addr
	Proto    string // udp, tcp, icmp
	Sport    uint16
	Dport    uint16
}

func (p Probe) String() string {
	if p.Proto == "icmp" {
		return fmt.Sprintf("icmp %s → %s", p.Src, p.Dst)
	}
	return fmt.Sprintf("%s %s:%d → %s:%d", p.Proto, p.Src, p.Sport, p.Dst, p.Dport)
}

// probeFor picks a flow the chain's match classifies: src and dst are
// addresses inside the match's prefixes (preferring addresses of the
// lab's own ends, so the delivery has a host to arrive at), the protocol
// and ports at the low end of the match's ranges (UDP 33434, the
// traceroute port, when the match says nothing).
func probeFor(m config.Match, srcPref, dstPref []netip.Addr) (Probe, error) {
	var p Probe
	dst, err := netip.ParsePrefix(m.Dst)
	if err != nil {
		return p, fmt.Errorf("match dst %q: %w", m.Dst, err)
	}
	p.Dst = pickIn(dst, dstPref)
	if m.Src != "" {
		src, err := netip.ParsePrefix(m.Src)
		if err != nil {
			return p, fmt.Errorf("match src %q: %w", m.Src, err)
		}
		p.Src = pickIn(src, srcPref)
	} else {
		for _, a := range srcPref {
			if a.Is4() == p.Dst.Is4() {
				p.Src = a
				break
			}
		}
		if !p.Src.IsValid() {
			return p, fmt.Errorf("no source address of the family of %s on the headend's host link", p.Dst)
		}
	}
	if p.Src.Is4() != p.Dst.Is4() {
		return p, fmt.Errorf("match src %s and dst %s are of different families", p.Src, p.Dst)
	}
	switch strings.ToLower(m.Proto) {
	case "", "udp", "17":
		p.Proto = "udp"
	case "tcp", "6":
		p.Proto = "tcp"
	case "icmp", "ipv6-icmp", "icmpv6", "1", "58":
		p.Proto = "icmp"
	default:
		return p, fmt.Errorf("match proto %q: trace sends udp, tcp or icmp probes", m.Proto)
	}
	if p.Sport, err = low(m.Sport, 49152); err != nil {
		return p, fmt.Errorf("match sport: %w", err)
	}
	if p.Dport, err = low(m.Dport, 33434); err != nil {
		return p, fmt.Errorf("match dport: %w", err)
	}
	return p, nil
}

func low(r string, def uint16) (uint16, error) {
	if r == "" {
		return def, nil
	}
	lo, _, _ := strings.Cut(r, "-")
	n, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port %q: %w", r, err)
	}
	return uint16(n), nil
}

// pickIn returns the first of pref inside p, else p's first host address.
func pickIn(p netip.Prefix, pref []netip.Addr) netip.Addr {
	for _, a := range pref {
		if p.Contains(a) {
			return a
		}
	}
	a := p.Masked().Addr()
	if p.Bits() < a.BitLen() {
		a = a.Next()
	}
	return a
}

// frame builds the probe's Ethernet frame with payload magic+seq first.
func (p Probe) frame(srcMAC, dstMAC net.HardwareAddr, magic uint64, seq uint32) ([]byte, error) {
	payload := make([]byte, 32)
	binary.LittleEndian.PutUint64(payload, magic) // as the program compares it: a native u64
	binary.LittleEndian.PutUint32(payload[8:], seq)
	copy(payload[12:], "segchain trace probe")
	eth := &layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC}
	var net gopacket.NetworkLayer
	var ls []gopacket.SerializableLayer
	if p.Dst.Is4() {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip := &layers.IPv4{Version: 4, TTL: 64, SrcIP: p.Src.AsSlice(), DstIP: p.Dst.AsSlice()}
		switch p.Proto {
		case "udp":
			ip.Protocol = layers.IPProtocolUDP
		case "tcp":
			ip.Protocol = layers.IPProtocolTCP
		default:
			ip.Protocol = layers.IPProtocolICMPv4
		}
		net, ls = ip, []gopacket.SerializableLayer{eth, ip}
	} else {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip := &layers.IPv6{Version: 6, HopLimit: 64, SrcIP: p.Src.AsSlice(), DstIP: p.Dst.AsSlice()}
		switch p.Proto {
		case "udp":
			ip.NextHeader = layers.IPProtocolUDP
		case "tcp":
			ip.NextHeader = layers.IPProtocolTCP
		default:
			ip.NextHeader = layers.IPProtocolICMPv6
		}
		net, ls = ip, []gopacket.SerializableLayer{eth, ip}
	}
	switch p.Proto {
	case "udp":
		u := &layers.UDP{SrcPort: layers.UDPPort(p.Sport), DstPort: layers.UDPPort(p.Dport)}
		_ = u.SetNetworkLayerForChecksum(net)
		ls = append(ls, u)
	case "tcp":
		// A SYN carrying data: the first packet of a flow, so conntrack
		// on the way (End.AN.NF, an nftables SF) sees a new connection,
		// not an invalid one.
		t := &layers.TCP{SrcPort: layers.TCPPort(p.Sport), DstPort: layers.TCPPort(p.Dport), SYN: true, Seq: seq, Window: 65535}
		_ = t.SetNetworkLayerForChecksum(net)
		ls = append(ls, t)
	default:
		if p.Dst.Is4() {
			ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: uint16(magic), Seq: uint16(seq)})
		} else {
			ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}
			_ = ic.SetNetworkLayerForChecksum(net)
			// ICMPv6 echo: identifier and sequence are the first 4 bytes
			// after the 4-byte header, then our payload (at offset 8).
			echo := make([]byte, 4)
			binary.BigEndian.PutUint16(echo, uint16(magic))
			binary.BigEndian.PutUint16(echo[2:], uint16(seq))
			ls = append(ls, ic, gopacket.Payload(echo))
		}
	}
	ls = append(ls, gopacket.Payload(payload))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		return nil, fmt.Errorf("build probe: %w", err)
	}
	return buf.Bytes(), nil
}

// inject sends frame out of iface in namespace netns (AF_PACKET): the
// probe arrives at the headend as if the host on that link had sent it.
func inject(netns, iface string, frame []byte) error {
	return nsutil.Do(netns, func() error {
		ifc, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6}
		copy(sa.Addr[:], frame[:6])
		if err := unix.Sendto(fd, frame, 0, sa); err != nil {
			return fmt.Errorf("send probe on %s: %w", iface, err)
		}
		return nil
	})
}
