package srunaware

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// ErrNotSupported marks a feature this kernel (or this proxy) lacks.
var ErrNotSupported = errors.New("not supported")

const (
	cacheHdrMax     = len(proxyTCProxyCache{}.Hdr) // bytes of outer headers a cache holds
	ipv6HdrLen      = 40
	srhFixedLen     = 8
	protoIPv4       = 4
	protoIPv6       = 41
	protoRouting    = 43
	protoEthernet   = 143
	srhType         = 4
	defaultHopLimit = 64
)

// innerProto is the IPv6 Next Header value that announces an inner type.
func innerProto(in Inner) uint8 {
	switch in {
	case InnerIPv4:
		return protoIPv4
	case InnerEthernet:
		return protoEthernet
	}
	return protoIPv6
}

// BuildEncap returns the outer IPv6 header and SRH an End.AS proxy pushes:
// source src, DA segs[0], an SRH whose path is segs (Segment List[0] =
// the last segment, SL = len(segs)-1), the tag, and Next Header naming
// inner. Payload Length is left 0 (the program sets it per packet). nhOff
// is the offset of the SRH's Next Header byte.
func BuildEncap(src netip.Addr, segs []netip.Addr, tag uint16, inner Inner) (hdr []byte, nhOff int) {
	n := len(segs)
	hdr = make([]byte, ipv6HdrLen+srhFixedLen+16*n)
	hdr[0] = 0x60
	hdr[6] = protoRouting
	hdr[7] = defaultHopLimit
	s16 := src.As16()
	copy(hdr[8:24], s16[:])
	d16 := segs[0].As16()
	copy(hdr[24:40], d16[:])
	srh := hdr[ipv6HdrLen:]
	srh[0] = innerProto(inner)
	srh[1] = uint8(2 * n)
	srh[2] = srhType
	srh[3] = uint8(n - 1) // segments left
	srh[4] = uint8(n - 1) // last entry
	binary.BigEndian.PutUint16(srh[6:8], tag)
	for i, a := range segs {
		a16 := a.As16()
		copy(srh[srhFixedLen+16*(n-1-i):], a16[:])
	}
	return hdr, ipv6HdrLen
}
