package usid

import (
	"fmt"
	"net/netip"
)

// rfcDecode is an independent reading of an F3216 container, written from
// RFC 9800 (section 4.1, NEXT-C-SID flavor, and Appendix A): the
// destination address is Locator-Block (32 bits) | active C-SID (16) |
// Argument (80): the C-SIDs still to come, left-aligned, zero-padded.
// It returns the C-SIDs in processing order as the addresses the End
// pseudocode writes into the DA: Block | C-SID | zeros. The padding after
// the last C-SID must be all zeros (a non-zero after a zero is reported).
func rfcDecode(da netip.Addr) (block [4]byte, seq []netip.Addr, err error) {
	b := da.As16()
	copy(block[:], b[:4])
	zero := false
	for off := 4; off+2 <= 16; off += 2 {
		v := uint16(b[off])<<8 | uint16(b[off+1])
		if v == 0 {
			zero = true
			continue
		}
		if zero {
			return block, seq, fmt.Errorf("%s: non-zero C-SID after the end of the container", da)
		}
		var a [16]byte
		copy(a[:4], block[:])
		a[4], a[5] = byte(v>>8), byte(v)
		seq = append(seq, netip.AddrFrom16(a))
	}
	return block, seq, nil
}

// rfcShift is End with NEXT-C-SID on container da read by rfcDecode: the
// C-SID after the active one becomes active, the rest follow it, zero
// filled ("Copy DA.Argument into the bits [LBL..(LBL+AL-1)] of the DA.
// Set the bits [(LBL+AL)..127] of the DA to zero."). A container with
// nothing after the active C-SID is an error here (End would go on with
// the next segment).
func rfcShift(da netip.Addr) (netip.Addr, error) {
	block, seq, err := rfcDecode(da)
	if err != nil {
		return da, err
	}
	if len(seq) < 2 {
		return da, fmt.Errorf("%s: no C-SID after the active one", da)
	}
	var a [16]byte
	copy(a[:4], block[:])
	for i, c := range seq[1:] {
		b := c.As16()
		a[4+2*i], a[5+2*i] = b[4], b[5]
	}
	return netip.AddrFrom16(a), nil
}
