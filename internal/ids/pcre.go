package ids

import (
	"bytes"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
)

// Suricata's pcre matches bytes (PCRE2 without UTF): "." and every class
// match one byte, "\s" includes the vertical tab, "$" also matches before
// a final newline. Go's regexps match UTF-8 text, so the engine runs a
// pcre over the payload mapped to Latin-1 (each byte b is the rune U+00b,
// see pcreFind) and translatePCRE rewrites the expression to the same
// alphabet: a byte above 0x7f in the pattern is the rune \x{b}, \s and \S
// name PCRE's set. Matches are mapped back to byte offsets.

// pcreSpace is PCRE2's \s: space, \t, \n, \v, \f, \r (Go's \s lacks \v).
const pcreSpace = `\t\n\v\f\r `

// pcreNotSpace is \S inside a class, over the Latin-1 alphabet.
const pcreNotSpace = `\x00-\x08\x0e-\x1f\x21-\x{ff}`

// translatePCRE rewrites a PCRE expression into Go syntax with PCRE's
// byte semantics. dollarEndOnly (the E or m flag, or an inline m) leaves
// "$" alone; otherwise "$" becomes "\n?\z" (PCRE's end, or before a final
// newline — which the match then includes). caseless (the i flag) makes
// each class fold ASCII letters only, as PCRE does (see foldClass).
func translatePCRE(re string, dollarEndOnly, caseless bool) (string, error) {
	var b bytes.Buffer
	classOut, classNeg := 0, false // where the open class starts in b; [^
	lit := func(c byte) {          // a byte as a literal rune, never case-folded
		if c < 0x80 {
			if strings.IndexByte(`\.+*?()|[]{}^$-`, c) >= 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
			return
		}
		fmt.Fprintf(&b, `(?-i:\x{%x})`, c)
	}
	inClass, classStart := false, false
	for i := 0; i < len(re); i++ {
		c := re[i]
		if c == '\\' && i+1 < len(re) {
			n := re[i+1]
			i++
			switch {
			case n == 's':
				if inClass {
					b.WriteString(pcreSpace)
				} else {
					b.WriteString("[" + pcreSpace + "]")
				}
			case n == 'S':
				if inClass {
					b.WriteString(pcreNotSpace)
				} else {
					b.WriteString("[^" + pcreSpace + "]")
				}
			case n == 'x':
				v, w, err := hexEscape(re[i+1:])
				if err != nil {
					return "", err
				}
				i += w
				if v > 0xff {
					return "", fmt.Errorf(`\x{%x}: a pcre matches bytes, the largest is \xff`, v)
				}
				if inClass {
					fmt.Fprintf(&b, `\x{%x}`, v)
				} else if v >= 0x80 {
					fmt.Fprintf(&b, `(?-i:\x{%x})`, v)
				} else {
					fmt.Fprintf(&b, `\x{%x}`, v)
				}
			case n == 'Q': // quoted up to \E: each byte a literal
				end := strings.Index(re[i+1:], `\E`)
				q := re[i+1:]
				if end >= 0 {
					q = re[i+1 : i+1+end]
					i += end + 2
				} else {
					i = len(re)
				}
				for j := 0; j < len(q); j++ {
					if inClass && q[j] >= 0x80 {
						fmt.Fprintf(&b, `\x{%x}`, q[j])
					} else {
						lit(q[j])
					}
				}
			case n >= 0x80: // an escaped raw byte is that byte
				if inClass {
					fmt.Fprintf(&b, `\x{%x}`, n)
				} else {
					lit(n)
				}
			default:
				b.WriteByte('\\')
				b.WriteByte(n)
			}
			classStart = false
			continue
		}
		if c >= 0x80 {
			if inClass {
				fmt.Fprintf(&b, `\x{%x}`, c)
			} else {
				lit(c)
			}
			classStart = false
			continue
		}
		if inClass {
			switch {
			case c == ']' && !classStart:
				inClass = false
				if caseless {
					bodyStart := classOut + 1
					if classNeg {
						bodyStart++
					}
					if folded, ok := foldClass(string(b.Bytes()[bodyStart:]), classNeg); ok {
						b.Truncate(classOut)
						b.WriteString(folded)
						continue
					}
				}
			case c == '[' && i+1 < len(re) && re[i+1] == ':': // [:alpha:]
				end := strings.Index(re[i:], ":]")
				if end > 0 {
					b.WriteString(re[i : i+end+2])
					i += end + 1
					classStart = false
					continue
				}
			}
			classStart = false
			b.WriteByte(c)
			continue
		}
		switch c {
		case '[':
			inClass, classStart = true, true
			classOut, classNeg = b.Len(), false
			b.WriteByte(c)
			if i+1 < len(re) && re[i+1] == '^' {
				b.WriteByte('^')
				classNeg = true
				i++
			}
			continue
		case '$':
			if !dollarEndOnly {
				b.WriteString(`(?:\n?\z)`)
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// foldClass rewrites a class for a caseless pcre: PCRE (with its default
// "C" tables, as Suricata uses it) folds ASCII letters only, where Go's
// (?i) would also pair Latin-1 letters (0xe9 with 0xc9). body is the
// class's translated text without its brackets and ^. The result is the
// explicit set over the byte alphabet, case-sensitive: a byte matches a
// class when it or its ASCII case pair is in it, a negated class when
// neither is. ok is false when Go cannot parse the class (the compile that
// follows reports it).
func foldClass(body string, neg bool) (string, bool) {
	re, err := syntax.Parse("["+body+"]", syntax.Perl)
	if err != nil {
		return "", false
	}
	var in [256]bool
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r < 256 {
				in[r] = true
			}
		}
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1] && r < 256; r++ {
				in[r] = true
			}
		}
	case syntax.OpAnyChar:
		for r := range in {
			in[r] = true
		}
	default:
		return "", false
	}
	other := func(r int) int {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 32
		case r >= 'A' && r <= 'Z':
			return r + 32
		}
		return r
	}
	var b strings.Builder
	b.WriteString("(?-i:[")
	n := 0
	for r := 0; r < 256; {
		if m := in[r] || in[other(r)]; m == neg {
			r++
			continue
		}
		lo := r
		for r < 256 && (in[r] || in[other(r)]) != neg {
			r++
		}
		fmt.Fprintf(&b, `\x{%x}-\x{%x}`, lo, r-1)
		n++
	}
	if n == 0 {
		return `[^\x00-\x{10ffff}]`, true // matches nothing
	}
	b.WriteString("])")
	return b.String(), true
}

