package ids

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Error is one problem of a rule file, located by line and column (both
// 1-based; Col is 0 when unknown).
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *Error) Error() string {
	loc := e.File
	if loc == "" {
		loc = "rules"
	}
	if e.Col > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", loc, e.Line, e.Col, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", loc, e.Line, e.Msg)
}

// ErrorList is every problem found in a rule file, in file order.
type ErrorList []*Error

func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// err returns l as an error, nil when it is empty.
func (l ErrorList) err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// maxLine bounds one physical line of a rule file.
const maxLine = 1 << 20

// ParseFile parses the rule file at path; see Parse.
func ParseFile(path string, vars map[string]string) ([]*Rule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, path, vars)
}

// Parse reads rules, one per line (a line ending in '\' continues on the
// next one; blank lines and lines starting with '#' are skipped). vars
// defines the $NAME variables of address and port fields (without '$').
// It returns the rules that parsed and, as an ErrorList, every problem of
// the others: an unsupported keyword or bad syntax is an error, never
// skipped. file names the source in errors.
func Parse(r io.Reader, file string, vars map[string]string) ([]*Rule, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	var (
		rules []*Rule
		errs  ErrorList
		cur   logical
		line  int
		seen  = map[[2]uint32]*Rule{}
	)
	flush := func() {
		if cur.text.Len() == 0 {
			return
		}
		rule, rerrs := parseLogical(&cur, file, vars)
		errs = append(errs, rerrs...)
		if rule != nil {
			key := [2]uint32{rule.GID, rule.SID}
			if first, dup := seen[key]; dup {
				errs = append(errs, &Error{File: file, Line: rule.Line, Msg: fmt.Sprintf("duplicate sid %d (gid %d) first used on line %d", rule.SID, rule.GID, first.Line)})
			} else {
				seen[key] = rule
				rules = append(rules, rule)
			}
		}
		cur = logical{}
	}
	for sc.Scan() {
		line++
		raw := sc.Text()
		trimmed := strings.TrimLeft(raw, " \t")
		col := len(raw) - len(trimmed) + 1
		if cur.text.Len() == 0 {
			if t := strings.TrimSpace(trimmed); t == "" || strings.HasPrefix(t, "#") {
				continue
			}
		}
		body := strings.TrimRight(trimmed, " \t\r")
		cont := strings.HasSuffix(body, "\\")
		if cont {
			body = body[:len(body)-1]
		}
		cur.add(body, line, col)
		if !cont {
			flush()
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, &Error{File: file, Line: line + 1, Msg: fmt.Sprintf("read: %v", err)})
	}
	if cur.text.Len() > 0 {
		errs = append(errs, &Error{File: file, Line: cur.segs[len(cur.segs)-1].line, Msg: "file ends after a '\\' continuation"})
		flush()
	}
	return rules, errs.err()
}

// ParseRule parses one rule (continuations joined already).
func ParseRule(text string, vars map[string]string) (*Rule, error) {
	var l logical
	l.add(text, 1, 1)
	r, errs := parseLogical(&l, "", vars)
	if len(errs) > 0 {
		return nil, errs
	}
	return r, nil
}

// logical is one rule joined from its physical lines, with the map from
// text offsets back to lines and columns.
type logical struct {
	text strings.Builder
	segs []segment
}

type segment struct{ off, line, col int }

func (l *logical) add(s string, line, col int) {
	l.segs = append(l.segs, segment{l.text.Len(), line, col})
	l.text.WriteString(s)
}

func (l *logical) pos(off int) (line, col int) {
	s := l.segs[0]
	for _, g := range l.segs[1:] {
		if g.off > off {
			break
		}
		s = g
	}
	return s.line, s.col + off - s.off
}

// ruleParser collects the errors of one rule.
type ruleParser struct {
	l    *logical
	text string
	file string
	vars map[string]string
	errs ErrorList
	r    *Rule
}

func (p *ruleParser) errAt(off int, format string, args ...any) {
	line, col := p.l.pos(off)
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
}

func (p *ruleParser) posErr(err error) {
	var pe *posError
	if errors.As(err, &pe) {
		p.errAt(pe.off, "%s", pe.msg)
		return
	}
	p.errAt(0, "%v", err)
}

