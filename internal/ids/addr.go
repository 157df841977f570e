package ids

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// AddrSet is a rule's address field: "any", an address, a CIDR prefix, a
// variable ($HOME_NET), a negation (!x) or a list ([a,b,!c], nested).
//
// Lists follow Suricata's semantics, address family by family: a list
// matches an address of a family when one of its positive elements of that
// family matches, or when it has no positive element of that family but
// has a negated one; and no negated element matches. So "!10.1.0.0/16" is
// every IPv4 address outside 10.1.0.0/16 and no IPv6 address at all (with
// an IPv4-only HOME_NET, "!$HOME_NET" matches no IPv6 packet), while
// "[1.2.3.4, !2001:db8::1]" is 1.2.3.4 and every IPv6 address but
// 2001:db8::1. A positive nested list or variable is merged into the list
// that holds it (Suricata flattens them: "[a, [b, !c]]" is "[a, b, !c]");
// a negated one is evaluated on its own first and then excluded.
type AddrSet = set[prefix, netip.Addr]

// PortSet is a rule's port field: "any", a port, a range (a:b, a:, :b), a
// variable, a negation or a list, with AddrSet's list semantics (ports are
// all of one family: "[!22, !23]" is every port but 22 and 23).
type PortSet = set[portRange, uint16]

// member is an element of a set: a prefix of addresses, a range of ports.
// family is the element's address family as a bit (famV4, famV6; ports are
// all famV4), familyOf a value's.
type member[X any] interface {
	has(X) bool
	family() uint8
	familyOf(X) uint8
}

// Address families, as bits of set.fams.
const (
	famV4 uint8 = 1 << iota
	famV6
	famAll = famV4 | famV6
)

type prefix netip.Prefix

func (p prefix) has(a netip.Addr) bool { return netip.Prefix(p).Contains(a) }
func (p prefix) family() uint8 {
	if netip.Prefix(p).Addr().Is4() {
		return famV4
	}
	return famV6
}
func (prefix) familyOf(a netip.Addr) uint8 {
	if a.Is4() {
		return famV4
	}
	return famV6
}

type portRange struct{ lo, hi uint16 }

func (r portRange) has(p uint16) bool   { return p >= r.lo && p <= r.hi }
func (portRange) family() uint8         { return famV4 }
func (portRange) familyOf(uint16) uint8 { return famV4 }

// set is an address or port expression: any, or a list of elements and
// negated sub-expressions (lists, variables). fams has the bit of every
// family some element (at any depth, positive or negated) belongs to.
type set[T member[X], X any] struct {
	any   bool
	fams  uint8
	items []setItem[T, X]
}

type setItem[T member[X], X any] struct {
	neg bool
	v   T
	sub *set[T, X] // a negated list or variable, or "any"; nil for an element
}

// newSet returns a set of items, with its families.
func newSet[T member[X], X any](items []setItem[T, X]) *set[T, X] {
	s := &set[T, X]{items: items}
	for _, it := range items {
		if it.sub != nil {
			s.fams |= it.sub.fams
		} else {
			s.fams |= it.v.family()
		}
	}
	return s
}

// Any reports whether the set is "any".
func (s *set[T, X]) Any() bool { return s.any }

// Contains reports whether x is in the set. The zero set (a hand-built
// Rule's unset field) is "any", as it was before family semantics.
func (s *set[T, X]) Contains(x X) bool {
	if s.any || len(s.items) == 0 {
		return true
	}
	var zero T
	f := zero.familyOf(x)
	pos, hasPos, hasNeg := false, false, false
	for i := range s.items {
		it := &s.items[i]
		var m bool
		var fam uint8
		if it.sub != nil {
			m, fam = it.sub.Contains(x), it.sub.fams
		} else {
			m, fam = it.v.has(x), it.v.family()
		}
		if it.neg {
			if m {
				return false
			}
			hasNeg = hasNeg || fam&f != 0
			continue
		}
		hasPos = hasPos || fam&f != 0
		pos = pos || m
	}
	return pos || !hasPos && hasNeg
}

// singlePorts returns the ports of a set made only of positive ports or
// short ranges (for the header index); ok is false otherwise.
func singlePorts(s *PortSet) (ports []uint16, ok bool) {
	if s.any {
		return nil, false
	}
	for _, it := range s.items {
		if it.neg {
			return nil, false
		}
		if it.sub != nil {
			sp, ok := singlePorts(it.sub)
			if !ok {
				return nil, false
			}
			ports = append(ports, sp...)
			continue
		}
		if int(it.v.hi)-int(it.v.lo) > 16 {
			return nil, false
		}
		for p := int(it.v.lo); p <= int(it.v.hi); p++ {
			ports = append(ports, uint16(p))
		}
	}
	return ports, len(ports) > 0
}

// posError is an error at an offset of the text being parsed.
type posError struct {
	off int
	msg string
}

func (e *posError) Error() string { return e.msg }

func perrf(off int, format string, args ...any) *posError {
	return &posError{off: off, msg: fmt.Sprintf(format, args...)}
}

// maxVarDepth bounds variable expansion (a variable naming itself loops).
const maxVarDepth = 8

// listScanner walks an address or port expression.
type listScanner struct {
	s     string
	i     int
	base  int // offset of s in the rule text, for errors
	vars  map[string]string
	depth int
	what  string // "address" or "port"
}

func (l *listScanner) errf(format string, args ...any) *posError {
	return perrf(l.base+l.i, format, args...)
}

// elem returns the next element text (up to ',' or ']' at depth 0).
func (l *listScanner) elem() string {
	start, d := l.i, 0
	for l.i < len(l.s) {
		switch l.s[l.i] {
		case '[':
			d++
		case ']':
			if d == 0 {
				return strings.TrimSpace(l.s[start:l.i])
			}
			d--
		case ',':
			if d == 0 {
				return strings.TrimSpace(l.s[start:l.i])
			}
		}
		l.i++
	}
	return strings.TrimSpace(l.s[start:l.i])
}

