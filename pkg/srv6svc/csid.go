package srv6svc

import (
	"fmt"
	"net/netip"
	"strings"
)

// Compressed SIDs (RFC 9800 NEXT-C-SID, docs/usid.md). A service bound to
// a uSID receives packets whose destination is a container: its uSID is
// active, the uSIDs still to come follow it. To go on (End) it shifts the
// container while one follows and moves to the next segment only when the
// container is consumed. The helpers work on addresses so that a service
// can use them with SetSegment/SetSegmentsLeft or its own rewrite.

// CSIDFormat is a C-SID layout in bits: LBLen the locator block, NFLen one
// C-SID; both multiples of 8 as the kernel requires. F3216 is {32, 16}.
type CSIDFormat struct{ LBLen, NFLen int }

// F3216 is the deployed uSID format (segchain's sid.format: f3216).
var F3216 = CSIDFormat{LBLen: 32, NFLen: 16}

// F4816 is a 48-bit block with 16-bit uSIDs (segchain's sid.format:
// f4816, five uSIDs a container).
var F4816 = CSIDFormat{LBLen: 48, NFLen: 16}

func (f CSIDFormat) ok() bool {
	return f.LBLen > 0 && f.NFLen > 0 && f.LBLen%8 == 0 && f.NFLen%8 == 0 && f.LBLen+f.NFLen <= 128
}

// AdvanceContainer applies End with NEXT-C-SID to the destination da: when
// the bits after the active C-SID are non-zero it returns da shifted (the
// next C-SID active, zero filled) and true; the packet goes on with that
// destination and the same Segments Left. It returns da and false when
// the container is consumed (or f is invalid): then the next segment
// follows as for a full SID (Segments Left − 1).
func AdvanceContainer(da netip.Addr, f CSIDFormat) (netip.Addr, bool) {
	if !f.ok() || !da.Is6() {
		return da, false
	}
	b := da.As16()
	lb, nb := f.LBLen/8, f.NFLen/8
	more := false
	for i := lb + nb; i < 16; i++ {
		more = more || b[i] != 0
	}
	if !more {
		return da, false
	}
	for i := lb; i < 16; i++ {
		if i+nb < 16 {
			b[i] = b[i+nb]
		} else {
			b[i] = 0
		}
	}
	return netip.AddrFrom16(b), true
}

// String is the format as "LB/NF" (F3216: "32/16").
func (f CSIDFormat) String() string { return fmt.Sprintf("%d/%d", f.LBLen, f.NFLen) }

// ParseCSIDFormat parses "f3216", "f4816" or "LB/NF" (bits, e.g.
// "32/16", "56/16": what segchain plan prints as a binding's usid).
func ParseCSIDFormat(s string) (CSIDFormat, error) {
	switch strings.ToLower(s) {
	case "f3216":
		return F3216, nil
	case "f4816":
		return F4816, nil
	}
	var f CSIDFormat
	if _, err := fmt.Sscanf(s, "%d/%d", &f.LBLen, &f.NFLen); err != nil || !f.ok() || f.String() != s {
		return CSIDFormat{}, fmt.Errorf("C-SID format %q: want f3216, f4816 or LB/NF in bits, multiples of 8, at most 128 together (32/16)", s)
	}
	return f, nil
}

// CSIDPaddingOK checks container da's Argument (RFC 9800: the C-SIDs
// still to come, then zeros): once a C-SID is all zero, the end of the
// container, every bit after it must be zero too. A container that fails
// is malformed (the kernel would shift the zero C-SID into place and lose
// the packet on a missing route). An invalid f: true.
func CSIDPaddingOK(da netip.Addr, f CSIDFormat) bool {
	if !f.ok() || !da.Is6() {
		return true
	}
	b := da.As16()
	nb := f.NFLen / 8
	ended := false
	for i := f.LBLen/8 + nb; i < 16; i += nb {
		zero := true
		for j := i; j < i+nb && j < 16; j++ {
			zero = zero && b[j] == 0
		}
		if ended && !zero {
			return false
		}
		ended = ended || zero
	}
	return true
}
