package sid

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
)

// Format splits a SID into LOC (the node's locator), FUNCT (a behaviour
// instance on the node) and ARGS (per-packet arguments), most significant
// bits first. Bits after LOC+FUNCT+ARGS are zero.
type Format struct {
	LocatorBits  int
	FunctionBits int
	ArgsBits     int
}

// Default is the thesis' layout: fc00:2::f1:0 is LOC fc00:2::/64, FUNCT 0xf1,
// ARGS 0.
var Default = Format{LocatorBits: 64, FunctionBits: 48, ArgsBits: 16}

// Errors returned by the arithmetic; match them with errors.Is.
var (
	ErrFormat   = errors.New("invalid SID format")
	ErrOverflow = errors.New("value does not fit its field")
	ErrLocator  = errors.New("locator does not match the format")
)

// Validate checks the format: every field ≥ 0, LOC ≥ 16 bits, FUNCT and ARGS
// ≤ 64 bits (they are uint64 values) and the sum ≤ 128.
func (f Format) Validate() error {
	switch {
	case f.LocatorBits < 16:
		return fmt.Errorf("%w: locator_bits %d < 16", ErrFormat, f.LocatorBits)
	case f.FunctionBits < 0 || f.FunctionBits > 64:
		return fmt.Errorf("%w: function_bits %d not in 0..64", ErrFormat, f.FunctionBits)
	case f.ArgsBits < 0 || f.ArgsBits > 64:
		return fmt.Errorf("%w: args_bits %d not in 0..64", ErrFormat, f.ArgsBits)
	case f.LocatorBits+f.FunctionBits+f.ArgsBits > 128:
		return fmt.Errorf("%w: locator_bits+function_bits+args_bits = %d > 128", ErrFormat,
			f.LocatorBits+f.FunctionBits+f.ArgsBits)
	}
	return nil
}

// String prints the format as L/F/A.
func (f Format) String() string {
	return fmt.Sprintf("%d/%d/%d", f.LocatorBits, f.FunctionBits, f.ArgsBits)
}

func toInt(a netip.Addr) *big.Int {
	b := a.As16()
	return new(big.Int).SetBytes(b[:])
}

func fromInt(v *big.Int) netip.Addr {
	var b [16]byte
	v.FillBytes(b[:])
	return netip.AddrFrom16(b)
}

// field extracts bits [off, off+n) counted from the most significant bit.
func field(v *big.Int, off, n int) uint64 {
	if n == 0 {
		return 0
	}
	x := new(big.Int).Rsh(v, uint(128-off-n))
	mask := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(n)), big.NewInt(1))
	return x.And(x, mask).Uint64()
}

// setField returns v with bits [off, off+n) replaced by val.
func setField(v *big.Int, off, n int, val uint64) *big.Int {
	if n == 0 {
		return v
	}
	shift := uint(128 - off - n)
	mask := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(n)), big.NewInt(1))
	mask.Lsh(mask, shift)
	out := new(big.Int).AndNot(v, mask)
	return out.Or(out, new(big.Int).Lsh(new(big.Int).SetUint64(val), shift))
}

func fits(val uint64, bits int) bool { return bits >= 64 || val < uint64(1)<<bits }

// checkLocator validates loc against f.
func checkLocator(loc netip.Prefix, f Format) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if !loc.IsValid() || !loc.Addr().Is6() || loc.Addr().Is4In6() {
		return fmt.Errorf("%w: %s is not an IPv6 prefix", ErrLocator, loc)
	}
	if loc.Bits() != f.LocatorBits {
		return fmt.Errorf("%w: %s is /%d, the format wants /%d", ErrLocator, loc, loc.Bits(), f.LocatorBits)
	}
	return nil
}

// Compose builds the SID LOC:FUNCT:ARGS. loc must be an IPv6 prefix of
// exactly f.LocatorBits; its host bits are ignored.
func Compose(loc netip.Prefix, funct, args uint64, f Format) (netip.Addr, error) {
	if err := checkLocator(loc, f); err != nil {
		return netip.Addr{}, err
	}
	if !fits(funct, f.FunctionBits) {
		return netip.Addr{}, fmt.Errorf("%w: FUNCT %#x > %d bits", ErrOverflow, funct, f.FunctionBits)
	}
	if !fits(args, f.ArgsBits) {
		return netip.Addr{}, fmt.Errorf("%w: ARGS %#x > %d bits", ErrOverflow, args, f.ArgsBits)
	}
	v := toInt(loc.Masked().Addr())
	v = setField(v, f.LocatorBits, f.FunctionBits, funct)
	v = setField(v, f.LocatorBits+f.FunctionBits, f.ArgsBits, args)
	return fromInt(v), nil
}

// Split returns the locator, FUNCT and ARGS of a SID. Bits after ARGS are
// ignored. An invalid format or a non-IPv6 address yields zero values.
func Split(a netip.Addr, f Format) (loc netip.Prefix, funct, args uint64) {
	if f.Validate() != nil || !a.Is6() {
		return netip.Prefix{}, 0, 0
	}
	v := toInt(a)
	loc = netip.PrefixFrom(a, f.LocatorBits).Masked()
	return loc, field(v, f.LocatorBits, f.FunctionBits), field(v, f.LocatorBits+f.FunctionBits, f.ArgsBits)
}

// WithArgs returns sid with its ARGS field replaced by args.
func WithArgs(sid netip.Addr, args uint64, f Format) (netip.Addr, error) {
	if err := f.Validate(); err != nil {
		return netip.Addr{}, err
	}
	if !sid.Is6() {
		return netip.Addr{}, fmt.Errorf("%w: %s is not an IPv6 address", ErrLocator, sid)
	}
	if !fits(args, f.ArgsBits) {
		return netip.Addr{}, fmt.Errorf("%w: ARGS %#x > %d bits", ErrOverflow, args, f.ArgsBits)
	}
	return fromInt(setField(toInt(sid), f.LocatorBits+f.FunctionBits, f.ArgsBits, args)), nil
}

// Prefix is the route prefix of a SID's local SID entry. With ARGS bits the
// entry must match every ARGS value, so it is /(LOC+FUNCT) and the ARGS (and
// any trailing) bits are cleared; without ARGS it is the /128 of the SID.
func Prefix(sid netip.Addr, f Format) netip.Prefix {
	if f.ArgsBits == 0 {
		return netip.PrefixFrom(sid, 128)
	}
	return netip.PrefixFrom(sid, f.LocatorBits+f.FunctionBits).Masked()
}

// Contains reports whether a belongs to the locator loc of format f.
func Contains(loc netip.Prefix, a netip.Addr, f Format) bool {
	return loc.Bits() == f.LocatorBits && loc.Masked().Contains(a)
}

// NodeAddr is the node's own address inside its locator, LOC::1: FUNCT 0 with
// ARGS 1 in the default format. segchain uses it as the node's SRv6 tunnel
// source. Allocate never hands out the FUNCT it falls in.
func NodeAddr(loc netip.Prefix, f Format) (netip.Addr, error) {
	if err := checkLocator(loc, f); err != nil {
		return netip.Addr{}, err
	}
	if f.LocatorBits == 128 {
		return netip.Addr{}, fmt.Errorf("%w: a /128 locator has no room for the node address", ErrFormat)
	}
	b := loc.Masked().Addr().As16()
	b[15] |= 1
	return netip.AddrFrom16(b), nil
}
