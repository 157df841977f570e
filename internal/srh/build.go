package srh

import (
	"fmt"
	"net/netip"
)

// Options tune the headend builders.
type Options struct {
	Tag   uint16
	Flags uint8
	// TLVs are appended to the SRH in order (padded to 8 octets). Put an
	// HMAC TLV first: the TLV area starts 8-octet aligned.
	TLVs []TLV
	// Reduced builds the reduced variants (H.Encaps.Red, H.Encaps.L2.Red,
	// and the reduced insert): the first SID is only in the destination
	// address, not in the SRH (SegmentsLeft = LastEntry+1). A one-SID
	// policy then has no SRH at all, unless TLVs must be carried, in which
	// case a full SRH is written (RFC 8754 erratum 7081).
	Reduced bool
	// Outer IPv6 header fields of BuildEncap; HopLimit 0 means 64.
	// BuildInsert keeps the original packet's values.
	HopLimit     uint8
	TrafficClass uint8
	FlowLabel    uint32
}

func checkPath(path []netip.Addr, max int) error {
	if len(path) == 0 || len(path) > max {
		return fmt.Errorf("srh: path of %d segments (want 1..%d): %w", len(path), max, ErrInvalid)
	}
	for i, a := range path {
		if !a.Is6() || a.Is4In6() {
			return fmt.Errorf("srh: path[%d] %v is not an IPv6 address: %w", i, a, ErrInvalid)
		}
	}
	return nil
}

// policySRH builds the SRH for path (visiting order) ahead of an optional
// final destination stored in Segments[0] (insert mode). It returns nil
// when the reduced form needs no SRH.
func policySRH(final *netip.Addr, path []netip.Addr, o Options) *SRH {
	listed := path
	if o.Reduced && (final != nil || len(path) > 1 || len(o.TLVs) == 0) {
		listed = path[1:]
	}
	segs := make([]netip.Addr, 0, len(listed)+1)
	if final != nil {
		segs = append(segs, *final)
	}
	for i := len(listed) - 1; i >= 0; i-- {
		segs = append(segs, listed[i])
	}
	if len(segs) == 0 {
		return nil
	}
	sl := len(segs) - 1
	if len(listed) < len(path) {
		sl++ // reduced: the active SID is only in the DA
	}
	return &SRH{
		RoutingType:  RoutingTypeSRH,
		SegmentsLeft: uint8(sl),
		LastEntry:    uint8(len(segs) - 1),
		Flags:        o.Flags,
		Tag:          o.Tag,
		Segments:     segs,
		TLVs:         o.TLVs,
	}
}

// BuildEncap returns an H.Encaps packet: an outer IPv6 header from src to
// path[0], an SRH carrying path (visiting order) and inner as payload with
// next header innerProto (41 IPv6, 4 IPv4, 143 Ethernet). With
// opts.Reduced it builds H.Encaps.Red.
func BuildEncap(src netip.Addr, path []netip.Addr, inner []byte, innerProto uint8, opts Options) ([]byte, error) {
	if err := checkPath(path, MaxSegments); err != nil {
		return nil, err
	}
	if !src.Is6() || src.Is4In6() {
		return nil, fmt.Errorf("srh: encap source %v is not an IPv6 address: %w", src, ErrInvalid)
	}
	hl := opts.HopLimit
	if hl == 0 {
		hl = 64
	}
	p := &Packet{
		TrafficClass: opts.TrafficClass,
		FlowLabel:    opts.FlowLabel,
		HopLimit:     hl,
		Src:          src,
		Dst:          path[0],
		SRH:          policySRH(nil, path, opts),
		InnerKind:    KindOf(innerProto),
		InnerProto:   innerProto,
		Inner:        inner,
	}
	b, err := p.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("build encap: %w", err)
	}
	return b, nil
}

// BuildL2Encap returns an H.Encaps.L2 packet carrying the Ethernet frame
// (without FCS), next header 143. opts.Reduced builds H.Encaps.L2.Red.
func BuildL2Encap(src netip.Addr, path []netip.Addr, frame []byte, opts Options) ([]byte, error) {
	return BuildEncap(src, path, frame, ProtoEthernet, opts)
}

// BuildInsert returns the IPv6 packet with an SRH inserted (H.Insert, the
// kernel's "inline" mode): the original destination becomes Segment
// List[0] (the final destination), path (visiting order) is listed before
// it and the destination address becomes path[0]. The SRH goes after a
// Hop-by-Hop header; Destination Options move after the SRH. Addresses,
// hop limit, traffic class and flow label are kept; opts.Reduced leaves
// path[0] out of the list. The packet must not already have a routing
// header.
func BuildInsert(ipv6Packet []byte, path []netip.Addr, opts Options) ([]byte, error) {
	if err := checkPath(path, MaxSegments-1); err != nil {
		return nil, err
	}
	p, err := DecodePacket(ipv6Packet)
	if err != nil {
		return nil, fmt.Errorf("build insert: %w", err)
	}
	if p.SRH != nil {
		return nil, fmt.Errorf("build insert: packet already has an srh: %w", ErrInvalid)
	}
	final := p.Dst
	p.SRH = policySRH(&final, path, opts)
	var hbh []ExtHeader
	for _, h := range p.ExtHeaders {
		if h.Proto == ProtoHopByHop {
			hbh = append(hbh, h)
		} else {
			p.PostExtHeaders = append(p.PostExtHeaders, h)
		}
	}
	p.ExtHeaders = hbh
	p.Dst = path[0]
	b, err := p.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("build insert: %w", err)
	}
	return b, nil
}
