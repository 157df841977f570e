package bpfconst

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"regexp"
	"strconv"
	"strings"
)

// Reason is one enumerator of a drop-reason enum.
type Reason struct {
	C     string // the C enumerator, e.g. FW_DROP_BAD_SRH
	Go    string // the Go constant, e.g. DropBadSRH
	Name  string // what counters and JSON show, e.g. "bad-srh"
	Value int    // its number (the index of the drop counter)
}

// Enum is a drop-reason enum: its reasons in order and its _MAX enumerator
// (the number of reasons, the length of the counter arrays).
type Enum struct {
	Name    string // C enum name, e.g. fw_drop_reason
	Reasons []Reason
	Max     string // e.g. FW_DROP_MAX
}

// Define is an integer #define exported to Go under another name.
type Define struct {
	C       string
	Go      string
	Value   string // the C literal, kept as written (0x80000000 stays hex)
	Comment string // the #define's trailing comment, if any
}

// initialisms are spelled in capitals in Go names (Go's naming rule).
var initialisms = map[string]bool{
	"SRH": true, "SID": true, "HMAC": true, "MTU": true, "FIB": true,
	"GSO": true, "L2": true, "SL": true, "IP": true, "ICMP": true,
}

// GoName turns the part of a C enumerator after its _DROP_ into a Go
// constant name: FW_DROP_BAD_SRH -> DropBadSRH.
func GoName(c string) (string, error) {
	i := strings.Index(c, "_DROP_")
	if i < 0 {
		return "", fmt.Errorf("%s: not a drop reason (no _DROP_)", c)
	}
	var b strings.Builder
	b.WriteString("Drop")
	for _, w := range strings.Split(c[i+len("_DROP_"):], "_") {
		if w == "" {
			return "", fmt.Errorf("%s: empty word", c)
		}
		if initialisms[w] {
			b.WriteString(w)
			continue
		}
		b.WriteString(w[:1] + strings.ToLower(w[1:]))
	}
	return b.String(), nil
}

var (
	enumerator = regexp.MustCompile(`^\s*([A-Z][A-Z0-9_]*)\s*(?:=\s*([0-9]+))?\s*,?\s*(?:/\*\s*(.*?)\s*\*/)?\s*$`)
	quotedName = regexp.MustCompile(`^"([a-z0-9][a-z0-9-]*)"`)
	defineLine = regexp.MustCompile(`^#define\s+([A-Z][A-Z0-9_]*)\s+((?:0x[0-9a-fA-F]+|[0-9]+))[uUlL]*\s*(?:/\*\s*(.*?)\s*\*/)?\s*$`)
)

// ParseEnum finds `enum name {` in src and reads its enumerators, one per
// line. Every enumerator but the last (the _MAX) must start its comment
// with its quoted name: `FW_DROP_BAD_SRH, /* "bad-srh": why */`.
func ParseEnum(src, name string) (Enum, error) {
	e := Enum{Name: name}
	lines := strings.Split(src, "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "enum "+name+" {" {
			start = i + 1
			break
		}
	}
	if start < 0 {
		return e, fmt.Errorf("enum %s: not found", name)
	}
	var errs []error
	next := 0
	names := map[string]string{}
	for i := start; ; i++ {
		if i == len(lines) {
			return e, fmt.Errorf("enum %s: no closing brace", name)
		}
		l := lines[i]
		if strings.HasPrefix(strings.TrimSpace(l), "};") {
			break
		}
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "/*") {
			continue
		}
		m := enumerator.FindStringSubmatch(l)
		if m == nil {
			errs = append(errs, fmt.Errorf("enum %s line %d: want one enumerator per line: %q", name, i+1, strings.TrimSpace(l)))
			continue
		}
		if m[2] != "" {
			next, _ = strconv.Atoi(m[2])
		}
		if strings.HasSuffix(m[1], "_MAX") {
			e.Max = m[1]
			next++
			continue
		}
		if e.Max != "" {
			errs = append(errs, fmt.Errorf("enum %s line %d: %s after %s", name, i+1, m[1], e.Max))
		}
		q := quotedName.FindStringSubmatch(m[3])
		if q == nil {
			errs = append(errs, fmt.Errorf("enum %s line %d: %s: its comment must start with its quoted name, e.g. /* \"bad-srh\" */", name, i+1, m[1]))
			next++
			continue
		}
		if prev, dup := names[q[1]]; dup {
			errs = append(errs, fmt.Errorf("enum %s line %d: %s: name %q already names %s", name, i+1, m[1], q[1], prev))
		}
		names[q[1]] = m[1]
		g, err := GoName(m[1])
		if err != nil {
			errs = append(errs, fmt.Errorf("enum %s line %d: %w", name, i+1, err))
		}
		e.Reasons = append(e.Reasons, Reason{C: m[1], Go: g, Name: q[1], Value: next})
		next++
	}
	if e.Max == "" {
		errs = append(errs, fmt.Errorf("enum %s: no _MAX enumerator", name))
	}
	return e, errors.Join(errs...)
}

