package srunaware

import (
	"encoding/binary"
	"net/netip"
)

// HeaderView is a decoded outer IPv6 header + SRH, as cached by a proxy.
type HeaderView struct {
	Len      int          `json:"len"`
	Src      netip.Addr   `json:"src,omitzero"`
	DA       netip.Addr   `json:"da,omitzero"`
	HopLimit uint8        `json:"hop_limit"`
	SL       uint8        `json:"segments_left"`
	Tag      uint16       `json:"tag,omitempty"`
	Path     []netip.Addr `json:"path,omitempty"` // Segment List[n-1] ... [0]
	TLVBytes int          `json:"tlv_bytes,omitempty"`
	ExtHdrs  []uint8      `json:"ext_headers,omitempty"` // protocol numbers, in order
}

// DecodeHeader decodes the outer headers bytes (no payload) best-effort.
func DecodeHeader(b []byte) HeaderView {
	v := HeaderView{Len: len(b)}
	if len(b) < ipv6HdrLen {
		return v
	}
	v.Src = netip.AddrFrom16([16]byte(b[8:24]))
	v.DA = netip.AddrFrom16([16]byte(b[24:40]))
	v.HopLimit = b[7]
	nh, off := b[6], ipv6HdrLen
	for i := 0; i < 8 && off+2 <= len(b); i++ {
		switch nh {
		case 0, 60:
			v.ExtHdrs = append(v.ExtHdrs, nh)
			nh, off = b[off], off+(int(b[off+1])+1)*8
		case protoRouting:
			v.ExtHdrs = append(v.ExtHdrs, nh)
			hl := (int(b[off+1]) + 1) * 8
			if off+srhFixedLen > len(b) || off+hl > len(b) {
				return v
			}
			srh := b[off : off+hl]
			v.SL = srh[3]
			v.Tag = binary.BigEndian.Uint16(srh[6:8])
			n := int(srh[4]) + 1
			if srhFixedLen+16*n <= hl {
				for j := n - 1; j >= 0; j-- {
					v.Path = append(v.Path, netip.AddrFrom16([16]byte(srh[srhFixedLen+16*j:])))
				}
				v.TLVBytes = hl - srhFixedLen - 16*n
			}
			nh, off = srh[0], off+hl
		default:
			return v
		}
	}
	return v
}
