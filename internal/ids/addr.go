package ids

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// AddrSet is a rule's address field: "any", an address, a CIDR prefix, a
// variable ($HOME_NET), a negation (!x) or a list ([a,b,!c], nested). A
// list matches when some positive element matches (or it has none) and no
// negated element does.
type AddrSet = set[prefix, netip.Addr]

// PortSet is a rule's port field: "any", a port, a range (a:b, a:, :b), a
// variable, a negation or a list, with AddrSet's list semantics.
type PortSet = set[portRange, uint16]

// member is an element of a set: a prefix of addresses, a range of ports.
type member[X any] interface{ has(X) bool }

type prefix netip.Prefix

func (p prefix) has(a netip.Addr) bool { return netip.Prefix(p).Contains(a) }

type portRange struct{ lo, hi uint16 }

func (r portRange) has(p uint16) bool { return p >= r.lo && p <= r.hi }

// set is an address or port expression: any, or a list of elements and
// sub-expressions (lists, variables), each possibly negated.
type set[T member[X], X any] struct {
	any   bool
	items []setItem[T, X]
}

type setItem[T member[X], X any] struct {
	neg bool
	v   T
	sub *set[T, X] // a list or a variable; nil for an element
}

// Any reports whether the set is "any".
func (s *set[T, X]) Any() bool { return s.any }

// Contains reports whether x is in the set.
func (s *set[T, X]) Contains(x X) bool {
	if s.any {
		return true
	}
	pos, hasPos := false, false
	for i := range s.items {
		it := &s.items[i]
		var m bool
		if it.sub != nil {
			m = it.sub.Contains(x)
		} else {
			m = it.v.has(x)
		}
		if it.neg {
			if m {
				return false
			}
			continue
		}
		hasPos = true
		pos = pos || m
	}
	return pos || !hasPos
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
		return []setItem[T, X]{{neg: neg, sub: &set[T, X]{items: items}}}, nil
	}
	start := l.i
	e := l.elem()
	switch {
	case e == "any":
		if neg {
			return nil, perrf(l.base+exprStart, "!any matches nothing")
		}
		return []setItem[T, X]{{sub: &set[T, X]{any: true}}}, nil
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
		return []setItem[T, X]{{neg: neg, sub: &set[T, X]{items: items}}}, nil
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
			return set[T, X]{any: true}, nil
		}
		items = items[0].sub.items
	}
	return set[T, X]{items: items}, nil
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
