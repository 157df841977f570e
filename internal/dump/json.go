package dump

import (
	"net/netip"
	"time"
	"unicode/utf8"

	"github.com/segchain/segchain/internal/srh"
)

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexdig[c>>4], hexdig[c&0xf])
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
	}
	return append(b, '"')
}

func appendJSONAddr(b []byte, a netip.Addr) []byte {
	b = append(b, '"')
	b = a.AppendTo(b)
	return append(b, '"')
}

// jkey appends ,"key": (or "key": right after an opening brace).
func jkey(b []byte, key string) []byte {
	if c := b[len(b)-1]; c != '{' && c != '[' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func jU(b []byte, key string, v uint64) []byte { return appendU(jkey(b, key), v) }
func jS(b []byte, key, v string) []byte        { return appendJSONString(jkey(b, key), v) }
func jB(b []byte, key string, v bool) []byte {
	b = jkey(b, key)
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

func (p *Printer) appendJSON(b []byte, r *Record) []byte {
	b = append(b, '{')
	b = jkey(b, "time")
	b = append(b, '"')
	b = r.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = jU(b, "caplen", uint64(r.CapLen))
	b = jU(b, "len", uint64(r.OrigLen))
	if !r.IPv6 {
		b = jU(b, "ethertype", uint64(r.EtherType))
		if r.EtherType == etherIPv4 {
			b = p.appendInnerJSON(jkey(b, "ipv4"), &r.Inner)
		}
		if r.Err != nil {
			b = appendErrJSON(b, r.Err)
		}
		return append(b, '}', '\n')
	}
	pk := &r.Pkt
	if pk.Src.IsValid() {
		b = jkey(b, "ipv6")
		b = append(b, '{')
		b = appendJSONAddr(jkey(b, "src"), pk.Src)
		b = appendJSONAddr(jkey(b, "dst"), pk.Dst)
		b = jU(b, "traffic_class", uint64(pk.TrafficClass))
		b = jU(b, "flow_label", uint64(pk.FlowLabel))
		b = jU(b, "payload_length", uint64(pk.PayloadLen))
		b = jU(b, "next_header", uint64(pk.NextHeader))
		b = jU(b, "hop_limit", uint64(pk.HopLimit))
		if len(pk.ExtHeaders) > 0 {
			b = appendExtJSON(jkey(b, "ext_headers"), pk.ExtHeaders)
		}
		b = append(b, '}')
	}
	if r.Err != nil {
		b = appendErrJSON(b, r.Err)
		return append(b, '}', '\n')
	}
	if s := pk.SRH; s != nil {
		b = jkey(b, "srh")
		b = append(b, '{')
		b = jU(b, "next_header", uint64(s.NextHeader))
		b = jU(b, "hdr_ext_len", uint64(s.HdrExtLen))
		b = jU(b, "routing_type", uint64(s.RoutingType))
		b = jU(b, "segments_left", uint64(s.SegmentsLeft))
		b = jU(b, "last_entry", uint64(s.LastEntry))
		b = jU(b, "flags", uint64(s.Flags))
		b = jU(b, "tag", uint64(s.Tag))
		b = jB(b, "reduced", s.Reduced())
		b = jkey(b, "segments")
		b = append(b, '[')
		if s.Reduced() {
			b = p.appendSegJSON(b, int(s.LastEntry)+1, pk.Dst, "active", false)
		}
		for i := len(s.Segments) - 1; i >= 0; i-- {
			b = p.appendSegJSON(b, i, s.Segments[i], segState(s, i), true)
		}
		b = append(b, ']')
		b = jkey(b, "tlvs")
		b = append(b, '[')
		for _, t := range s.TLVs {
			b = appendTLVJSON(b, t)
		}
		b = append(b, ']')
		if len(pk.PostExtHeaders) > 0 {
			b = appendExtJSON(jkey(b, "ext_headers_after"), pk.PostExtHeaders)
		}
		b = append(b, '}')
	}
	b = p.appendInnerJSON(jkey(b, "inner"), &r.Inner)
	return append(b, '}', '\n')
}

func appendErrJSON(b []byte, err error) []byte {
	b = jkey(b, "error")
	b = append(b, '{')
	if reason, off, ok := errReason(err); ok {
		b = jS(b, "reason", reason)
		b = jU(b, "offset", uint64(off))
	}
	b = jS(b, "message", err.Error())
	return append(b, '}')
}

func appendExtJSON(b []byte, hs []srh.ExtHeader) []byte {
	b = append(b, '[')
	for _, h := range hs {
		if b[len(b)-1] != '[' {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = jU(b, "proto", uint64(h.Proto))
		b = jU(b, "len", uint64(len(h.Raw)))
		b = append(b, '}')
	}
	return append(b, ']')
}

func (p *Printer) appendSegJSON(b []byte, i int, a netip.Addr, state string, inSRH bool) []byte {
	if b[len(b)-1] != '[' {
		b = append(b, ',')
	}
	b = append(b, '{')
	b = jU(b, "index", uint64(i))
	b = appendJSONAddr(jkey(b, "sid"), a)
	b = jS(b, "state", state)
	if !inSRH {
		b = jB(b, "in_srh", false)
	}
	if info, ok := p.lookup(a); ok {
		b = jS(b, "node", info.Node)
		if info.Service != "" {
			b = jS(b, "service", info.Service)
		}
		b = jS(b, "behavior", info.Behavior)
		if info.isContainer() {
			b = p.usidJSON(b, a, info)
		} else if info.LocatorBits > 0 {
			funct, args := info.Structure(a)
			b = jkey(b, "locator")
			b = append(b, '"')
			b = netip.PrefixFrom(a, info.LocatorBits).Masked().AppendTo(b)
			b = append(b, '"')
			b = jU(b, "funct", funct)
			b = jU(b, "args", args)
		}
	}
	return append(b, '}')
}

func appendTLVJSON(b []byte, t srh.TLV) []byte {
	if b[len(b)-1] != '[' {
		b = append(b, ',')
	}
	b = append(b, '{')
	b = jU(b, "type", uint64(t.Type))
	switch t.Type {
	case srh.TLVPad1:
		b = jS(b, "name", "pad1")
		return append(b, '}')
	case srh.TLVPadN:
		b = jS(b, "name", "padn")
	case srh.TLVHMAC:
		if h, ok := t.HMAC(); ok {
			b = jS(b, "name", "hmac")
			b = jU(b, "len", uint64(len(t.Value)))
			b = jB(b, "d", h.D)
			b = jU(b, "reserved", uint64(h.Reserved))
			b = jU(b, "key_id", uint64(h.KeyID))
			b = jkey(b, "hmac")
			b = append(b, '"')
			b = appendHexBytes(b, h.HMAC)
			b = append(b, '"')
			return append(b, '}')
		}
		b = jS(b, "name", "hmac")
	default:
		b = jS(b, "name", "unknown")
	}
	b = jU(b, "len", uint64(len(t.Value)))
	b = jkey(b, "value")
	b = append(b, '"')
	b = appendHexBytes(b, t.Value)
	b = append(b, '"')
	return append(b, '}')
}

func (p *Printer) appendInnerJSON(b []byte, in *Inner) []byte {
	b = append(b, '{')
	b = jS(b, "kind", in.Kind.String())
	if in.Kind == srh.InnerEthernet {
		b = jkey(b, "eth_src")
		b = append(b, '"')
		b = appendMAC(b, in.EthSrc)
		b = append(b, '"')
		b = jkey(b, "eth_dst")
		b = append(b, '"')
		b = appendMAC(b, in.EthDst)
		b = append(b, '"')
		b = jU(b, "ethertype", uint64(in.EthType))
	}
	if in.Family != 0 && in.Src.IsValid() {
		b = jU(b, "family", uint64(in.Family))
		b = appendJSONAddr(jkey(b, "src"), in.Src)
		b = appendJSONAddr(jkey(b, "dst"), in.Dst)
		b = jU(b, "hop_limit", uint64(in.HopLimit))
		b = jU(b, "length", uint64(in.IPLen))
		if in.Family == 4 {
			b = jB(b, "ip_checksum_ok", !in.IPCsumBad)
		}
	}
	if in.Frag {
		b = jB(b, "fragment", true)
	}
	if in.HasL4 {
		t := &in.L4
		b = jU(b, "proto", uint64(t.Proto))
		if n := protoName(t.Proto); n != "" {
			b = jS(b, "proto_name", n)
		}
		if t.Err != "" {
			b = jS(b, "error", t.Err)
		} else {
			switch t.Proto {
			case srh.ProtoTCP, srh.ProtoUDP:
				b = jU(b, "sport", uint64(t.SrcPort))
				b = jU(b, "dport", uint64(t.DstPort))
				if t.Proto == srh.ProtoTCP {
					b = jkey(b, "tcp_flags")
					b = append(b, '"')
					b = appendTCPFlags(b, t.TCPFlags)
					b = append(b, '"')
					b = jU(b, "seq", uint64(t.Seq))
					b = jU(b, "ack", uint64(t.Ack))
					b = jU(b, "window", uint64(t.Window))
				}
				b = jU(b, "data_len", uint64(t.DataLen))
			case srh.ProtoICMPv6, protoICMP:
				b = jU(b, "icmp_type", uint64(t.ICMPType))
				b = jU(b, "icmp_code", uint64(t.ICMPCode))
				if isEcho(t) {
					b = jU(b, "icmp_id", uint64(t.ICMPID))
					b = jU(b, "icmp_seq", uint64(t.ICMPSeq))
				}
			default:
				b = jU(b, "len", uint64(t.Len))
			}
			switch t.Proto {
			case srh.ProtoTCP, srh.ProtoUDP, srh.ProtoICMPv6, protoICMP:
				b = jU(b, "checksum", uint64(t.Checksum))
				b = jS(b, "checksum_status", csumNames[t.CsumState])
			}
		}
	} else if in.Kind == srh.InnerTransport {
		b = jU(b, "proto", uint64(in.L4.Proto))
	}
	if in.Err != "" {
		b = jS(b, "error", in.Err)
	}
	return append(b, '}')
}
