package usid

import (
	"fmt"
	"net/netip"
)

// rfcDecode is an independent reading of a container of 16-bit C-SIDs
// after a Locator-Block of lbl bits (a multiple of 8: F3216's 32,
// F4816's 48), written from RFC 9800 (section 4.1, NEXT-C-SID flavor,
// and Appendix A): the destination address is Locator-Block (LBL bits) |
// active C-SID (16) | Argument (128 − LBL − 16): the C-SIDs still to
// come, left-aligned, zero-padded. It returns the block and the C-SIDs in
// processing order as the addresses the End pseudocode writes into the
// DA: Block | C-SID | zeros. The padding after the last C-SID must be all
// zeros (a non-zero after a zero is reported).
func rfcDecode(da netip.Addr, lbl int) (block netip.Prefix, seq []netip.Addr, err error) {
	b := da.As16()
	lb := lbl / 8
	var blk [16]byte
	copy(blk[:lb], b[:lb])
	block = netip.PrefixFrom(netip.AddrFrom16(blk), lbl)
	zero := false
	for off := lb; off+2 <= 16; off += 2 {
		v := uint16(b[off])<<8 | uint16(b[off+1])
		if v == 0 {
			zero = true
			continue
		}
		if zero {
			return block, seq, fmt.Errorf("%s: non-zero C-SID after the end of the container", da)
		}
		a := blk
		a[lb], a[lb+1] = byte(v>>8), byte(v)
		seq = append(seq, netip.AddrFrom16(a))
	}
	if (128-lbl)%16 != 0 && b[15] != 0 {
		return block, seq, fmt.Errorf("%s: non-zero bits after the last C-SID", da)
	}
	return block, seq, nil
}

// rfcShift is End with NEXT-C-SID on container da read by rfcDecode: the
// C-SID after the active one becomes active, the rest follow it, zero
// filled ("Copy DA.Argument into the bits [LBL..(LBL+AL-1)] of the DA.
// Set the bits [(LBL+AL)..127] of the DA to zero."). A container with
// nothing after the active C-SID is an error here (End would go on with
// the next segment).
func rfcShift(da netip.Addr, lbl int) (netip.Addr, error) {
	block, seq, err := rfcDecode(da, lbl)
	if err != nil {
		return da, err
	}
	if len(seq) < 2 {
		return da, fmt.Errorf("%s: no C-SID after the active one", da)
	}
	a := block.Addr().As16()
	lb := lbl / 8
	for i, c := range seq[1:] {
		b := c.As16()
		a[lb+2*i], a[lb+1+2*i] = b[lb], b[lb+1]
	}
	return netip.AddrFrom16(a), nil
}
