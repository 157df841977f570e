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
type AddrSet struct {
	any   bool
	items []addrItem
}

type addrItem struct {
	neg    bool
	prefix netip.Prefix
	sub    *AddrSet
}

// Any reports whether the set is "any".
func (s *AddrSet) Any() bool { return s.any }

// Contains reports whether a is in the set.
func (s *AddrSet) Contains(a netip.Addr) bool {
	if s.any {
		return true
	}
	pos, hasPos := false, false
	for i := range s.items {
		it := &s.items[i]
		var m bool
		if it.sub != nil {
			m = it.sub.Contains(a)
		} else {
			m = it.prefix.Contains(a)
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

// PortSet is a rule's port field: "any", a port, a range (a:b, a:, :b), a
// variable, a negation or a list, with AddrSet's list semantics.
type PortSet struct {
	any   bool
	items []portItem
}

type portItem struct {
	neg    bool
	lo, hi uint16
	sub    *PortSet
}

// Any reports whether the set is "any".
func (s *PortSet) Any() bool { return s.any }

// Contains reports whether port p is in the set.
func (s *PortSet) Contains(p uint16) bool {
	if s.any {
		return true
	}
	pos, hasPos := false, false
	for i := range s.items {
		it := &s.items[i]
		var m bool
		if it.sub != nil {
			m = it.sub.Contains(p)
		} else {
			m = p >= it.lo && p <= it.hi
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

// single returns the ports of a set made only of positive single ports
// or small ranges (for the header index); ok is false otherwise.
func (s *PortSet) single() (ports []uint16, ok bool) {
	if s.any {
		return nil, false
	}
	for _, it := range s.items {
		if it.neg {
			return nil, false
		}
		if it.sub != nil {
			sp, ok := it.sub.single()
			if !ok {
				return nil, false
			}
			ports = append(ports, sp...)
			continue
		}
		if int(it.hi)-int(it.lo) > 16 {
			return nil, false
		}
		for p := int(it.lo); p <= int(it.hi); p++ {
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
func parseExpr[T any](l *listScanner, leaf func(string) (T, error)) ([]item[T], error) {
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
		var items []item[T]
		for {
			l.skipSpace()
			if l.i >= len(l.s) {
				return nil, perrf(l.base+open, "unterminated %s list", l.what)
			}
			if l.s[l.i] == ']' && len(items) == 0 {
				return nil, l.errf("empty %s list", l.what)
			}
			sub, err := parseExpr(l, leaf)
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
		return []item[T]{{neg: neg, sub: items, list: true}}, nil
	}
	start := l.i
	e := l.elem()
	switch {
	case e == "any":
		if neg {
			return nil, perrf(l.base+exprStart, "!any matches nothing")
		}
		return []item[T]{{anyLeaf: true}}, nil
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
		items, err := parseExpr(sl, leaf)
		if err == nil {
			sl.skipSpace()
			if sl.i < len(sl.s) {
				err = sl.errf("trailing %q", sl.s[sl.i:])
			}
		}
		if err != nil {
			return nil, perrf(l.base+start, "variable $%s = %q: %v", name, val, err)
		}
		return []item[T]{{neg: neg, sub: items, list: true}}, nil
	}
	v, err := leaf(e)
	if err != nil {
		return nil, perrf(l.base+start, "%s %q: %v", l.what, e, err)
	}
	return []item[T]{{neg: neg, v: v}}, nil
}

func (l *listScanner) skipSpace() {
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t') {
		l.i++
	}
}

// item is the generic form of addrItem/portItem during parsing.
type item[T any] struct {
	neg     bool
	v       T
	sub     []item[T]
	list    bool // sub holds the items (a list or a variable)
	anyLeaf bool // "any"
}

// isAny reports whether items say "any" and nothing else.
func isAny[T any](items []item[T]) bool {
	for len(items) == 1 && items[0].list && !items[0].neg {
		items = items[0].sub
	}
	return len(items) == 1 && items[0].anyLeaf
}

func parseAddrSet(s string, base int, vars map[string]string) (AddrSet, error) {
	l := &listScanner{s: s, base: base, vars: vars, what: "address"}
	items, err := parseExpr(l, parsePrefix)
	if err != nil {
		return AddrSet{}, err
	}
	if l.skipSpace(); l.i < len(l.s) {
		return AddrSet{}, l.errf("trailing %q after address", l.s[l.i:])
	}
	if isAny(items) {
		return AddrSet{any: true}, nil
	}
	return toAddrSet(items), nil
}

func toAddrSet(items []item[netip.Prefix]) AddrSet {
	var s AddrSet
	for _, it := range items {
		switch {
		case it.anyLeaf:
			s.items = append(s.items, addrItem{sub: &AddrSet{any: true}})
		case it.list:
			sub := toAddrSet(it.sub)
			s.items = append(s.items, addrItem{neg: it.neg, sub: &sub})
		default:
			s.items = append(s.items, addrItem{neg: it.neg, prefix: it.v})
		}
	}
	return s
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

type portRange struct{ lo, hi uint16 }

func parsePortSet(s string, base int, vars map[string]string) (PortSet, error) {
	l := &listScanner{s: s, base: base, vars: vars, what: "port"}
	items, err := parseExpr(l, parsePortRange)
	if err != nil {
		return PortSet{}, err
	}
	if l.skipSpace(); l.i < len(l.s) {
		return PortSet{}, l.errf("trailing %q after port", l.s[l.i:])
	}
	if isAny(items) {
		return PortSet{any: true}, nil
	}
	return toPortSet(items), nil
}

func toPortSet(items []item[portRange]) PortSet {
	var s PortSet
	for _, it := range items {
		switch {
		case it.anyLeaf:
			s.items = append(s.items, portItem{sub: &PortSet{any: true}})
		case it.list:
			sub := toPortSet(it.sub)
			s.items = append(s.items, portItem{neg: it.neg, sub: &sub})
		default:
			s.items = append(s.items, portItem{neg: it.neg, lo: it.v.lo, hi: it.v.hi})
		}
	}
	return s
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
