package dump

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/segchain/segchain/internal/srh"
)

// Filter selects packets after decoding. Zero values match everything;
// SegLeft and Tag use -1 for "any". A packet without an SRH never matches
// SID, SegLeft or Tag.
type Filter struct {
	SID     netip.Prefix // an address (/128) or a prefix, in the segment list or the destination
	SegLeft int
	Tag     int
	Inner   InnerMatch
}

// InnerMatch matches the inner packet (insert mode: outer source, final
// destination and the transport after the SRH).
type InnerMatch struct {
	Src, Dst netip.Prefix
	Proto    int // -1 any
	Port     int // -1 any; source or destination
}

// NewFilter returns a Filter that matches everything.
func NewFilter() Filter { return Filter{SegLeft: -1, Tag: -1, Inner: InnerMatch{Proto: -1, Port: -1}} }

// ParsePrefix accepts an address or a prefix.
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("parse prefix %q: %w", s, err)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("parse address %q: %w", s, err)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

var protoByName = map[string]int{"tcp": 6, "udp": 17, "icmp6": 58, "icmpv6": 58, "icmp": 1, "ipv6": 41, "ipv4": 4}

// ParseInnerMatch parses 'src A dst B proto P port N' (every part optional,
// any order; A and B are addresses or prefixes, P a name or a number).
func ParseInnerMatch(s string) (InnerMatch, error) {
	m := InnerMatch{Proto: -1, Port: -1}
	f := strings.Fields(s)
	if len(f)%2 != 0 {
		return m, fmt.Errorf("inner filter %q: want keyword/value pairs (src, dst, proto, port)", s)
	}
	for i := 0; i < len(f); i += 2 {
		k, v := f[i], f[i+1]
		var err error
		switch k {
		case "src":
			m.Src, err = ParsePrefix(v)
		case "dst":
			m.Dst, err = ParsePrefix(v)
		case "proto":
			if n, ok := protoByName[strings.ToLower(v)]; ok {
				m.Proto = n
			} else if n, e := strconv.ParseUint(v, 10, 8); e == nil {
				m.Proto = int(n)
			} else {
				err = fmt.Errorf("unknown protocol %q", v)
			}
		case "port":
			n, e := strconv.ParseUint(v, 10, 16)
			if e != nil {
				err = fmt.Errorf("port %q: want 0..65535", v)
			}
			m.Port = int(n)
		default:
			err = fmt.Errorf("unknown keyword %q (want src, dst, proto, port)", k)
		}
		if err != nil {
			return m, fmt.Errorf("inner filter: %w", err)
		}
	}
	return m, nil
}

func (m InnerMatch) any() bool {
	return !m.Src.IsValid() && !m.Dst.IsValid() && m.Proto < 0 && m.Port < 0
}

// Match reports whether r passes the filter.
func (f *Filter) Match(r *Record) bool {
	needSRH := f.SID.IsValid() || f.SegLeft >= 0 || f.Tag >= 0
	if needSRH {
		if !r.IPv6 || r.Err != nil || r.Pkt.SRH == nil {
			return false
		}
		s := r.Pkt.SRH
		if f.SegLeft >= 0 && int(s.SegmentsLeft) != f.SegLeft {
			return false
		}
		if f.Tag >= 0 && int(s.Tag) != f.Tag {
			return false
		}
		if f.SID.IsValid() && !f.SID.Contains(r.Pkt.Dst) && !anyIn(f.SID, s.Segments) {
			return false
		}
	}
	if f.Inner.any() {
		return true
	}
	in := &r.Inner
	if in.Family == 0 {
		return false
	}
	if f.Inner.Src.IsValid() && !f.Inner.Src.Contains(in.Src) {
		return false
	}
	if f.Inner.Dst.IsValid() && !f.Inner.Dst.Contains(in.Dst) {
		return false
	}
	if f.Inner.Proto >= 0 && !(in.HasL4 || in.Frag) || f.Inner.Proto >= 0 && int(in.L4.Proto) != f.Inner.Proto {
		return false
	}
	if f.Inner.Port >= 0 {
		t := &in.L4
		if !in.HasL4 || (t.Proto != srh.ProtoTCP && t.Proto != srh.ProtoUDP) ||
			(int(t.SrcPort) != f.Inner.Port && int(t.DstPort) != f.Inner.Port) {
			return false
		}
	}
	return true
}

func anyIn(p netip.Prefix, as []netip.Addr) bool {
	for _, a := range as {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