// parseExpr parses one expression (negation, list, any, variable or
// leaf) into items; leaf parses a plain element.
func parseExpr[T member[X], X any](l *listScanner, leaf func(string) (T, error)) ([]setItem[T, X], error) {
	l.skipSpace()
	if l.i >= len(l.s) {
		return nil, l.errf("empty %s", l.what)
	}
	exprStart := l.i
	neg := false
	if l.s[l.i] == '!' {
		neg = true
		l.i++
		l.skipSpace()
	}
	if l.i < len(l.s) && l.s[l.i] == '[' {
		open := l.i
		l.i++
		var items []setItem[T, X]
		for {
			l.skipSpace()
			if l.i >= len(l.s) {
				return nil, perrf(l.base+open, "unterminated %s list", l.what)
			}
			if l.s[l.i] == ']' && len(items) == 0 {
				return nil, l.errf("empty %s list", l.what)
			}
			sub, err := parseExpr[T, X](l, leaf)
			if err != nil {
				return nil, err
			}
			items = append(items, sub...)
			l.skipSpace()
			if l.i >= len(l.s) {
				return nil, perrf(l.base+open, "unterminated %s list", l.what)
			}
			if l.s[l.i] == ',' {
				l.i++
				continue
			}
			if l.s[l.i] == ']' {
				l.i++
				break
			}
			return nil, l.errf("unexpected %q in %s list", l.s[l.i], l.what)
		}
		if !neg {
			return items, nil // merged into the enclosing list, as Suricata does
		}
		return []setItem[T, X]{{neg: true, sub: newSet[T, X](items)}}, nil
	}
	start := l.i
	e := l.elem()
	switch {
	case e == "any":
		if neg {
			return nil, perrf(l.base+exprStart, "!any matches nothing")
		}
		return []setItem[T, X]{{sub: &set[T, X]{any: true, fams: famAll}}}, nil
	case strings.HasPrefix(e, "$"):
		name := e[1:]
		val, ok := l.vars[name]
		if !ok {
			return nil, perrf(l.base+start, "undefined variable $%s", name)
		}
		if l.depth >= maxVarDepth {
			return nil, perrf(l.base+start, "variable $%s: expansion deeper than %d (a loop?)", name, maxVarDepth)
		}
		sl := &listScanner{s: val, vars: l.vars, depth: l.depth + 1, what: l.what}
		items, err := parseExpr[T, X](sl, leaf)
		if err == nil {
			sl.skipSpace()
			if sl.i < len(sl.s) {
				err = sl.errf("trailing %q", sl.s[sl.i:])
			}
		}
		if err != nil {
			return nil, perrf(l.base+start, "variable $%s = %q: %v", name, val, err)
		}
		if !neg {
			return items, nil
		}
		return []setItem[T, X]{{neg: true, sub: newSet[T, X](items)}}, nil
	}
	v, err := leaf(e)
	if err != nil {
		return nil, perrf(l.base+start, "%s %q: %v", l.what, e, err)
	}
	return []setItem[T, X]{{neg: neg, v: v}}, nil
}

func (l *listScanner) skipSpace() {
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t') {
		l.i++
	}
}

// parseSet parses a whole address or port field.
func parseSet[T member[X], X any](s string, base int, vars map[string]string, what string, leaf func(string) (T, error)) (set[T, X], error) {
	l := &listScanner{s: s, base: base, vars: vars, what: what}
	items, err := parseExpr[T, X](l, leaf)
	if err != nil {
		return set[T, X]{}, err
	}
	if l.skipSpace(); l.i < len(l.s) {
		return set[T, X]{}, l.errf("trailing %q after %s", l.s[l.i:], what)
	}
	// "any", possibly inside single-element lists or variables.
	for len(items) == 1 && items[0].sub != nil && !items[0].neg {
		if items[0].sub.any {
			return set[T, X]{any: true, fams: famAll}, nil
		}
		items = items[0].sub.items
	}
	return *newSet[T, X](items), nil
}

func parseAddrSet(s string, base int, vars map[string]string) (AddrSet, error) {
	return parseSet[prefix, netip.Addr](s, base, vars, "address", parsePrefixElem)
}

func parsePortSet(s string, base int, vars map[string]string) (PortSet, error) {
	return parseSet[portRange, uint16](s, base, vars, "port", parsePortRange)
}

func parsePrefixElem(e string) (prefix, error) {
	p, err := parsePrefix(e)
	return prefix(p), err
}

func parsePrefix(e string) (netip.Prefix, error) {
	if strings.Contains(e, "/") {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an address or CIDR prefix")
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(e)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("not an address or CIDR prefix")
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zones are not allowed")
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parsePortRange(e string) (portRange, error) {
	num := func(s string, def uint16) (uint16, error) {
		if s == "" {
			return def, nil
		}
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("not a port number (0-65535)")
		}
		return uint16(n), nil
	}
	lo, hi, isRange := strings.Cut(e, ":")
	if !isRange {
		if e == "" {
			return portRange{}, fmt.Errorf("empty port")
		}
		p, err := num(e, 0)
		return portRange{p, p}, err
	}
	if lo == "" && hi == "" {
		return portRange{}, fmt.Errorf("range needs a bound")
	}
	a, err := num(lo, 0)
	if err != nil {
		return portRange{}, err
	}
	b, err := num(hi, 65535)
	if err != nil {
		return portRange{}, err
	}
	if a > b {
		return portRange{}, fmt.Errorf("range %d:%d is empty", a, b)
	}
	return portRange{a, b}, nil
}