func parseLogical(l *logical, file string, vars map[string]string) (*Rule, ErrorList) {
	text := l.text.String()
	p := &ruleParser{l: l, text: text, file: file, vars: vars}
	line, _ := l.pos(0)
	p.r = &Rule{Text: text, File: file, Line: line, GID: 1, Priority: 3}
	p.header()
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return p.r, nil
}

type token struct {
	s   string
	off int
}

// header parses "action proto src sport dir dst dport (options)".
func (p *ruleParser) header() {
	t := p.text
	var toks []token
	i := 0
	for i < len(t) && t[i] != '(' {
		if t[i] == ' ' || t[i] == '\t' {
			i++
			continue
		}
		start, depth := i, 0
		for i < len(t) {
			c := t[i]
			if c == '[' {
				depth++
			} else if c == ']' {
				depth--
			} else if c == '(' || (depth <= 0 && (c == ' ' || c == '\t')) {
				break
			}
			i++
		}
		if depth > 0 {
			p.errAt(start, "unterminated '[' list")
			return
		}
		toks = append(toks, token{t[start:i], start})
	}
	if i >= len(t) {
		p.errAt(len(t), "missing '(' before the rule options")
		return
	}
	optStart := i
	if len(toks) != 7 {
		p.errAt(0, "rule header has %d fields, want 7: action protocol src_addr src_port direction dst_addr dst_port", len(toks))
		return
	}
	r := p.r
	switch toks[0].s {
	case "alert":
		r.Action = ActionAlert
	case "drop":
		r.Action = ActionDrop
	case "pass":
		r.Action = ActionPass
	default:
		p.errAt(toks[0].off, "unsupported action %q (supported: alert, drop, pass)", toks[0].s)
	}
	if pr, ok := protoNames[strings.ToLower(toks[1].s)]; ok {
		r.Proto = pr
	} else {
		p.errAt(toks[1].off, "unsupported protocol %q (supported: ip, ipv4, ipv6, tcp, udp, icmp, icmpv4, icmpv6)", toks[1].s)
	}
	var err error
	if r.Src, err = parseAddrSet(toks[2].s, toks[2].off, p.vars); err != nil {
		p.posErr(err)
	}
	if r.SrcPort, err = parsePortSet(toks[3].s, toks[3].off, p.vars); err != nil {
		p.posErr(err)
	}
	switch toks[4].s {
	case "->":
	case "<>":
		r.Bidir = true
	default:
		p.errAt(toks[4].off, "unsupported direction %q (supported: ->, <>)", toks[4].s)
	}
	if r.Dst, err = parseAddrSet(toks[5].s, toks[5].off, p.vars); err != nil {
		p.posErr(err)
	}
	if r.DstPort, err = parsePortSet(toks[6].s, toks[6].off, p.vars); err != nil {
		p.posErr(err)
	}
	if !r.Proto.hasPorts() && (!r.SrcPort.Any() || !r.DstPort.Any()) && len(p.errs) == 0 {
		p.errAt(toks[3].off, "protocol %s has no ports: both port fields must be any", toks[1].s)
	}
	p.options(optStart)
}

// options parses "(name[:value]; ...)" starting at the '('.
func (p *ruleParser) options(open int) {
	t := p.text
	end := strings.LastIndexByte(t, ')')
	if end < open {
		p.errAt(open, "missing ')' after the rule options")
		return
	}
	if rest := strings.TrimSpace(t[end+1:]); rest != "" {
		p.errAt(end+1, "text after the closing ')': %q", rest)
	}
	hasSID := false
	i := open + 1
	for i < end {
		for i < end && (t[i] == ' ' || t[i] == '\t') {
			i++
		}
		if i >= end {
			break
		}
		nameStart := i
		for i < end && t[i] != ':' && t[i] != ';' {
			i++
		}
		name := strings.TrimSpace(t[nameStart:i])
		var val string
		valStart := i
		hasVal := false
		if i < end && t[i] == ':' {
			hasVal = true
			i++
			valStart = i
			inQ := false
			for i < end {
				c := t[i]
				if c == '\\' {
					i += 2
					continue
				}
				if c == '"' {
					inQ = !inQ
				} else if c == ';' && !inQ {
					break
				}
				i++
			}
			if i > end {
				i = end
			}
			val = t[valStart:i]
			if inQ {
				p.errAt(valStart, "%s: unterminated quoted string", name)
				continue
			}
			// Keep valStart pointing at the first non-blank of the value.
			lead := len(val) - len(strings.TrimLeft(val, " \t"))
			valStart += lead
			val = strings.TrimSpace(val)
		}
		if i < end {
			i++ // the ';'
		}
		if name == "" {
			p.errAt(nameStart, "empty option")
			continue
		}
		if name == "sid" {
			hasSID = true
		}
		p.option(name, val, hasVal, nameStart, valStart)
	}
	if !hasSID {
		p.errAt(open, "rule has no sid")
	}
	p.finishContents(open)
}