// hexEscape parses what follows \x: {H...} or up to two hex digits; it
// returns the value and the number of bytes read.
func hexEscape(s string) (int, int, error) {
	if strings.HasPrefix(s, "{") {
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return 0, 0, fmt.Errorf(`unterminated \x{`)
		}
		v, err := strconv.ParseUint(s[1:end], 16, 32)
		if err != nil {
			return 0, 0, fmt.Errorf(`\x{%s}: not hexadecimal`, s[1:end])
		}
		return int(v), end + 1, nil
	}
	n := 0
	for n < 2 && n < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[n]) >= 0 {
		n++
	}
	if n == 0 {
		return 0, 0, nil // \x alone is NUL in PCRE
	}
	v, _ := strconv.ParseUint(s[:n], 16, 8)
	return int(v), n, nil
}

// inlineMultiline reports whether re sets the m flag inline ("(?m)",
// "(?im:"...).
var inlineMultiline = regexp.MustCompile(`\(\?[a-zA-Z]*m[a-zA-Z]*(-[a-zA-Z]*)?[):]`)

// startsAnchored reports whether every match of expr (Go syntax) must
// start at the beginning of the text ("^" without m, "\A"): a pcre that is
// cannot match again further on, so there is nothing to retry.
func startsAnchored(expr string) bool {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return false
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return false
	}
	return prog.StartCond()&syntax.EmptyBeginText != 0
}

// pcreFind returns the leftmost match of rx in b as byte offsets of b.
// A payload with bytes above 0x7f is matched in its Latin-1 form (built in
// *lat, reused between calls), so that every byte is one character.
func pcreFind(rx *regexp.Regexp, b []byte, lat *[]byte) []int {
	return pcreFindGroup(rx, b, lat, false)
}

// pcreFindGroup is pcreFind returning, when group, the offsets of
// submatch 1 instead of the whole match.
func pcreFindGroup(rx *regexp.Regexp, b []byte, lat *[]byte, group bool) []int {
	find := func(b []byte) []int {
		if !group {
			return rx.FindIndex(b)
		}
		if m := rx.FindSubmatchIndex(b); m != nil {
			return m[2:4]
		}
		return nil
	}
	high := false
	for _, c := range b {
		if c >= 0x80 {
			high = true
			break
		}
	}
	if !high {
		return find(b)
	}
	var l []byte
	if lat != nil {
		l = (*lat)[:0]
	}
	for _, c := range b {
		if c < 0x80 {
			l = append(l, c)
		} else {
			l = append(l, 0xc0|c>>6, 0x80|c&0x3f)
		}
	}
	if lat != nil {
		*lat = l
	}
	loc := find(l)
	if loc == nil {
		return nil
	}
	// Each byte above 0x7f became two bytes, the second a continuation
	// byte (10xxxxxx): subtract those before an offset.
	back := func(off int) int {
		n := off
		for _, c := range l[:off] {
			if c&0xc0 == 0x80 {
				n--
			}
		}
		return n
	}
	return []int{back(loc[0]), back(loc[1])}
}
