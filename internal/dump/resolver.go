package dump

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/segchain/segchain/internal/csid"
)

// SIDInfo describes one SID of the domain: who owns it and its structure
// (LOC:FUNCT:ARGS bit lengths).
type SIDInfo struct {
	SID          netip.Prefix
	Node         string
	Service      string
	Behavior     string
	LocatorBits  int
	FunctionBits int
	ArgsBits     int
	// CSID is set when the SID is a uSID (RFC 9800 C-SID): addresses it
	// covers are containers, decoded by the printers (csid.go).
	CSID csid.Format
}

// SIDResolver annotates addresses found in packets.
type SIDResolver interface {
	Lookup(a netip.Addr) (SIDInfo, bool)
}

// Table is a SIDResolver over a fixed list: the longest SID prefix
// containing the address wins.
type Table struct{ sids []SIDInfo }

// NewTable returns a Table over infos (copied).
func NewTable(infos []SIDInfo) *Table {
	t := &Table{sids: slices.Clone(infos)}
	slices.SortStableFunc(t.sids, func(a, b SIDInfo) int { return cmp.Compare(b.SID.Bits(), a.SID.Bits()) })
	return t
}

// Lookup implements SIDResolver.
func (t *Table) Lookup(a netip.Addr) (SIDInfo, bool) {
	if t == nil {
		return SIDInfo{}, false
	}
	for _, s := range t.sids {
		if s.SID.Contains(a) {
			return s, true
		}
	}
	return SIDInfo{}, false
}

// bitsOf returns the value of n bits of a starting at bit off (0 = MSB),
// n <= 64.
func bitsOf(a netip.Addr, off, n int) uint64 {
	if n <= 0 || off < 0 || off+n > 128 {
		return 0
	}
	b := a.As16()
	var v uint64
	for i := off; i < off+n; i++ {
		v = v<<1 | uint64(b[i/8]>>(7-i%8)&1)
	}
	return v
}

// Structure returns the FUNCT and ARGS values of a under s (each limited
// to 64 bits).
func (s SIDInfo) Structure(a netip.Addr) (funct, args uint64) {
	return bitsOf(a, s.LocatorBits, min(s.FunctionBits, 64)), bitsOf(a, s.LocatorBits+s.FunctionBits, min(s.ArgsBits, 64))
}