// noValue lists the options written without a value.
var noValue = map[string]bool{"nocase": true, "fast_pattern": true, "startswith": true, "endswith": true, "srv6.present": true}

func (p *ruleParser) option(name, val string, hasVal bool, nameOff, valOff int) {
	r := p.r
	if noValue[name] {
		if hasVal {
			p.errAt(valOff, "%s takes no value", name)
			return
		}
	} else if !hasVal {
		if _, known := optionNames[name]; known {
			p.errAt(nameOff, "%s needs a value", name)
		} else {
			p.errAt(nameOff, "unsupported keyword %q", name)
		}
		return
	}
	last := func() *Content {
		if len(r.Contents) == 0 {
			p.errAt(nameOff, "%s needs a preceding content", name)
			return nil
		}
		c := &r.Contents[len(r.Contents)-1]
		if c.Regex != nil {
			p.errAt(nameOff, "%s modifies a content, not a pcre (use the pcre's flags)", name)
			return nil
		}
		return c
	}
	num := func(min, max int) (int, bool) {
		n, err := strconv.Atoi(val)
		if err != nil || n < min || n > max {
			p.errAt(valOff, "%s: %q is not an integer in [%d, %d]", name, val, min, max)
			return 0, false
		}
		return n, true
	}
	switch name {
	case "msg":
		s, err := unquote(val)
		if err != nil {
			p.errAt(valOff, "msg: %v", err)
			return
		}
		r.Msg = s
	case "sid", "rev", "gid":
		n, err := strconv.ParseUint(val, 10, 32)
		if err != nil || (name != "rev" && n == 0) {
			p.errAt(valOff, "%s: %q is not a positive 32-bit integer", name, val)
			return
		}
		switch name {
		case "sid":
			r.SID = uint32(n)
		case "rev":
			r.Rev = uint32(n)
		case "gid":
			r.GID = uint32(n)
		}
	case "priority":
		if n, ok := num(1, 255); ok {
			r.Priority = n
		}
	case "classtype":
		if val == "" || strings.ContainsAny(val, " \t\"") {
			p.errAt(valOff, "classtype: %q is not a class name", val)
			return
		}
		r.Classtype = val
	case "reference", "metadata":
		// Informational; kept in Text only.
	case "content":
		c, err := parseContent(val)
		if err != nil {
			p.errAt(valOff, "content: %v", err)
			return
		}
		r.Contents = append(r.Contents, c)
	case "pcre":
		c, err := parsePCRE(val)
		if err != nil {
			p.errAt(valOff, "pcre: %v", err)
			return
		}
		if c.Relative && len(r.Contents) == 0 {
			p.errAt(valOff, "pcre: the R flag needs a content or pcre before")
			return
		}
		r.Contents = append(r.Contents, c)
	case "nocase":
		if c := last(); c != nil {
			c.NoCase = true
		}
	case "fast_pattern":
		if c := last(); c != nil {
			if c.Negated {
				p.errAt(nameOff, "fast_pattern on a negated content")
				return
			}
			c.FastPattern = true
		}
	case "startswith":
		c := last()
		if c == nil {
			return
		}
		if c.Relative || c.Offset != 0 || c.HasDepth {
			p.errAt(nameOff, "startswith cannot be combined with offset/depth/distance/within on one content")
			return
		}
		c.Depth, c.HasDepth = len(c.Pattern), true
	case "endswith":
		if c := last(); c != nil {
			c.EndsWith = true
		}
	case "dsize", "itype", "icode":
		uc, err := parseUintCond(val)
		if err != nil {
			p.errAt(valOff, "%s: %v", name, err)
			return
		}
		switch name {
		case "dsize":
			r.Dsize = uc
		case "itype":
			r.IType = uc
		case "icode":
			r.ICode = uc
		}
	case "offset", "depth":
		c := last()
		if c == nil {
			return
		}
		n, ok := num(0, 65535)
		if !ok {
			return
		}
		if c.Relative {
			p.errAt(nameOff, "%s cannot be combined with distance/within on one content", name)
			return
		}
		if name == "offset" {
			c.Offset = n
		} else {
			if n < len(c.Pattern) {
				p.errAt(valOff, "depth %d is shorter than the content (%d bytes)", n, len(c.Pattern))
				return
			}
			c.Depth, c.HasDepth = n, true
		}
	case "distance", "within":
		c := last()
		if c == nil {
			return
		}
		if len(r.Contents) < 2 {
			p.errAt(nameOff, "%s needs a content before the one it modifies", name)
			return
		}
		min := 0
		if name == "distance" {
			min = -65535
		}
		n, ok := num(min, 65535)
		if !ok {
			return
		}
		if c.Offset != 0 || c.HasDepth {
			p.errAt(nameOff, "%s cannot be combined with offset/depth on one content", name)
			return
		}
		c.Relative = true
		if name == "distance" {
			c.Distance = n
		} else {
			if n < len(c.Pattern) {
				p.errAt(valOff, "within %d is shorter than the content (%d bytes)", n, len(c.Pattern))
				return
			}
			c.Within, c.HasWithin = n, true
		}
	case "srv6.segment", "srv6.active", "srv6.last", "srv6.src":
		pc, err := parsePrefixCond(val)
		if err != nil {
			p.errAt(valOff, "%s: %v", name, err)
			return
		}
		*prefixKeywords[name](&r.SR) = pc
	case "srv6.sl", "srv6.args", "srv6.segments", "srv6.tag":
		uc, err := parseUintCond(val)
		if err != nil {
			p.errAt(valOff, "%s: %v", name, err)
			return
		}
		if name == "srv6.tag" && (uc.A > 0xffff || uc.B > 0xffff) {
			p.errAt(valOff, "srv6.tag: %q: the tag is 16 bits", val)
			return
		}
		*uintKeywords[name](&r.SR) = uc
	case "srv6.present":
		t := true
		r.SR.Present = &t
	default:
		p.errAt(nameOff, "unsupported keyword %q", name)
	}
}

