package main

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"github.com/segchain/segchain/internal/plan"
)

// Compressed chains in status (sid.format f3216, f4816, csid;
// docs/usid.md): each hop that is a uSID shows its 16-bit form next to its
// address form, and the SID list as pushed (containers) follows the hops.

// usidForm is " (uSID 02d0)" for a hop of a compressed chain whose SID is a
// uSID (in the chain's block, not a full SID entry of the pushed list),
// else "". The uSID is the 16 bits after the block (LBL bits).
func usidForm(ch plan.Chain, sid netip.Addr) string {
	blk := ch.USIDBlock
	if len(ch.Segments) == 0 || slices.Contains(ch.Segments, sid) || !blk.IsValid() || !blk.Contains(sid) || blk.Bits()%8 != 0 || blk.Bits() > 112 {
		return ""
	}
	b, o := sid.As16(), blk.Bits()/8
	return fmt.Sprintf(" (uSID %02x%02x)", b[o], b[o+1])
}

// printPushed prints the containers a compressed chain pushes.
func printPushed(w io.Writer, ch plan.Chain) {
	if len(ch.Segments) == 0 {
		return
	}
	s := make([]string, len(ch.Segments))
	for i, a := range ch.Segments {
		s[i] = a.String()
	}
	fmt.Fprintf(w, "  pushed as %s %s\n", ch.Encap, strings.Join(s, ","))
}
