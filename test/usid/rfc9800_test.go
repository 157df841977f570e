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