// prefixKeywords and uintKeywords say which SRMatch field each srv6.*
// keyword sets.
var (
	prefixKeywords = map[string]func(*SRMatch) **PrefixCond{
		"srv6.segment": func(m *SRMatch) **PrefixCond { return &m.Segment },
		"srv6.active":  func(m *SRMatch) **PrefixCond { return &m.Active },
		"srv6.last":    func(m *SRMatch) **PrefixCond { return &m.Last },
		"srv6.src":     func(m *SRMatch) **PrefixCond { return &m.OuterSrc },
	}
	uintKeywords = map[string]func(*SRMatch) **UintCond{
		"srv6.sl":       func(m *SRMatch) **UintCond { return &m.SL },
		"srv6.args":     func(m *SRMatch) **UintCond { return &m.Args },
		"srv6.segments": func(m *SRMatch) **UintCond { return &m.NumSegs },
		"srv6.tag":      func(m *SRMatch) **UintCond { return &m.Tag },
	}
)

// optionNames are the supported keywords (for "needs a value" errors).
var optionNames = map[string]struct{}{
	"msg": {}, "sid": {}, "rev": {}, "gid": {}, "priority": {}, "classtype": {},
	"reference": {}, "metadata": {}, "content": {}, "offset": {}, "depth": {},
	"distance": {}, "within": {}, "pcre": {}, "dsize": {}, "itype": {}, "icode": {}, "srv6.segment": {}, "srv6.active": {},
	"srv6.last": {}, "srv6.src": {}, "srv6.sl": {}, "srv6.args": {}, "srv6.segments": {}, "srv6.tag": {},
}

// finishContents checks that at most one content is marked fast_pattern.
func (p *ruleParser) finishContents(open int) {
	explicit := 0
	for _, c := range p.r.Contents {
		if c.FastPattern {
			explicit++
		}
	}
	if explicit > 1 {
		p.errAt(open, "fast_pattern given on %d contents, at most one allowed", explicit)
	}
}