// ParseDefines reads the integer #defines named in want (C name -> Go
// name) from src; a define that is missing or not an integer literal is an
// error.
func ParseDefines(src string, want map[string]string) ([]Define, error) {
	found := map[string]Define{}
	for _, l := range strings.Split(src, "\n") {
		m := defineLine.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		if g, ok := want[m[1]]; ok {
			found[m[1]] = Define{C: m[1], Go: g, Value: m[2], Comment: m[3]}
		}
	}
	var out []Define
	var errs []error
	for c := range want {
		d, ok := found[c]
		if !ok {
			errs = append(errs, fmt.Errorf("#define %s: not found as an integer literal", c))
			continue
		}
		out = append(out, d)
	}
	// Stable output: in the order of the C source.
	order := map[string]int{}
	for i, l := range strings.Split(src, "\n") {
		if m := defineLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			order[m[1]] = i
		}
	}
	sortDefines(out, order)
	return out, errors.Join(errs...)
}

func sortDefines(d []Define, order map[string]int) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && order[d[j].C] < order[d[j-1].C]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

// File is what one Go file declares.
type File struct {
	Source  string // the C file, as shown in the header
	Package string
	// Ident is bpf2go's identifier stem (e.g. fwTC): reason numbers are
	// taken from its generated constants, so the Go values are the
	// compiled program's, not a second reading of the C.
	Ident   string
	Enum    *Enum
	Defines []Define
}

// Render writes the Go file, gofmt'ed.
func Render(f File) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by bpfconst from %s; DO NOT EDIT.\n\n", f.Source)
	fmt.Fprintf(&b, "package %s\n\n", f.Package)
	if len(f.Defines) > 0 {
		fmt.Fprintf(&b, "// Limits of the data path, from the #defines of %s.\nconst (\n", f.Source)
		for _, d := range f.Defines {
			c := d.C
			if d.Comment != "" {
				c += ": " + d.Comment
			}
			fmt.Fprintf(&b, "\t%s = %s // %s\n", d.Go, d.Value, c)
		}
		b.WriteString(")\n\n")
	}
	if e := f.Enum; e != nil {
		if f.Ident == "" {
			return nil, errors.New("an enum needs the bpf2go identifier")
		}
		gen := func(c string) string {
			return f.Ident + camel(e.Name) + c
		}
		fmt.Fprintf(&b, "// DropReason is why the program of %s dropped a packet (enum %s): the index of its drop counters.\n", f.Source, e.Name)
		b.WriteString("type DropReason uint32\n\n")
		fmt.Fprintf(&b, "// Drop reasons: numbers from bpf2go's enum %s, names from the C comments.\nconst (\n", e.Name)
		for _, r := range e.Reasons {
			fmt.Fprintf(&b, "\t%s = DropReason(%s)\n", r.Go, gen(r.C))
		}
		fmt.Fprintf(&b, "\tnumDropReasons = int(%s)\n)\n\n", gen(e.Max))
		b.WriteString("var dropNames = [...]string{\n")
		for _, r := range e.Reasons {
			fmt.Fprintf(&b, "\t%s: %q,\n", r.Go, r.Name)
		}
		b.WriteString("}\n\n")
		b.WriteString(`// String is the reason's name as counters and JSON show it.
func (r DropReason) String() string {
	if int(r) < len(dropNames) && dropNames[r] != "" {
		return dropNames[r]
	}
	return "unknown"
}
`)
	}
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("gofmt generated code: %w\n%s", err, b.Bytes())
	}
	return out, nil
}

// camel is bpf2go's spelling of a C type name: fw_drop_reason -> FwDropReason.
func camel(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(s, "_") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}
