package csid

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Format is a NEXT-C-SID layout: the locator block (LBL bits, the
// kernel's lblen) and the length of one C-SID (LNL+FL, the kernel's
// nflen). F3216 is the one deployed (FRR usid-f3216, VPP, SONiC).
type Format struct {
	Block netip.Prefix
	NFLen int
}

// F3216 is the 32-bit block, 16-bit uSID format with block b.
func F3216(b netip.Prefix) Format { return Format{Block: b.Masked(), NFLen: 16} }

// Errors of Decode; match them with errors.Is.
var (
	ErrNotInBlock = errors.New("address outside the locator block")
	ErrPadding    = errors.New("invalid padding: a non-zero C-SID after the end of the container")
	ErrEmpty      = errors.New("container without an active C-SID")
)

// Validate checks what the kernel accepts (lblen and nflen multiples of 8,
// lblen+nflen ≤ 128) and what this package computes with (nflen ≤ 16).
func (f Format) Validate() error {
	lb := f.Block.Bits()
	switch {
	case !f.Block.IsValid() || !f.Block.Addr().Is6() || f.Block.Addr().Is4In6():
		return fmt.Errorf("block %s: want an IPv6 prefix", f.Block)
	case lb%8 != 0 || lb == 0:
		return fmt.Errorf("block %s: the kernel wants a block length that is a positive multiple of 8 (lblen)", f.Block)
	case f.NFLen%8 != 0 || f.NFLen <= 0 || f.NFLen > 16:
		return fmt.Errorf("C-SID length %d: want 8 or 16 bits (nflen)", f.NFLen)
	case lb+f.NFLen > 128:
		return fmt.Errorf("block /%d + C-SID %d bits > 128", lb, f.NFLen)
	}
	return nil
}

// PerContainer is how many C-SIDs one container holds: 6 for F3216.
func (f Format) PerContainer() int { return (128 - f.Block.Bits()) / f.NFLen }

// Max is the largest C-SID value.
func (f Format) Max() uint32 { return 1<<f.NFLen - 1 }

func (f Format) get(b [16]byte, i int) uint32 {
	off := f.Block.Bits()/8 + i*f.NFLen/8
	if f.NFLen == 8 {
		return uint32(b[off])
	}
	return uint32(b[off])<<8 | uint32(b[off+1])
}

func (f Format) put(b *[16]byte, i int, v uint32) {
	off := f.Block.Bits()/8 + i*f.NFLen/8
	if f.NFLen == 8 {
		b[off] = byte(v)
		return
	}
	b[off], b[off+1] = byte(v>>8), byte(v)
}

// SID is the address of C-SID v on its own: block:v:: (what the node's
// /(lblen+nflen) route matches).
func (f Format) SID(v uint32) netip.Addr {
	b := f.Block.Addr().As16()
	f.put(&b, 0, v)
	return netip.AddrFrom16(b)
}

// Prefix is the route of C-SID v: block:v::/(lblen+nflen).
func (f Format) Prefix(v uint32) netip.Prefix {
	return netip.PrefixFrom(f.SID(v), f.Block.Bits()+f.NFLen)
}

// Value returns the C-SID of a SID written as block:v:: (and only that:
// trailing bits set make it a container, not one SID).
func (f Format) Value(a netip.Addr) (uint32, bool) {
	if !f.Block.Contains(a) {
		return 0, false
	}
	c, err := f.Decode(a)
	if err != nil || len(c.Next) > 0 {
		return 0, false
	}
	return c.Active, true
}

// Container is a decoded container: the active C-SID and the ones still to
// come in this container, in path order.
type Container struct {
	Block  netip.Prefix
	Active uint32
	Next   []uint32
}

// Decode splits a container. A zero C-SID ends it (RFC 9800 section 4.1:
// the argument, the bits after the active C-SID, is zero when the
// container is consumed); anything non-zero after that zero is
// ErrPadding, and an active C-SID of zero is ErrEmpty.
func (f Format) Decode(a netip.Addr) (Container, error) {
	if !a.Is6() || !f.Block.Contains(a) {
		return Container{}, fmt.Errorf("%s: %w %s", a, ErrNotInBlock, f.Block)
	}
	b := a.As16()
	c := Container{Block: f.Block, Active: f.get(b, 0)}
	if c.Active == 0 {
		return c, fmt.Errorf("%s: %w", a, ErrEmpty)
	}
	ended := false
	for i := 1; i < f.PerContainer(); i++ {
		v := f.get(b, i)
		switch {
		case v == 0:
			ended = true
		case ended:
			return c, fmt.Errorf("%s: C-SID %d: %w", a, i, ErrPadding)
		default:
			c.Next = append(c.Next, v)
		}
	}
	// Bits after the last whole C-SID (when 128-lblen is not a multiple
	// of nflen) are padding too.
	used := f.Block.Bits() + f.PerContainer()*f.NFLen
	for bit := used; bit < 128; bit++ {
		if b[bit/8]>>(7-bit%8)&1 != 0 {
			return c, fmt.Errorf("%s: trailing bit %d: %w", a, bit, ErrPadding)
		}
	}
	return c, nil
}

// Shift is the NEXT-C-SID End operation on a container with more C-SIDs:
// the next one becomes active (RFC 9800 section 4.1.1, DA.Argument
// shifted left by nflen, zero filled). ok is false when the container is
// consumed (then the SRH's next entry follows: SL--).
func (f Format) Shift(a netip.Addr) (netip.Addr, bool) {
	c, err := f.Decode(a)
	if err != nil || len(c.Next) == 0 {
		return a, false
	}
	b := f.Block.Addr().As16()
	for i, v := range c.Next {
		f.put(&b, i, v)
	}
	return netip.AddrFrom16(b), true
}

// String prints a container as block + C-SIDs: fcbb:bb00::/32 [0100 0201 0401].
func (c Container) String() string {
	var s []string
	s = append(s, fmt.Sprintf("%04x", c.Active))
	for _, v := range c.Next {
		s = append(s, fmt.Sprintf("%04x", v))
	}
	return fmt.Sprintf("%s [%s]", c.Block, strings.Join(s, " "))
}

// Hop is one hop of a chain: a C-SID (USID true, Value set) or a full SID.
// Last marks a C-SID whose behaviour does not shift (a decapsulating
// egress): nothing may follow it in its container.
type Hop struct {
	USID  bool
	Value uint32
	Full  netip.Addr
	Last  bool
}

// Pack compiles hops into the fewest SID-list entries, in path order:
// consecutive C-SIDs share a container (up to PerContainer each, a Last
// C-SID closes its container), a full SID is an entry of its own.
func (f Format) Pack(hops []Hop) []netip.Addr {
	var out []netip.Addr
	var cur [16]byte
	n := 0
	flush := func() {
		if n > 0 {
			out = append(out, netip.AddrFrom16(cur))
			n = 0
		}
	}
	for _, h := range hops {
		if !h.USID {
			flush()
			out = append(out, h.Full)
			continue
		}
		if n == f.PerContainer() {
			flush()
		}
		if n == 0 {
			cur = f.Block.Addr().As16()
		}
		f.put(&cur, n, h.Value)
		n++
		if h.Last {
			flush()
		}
	}
	flush()
	return out
}

// HeaderBytes is the SRv6 overhead a headend adds for a SID list of n
// entries: the outer IPv6 header (40) plus an SRH of 8 + 16 per entry;
// reduced (H.Encaps.Red) leaves the first entry out of the SRH and the
// whole SRH when that was the only one.
func HeaderBytes(n int, reduced bool) int {
	srh := n
	if reduced {
		srh--
	}
	if srh <= 0 {
		return 40
	}
	return 40 + 8 + 16*srh
}