// FastPattern returns the index in Contents of the rule's prefilter
// pattern: the positive content marked fast_pattern, else the longest
// positive content (the first of equal ones); -1 when the rule has no
// positive content.
func (r *Rule) FastPattern() int {
	fast := -1
	for i, c := range r.Contents {
		if c.Negated || c.Regex != nil {
			continue
		}
		if c.FastPattern {
			return i
		}
		if fast < 0 || len(c.Pattern) > len(r.Contents[fast].Pattern) {
			fast = i
		}
	}
	return fast
}

// unquote reads a "quoted" value with \" \\ \; \: escapes.
func unquote(v string) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", fmt.Errorf("value must be a quoted string")
	}
	var b strings.Builder
	in := v[1 : len(v)-1]
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c == '\\' {
			if i+1 >= len(in) {
				return "", fmt.Errorf("dangling '\\'")
			}
			i++
			c = in[i]
		} else if c == '"' {
			return "", fmt.Errorf("unescaped '\"' inside the string")
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

// parseContent reads [!]"text|41 42|text" with \" \\ \; \: escapes.
func parseContent(v string) (Content, error) {
	var c Content
	if strings.HasPrefix(v, "!") {
		c.Negated = true
		v = strings.TrimSpace(v[1:])
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return c, fmt.Errorf("value must be a quoted string")
	}
	in := v[1 : len(v)-1]
	var out []byte
	for i := 0; i < len(in); i++ {
		ch := in[i]
		switch ch {
		case '\\':
			if i+1 >= len(in) {
				return c, fmt.Errorf("dangling '\\'")
			}
			i++
			out = append(out, in[i])
		case '"':
			return c, fmt.Errorf("unescaped '\"' inside the string")
		case ';':
			return c, fmt.Errorf("unescaped ';' inside the string (write \\;)")
		case '|':
			j := strings.IndexByte(in[i+1:], '|')
			if j < 0 {
				return c, fmt.Errorf("unterminated |hex| section")
			}
			hex := strings.ReplaceAll(strings.ReplaceAll(in[i+1:i+1+j], " ", ""), "\t", "")
			if len(hex) == 0 || len(hex)%2 != 0 {
				return c, fmt.Errorf("|%s|: hex bytes come in pairs of digits", in[i+1:i+1+j])
			}
			for k := 0; k < len(hex); k += 2 {
				n, err := strconv.ParseUint(hex[k:k+2], 16, 8)
				if err != nil {
					return c, fmt.Errorf("|%s|: %q is not a hex byte", in[i+1:i+1+j], hex[k:k+2])
				}
				out = append(out, byte(n))
			}
			i += j + 1
		default:
			out = append(out, ch)
		}
	}
	if len(out) == 0 {
		return c, fmt.Errorf("empty content")
	}
	c.Pattern = out
	return c, nil
}

// parsePrefixCond reads [!]addr-or-prefix[,addr-or-prefix...].
func parsePrefixCond(v string) (*PrefixCond, error) {
	pc := &PrefixCond{}
	if strings.HasPrefix(v, "!") {
		pc.Negated = true
		v = v[1:]
	}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		pfx, err := parsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", f, err)
		}
		pc.Prefixes = append(pc.Prefixes, pfx)
	}
	return pc, nil
}

// parseUintCond reads a Suricata integer comparison (see UintCond).
func parseUintCond(v string) (*UintCond, error) {
	u := &UintCond{}
	num := func(s string) (uint64, error) {
		s = strings.TrimSpace(s)
		n, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not an unsigned integer", s)
		}
		return n, nil
	}
	var err error
	switch {
	case strings.HasPrefix(v, "&"):
		mask, rest, ok := strings.Cut(v[1:], "=")
		if !ok {
			return nil, fmt.Errorf("bitmask needs &MASK=VALUE or &MASK!=VALUE")
		}
		if strings.HasSuffix(mask, "!") {
			u.Negate, mask = true, mask[:len(mask)-1]
		}
		u.Op = opMask
		if u.A, err = num(mask); err != nil {
			return nil, err
		}
		if u.B, err = num(rest); err != nil {
			return nil, err
		}
		return u, nil
	case strings.HasPrefix(v, "!="):
		u.Negate, v = true, v[2:]
	case strings.HasPrefix(v, "!"):
		u.Negate, v = true, v[1:]
	case strings.HasPrefix(v, "<="):
		u.Op, v = opLe, v[2:]
	case strings.HasPrefix(v, ">="):
		u.Op, v = opGe, v[2:]
	case strings.HasPrefix(v, "<"):
		u.Op, v = opLt, v[1:]
	case strings.HasPrefix(v, ">"):
		u.Op, v = opGt, v[1:]
	case strings.HasPrefix(v, "="):
		v = v[1:]
	}
	sep := "-"
	if strings.Contains(v, "<>") { // Suricata's older range syntax (dsize:300<>400)
		sep = "<>"
	}
	if a, b, ok := strings.Cut(v, sep); ok && u.Op == opEq {
		u.Op = opRange
		if u.A, err = num(a); err != nil {
			return nil, err
		}
		if u.B, err = num(b); err != nil {
			return nil, err
		}
		if u.B <= u.A+1 {
			return nil, fmt.Errorf("range %d-%d is exclusive and matches nothing", u.A, u.B)
		}
		return u, nil
	}
	if u.A, err = num(v); err != nil {
		return nil, err
	}
	return u, nil
}

// parsePCRE reads [!]"/regex/flags". The regex is Go's RE2 syntax, which
// shares PCRE's common constructs; what RE2 lacks (backreferences,
// lookaround, possessive quantifiers) fails to compile and is reported.
// Flags: i (caseless), s (dot matches newline), m (multiline), G
// (ungreedy), A (anchored at the start of the search), E ('$' only at the
// very end), R (relative to the previous match's end). The rule parser's
// escapes \" and \; are undone; other backslashes belong to the regex,
// which translatePCRE rewrites for PCRE's byte semantics.
func parsePCRE(v string) (Content, error) {
	var c Content
	if strings.HasPrefix(v, "!") {
		c.Negated = true
		v = strings.TrimSpace(v[1:])
	}
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return c, fmt.Errorf("value must be a quoted \"/regex/flags\"")
	}
	var b strings.Builder
	in := v[1 : len(v)-1]
	for i := 0; i < len(in); i++ {
		if in[i] == '\\' && i+1 < len(in) && (in[i+1] == '"' || in[i+1] == ';') {
			i++
		}
		b.WriteByte(in[i])
	}
	s := b.String()
	end := strings.LastIndexByte(s, '/')
	if !strings.HasPrefix(s, "/") || end < 1 {
		return c, fmt.Errorf("%q is not /regex/flags", s)
	}
	re, flags := s[1:end], s[end+1:]
	var goFlags, prefix string
	dollarEndOnly := inlineMultiline.MatchString(re)
	for _, f := range flags {
		switch f {
		case 'i', 's':
			goFlags += string(f)
		case 'm':
			goFlags += "m"
			dollarEndOnly = true
		case 'G':
			goFlags += "U"
		case 'A':
			prefix = `\A`
		case 'E':
			dollarEndOnly = true
		case 'R':
			c.Relative = true
		default:
			return c, fmt.Errorf("unsupported flag %q (supported: i s m G A E R)", f)
		}
	}
	tr, err := translatePCRE(re, dollarEndOnly, strings.ContainsRune(flags, 'i'))
	if err != nil {
		return c, fmt.Errorf("/%s/: %v", re, err)
	}
	expr := "(?:" + tr + ")"
	if goFlags != "" {
		expr = "(?" + goFlags + ")" + expr
	}
	// "^" (not the A flag: PCRE anchors that at the retry position)
	// leaves nothing to retry after the first match.
	c.anchored = startsAnchored(expr)
	rx, err := regexp.Compile(prefix + expr)
	if err != nil {
		return c, fmt.Errorf("/%s/: %v", re, err)
	}
	// The retry (Suricata searches again from one byte after the previous
	// match's start) runs over the text from the byte before that point, so
	// that \b and a multiline ^ see it as PCRE does: group 1 is the leftmost
	// match starting after the first byte (right there with A).
	skip := `(?s:.)*?`
	if prefix != "" {
		skip = ""
	}
	c.retry = regexp.MustCompile(`\A(?s:.)` + skip + "(" + expr + ")")
	c.Regex = rx
	return c, nil
}
