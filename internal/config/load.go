package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load reads, defaults and validates the domain file at path. Problems in
// the file are returned as an ErrorList.
func Load(path string) (*Domain, error) {
	d, _, err := LoadSource(path)
	return d, err
}

// LoadSource is Load with the bytes it parsed (apply's input digest
// hashes exactly what was planned).
func LoadSource(path string) (*Domain, []byte, error) {
	if err := statSize(path); err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load domain: %w", err)
	}
	d, err := Parse(data, filepath.Dir(path))
	if err != nil {
		return nil, nil, err
	}
	return d, data, nil
}

// Parse decodes a domain file strictly, applies the defaults and validates
// it. dir is the directory relative secret files resolve against. Every
// problem is reported at once in an ErrorList; the Domain is returned only
// when there is none.
func Parse(data []byte, dir string) (*Domain, error) {
	if err := checkSize(int64(len(data))); err != nil {
		return nil, err
	}
	d, errs := decode(data)
	if d == nil {
		return nil, errs.list()
	}
	d.Dir = dir
	errs.lists = append(errs.lists, validate(d, errs.pos)...)
	if list := errs.list(); len(list) > 0 {
		return nil, list
	}
	return d, nil
}

// decoded carries the decode step's findings to validation.
type decoded struct {
	lists errorAcc
	pos   positions
	bad   []string // paths with structural errors: validation stays quiet below them
}

// list returns the errors, dropping validation errors under a path that
// already has a structural (syntax, unknown field, type) error.
func (d decoded) list() ErrorList {
	var out ErrorList
	for _, e := range d.lists {
		if !e.structural && d.under(e.Path) {
			continue
		}
		out = append(out, &e.FieldError)
	}
	out.Sort()
	return out
}

func (d decoded) under(p string) bool {
	for _, b := range d.bad {
		if p == b || strings.HasPrefix(p, b+".") || strings.HasPrefix(p, b+"[") {
			return true
		}
	}
	return false
}

// positions maps paths to YAML positions.
type positions map[string][2]int

// of returns the position of path or of its nearest ancestor.
func (p positions) of(path string) (int, int) {
	for {
		if lc, ok := p[path]; ok {
			return lc[0], lc[1]
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			if lc, ok := p[""]; ok && path != "" {
				return lc[0], lc[1]
			}
			return 0, 0
		}
		path = path[:i]
	}
}

// fieldErr is a FieldError plus whether it came from decoding.
type fieldErr struct {
	FieldError
	structural bool
}

// Lists are built as []*fieldErr internally; ErrorList is the public form.
type errorAcc = []*fieldErr

var lineRE = regexp.MustCompile(`line (\d+)(?::(\d+))?`)

func decode(data []byte) (*Domain, decoded) {
	var res decoded
	res.pos = positions{}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		fe := &fieldErr{structural: true}
		fe.Msg = strings.TrimPrefix(err.Error(), "yaml: ")
		if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
			fe.Line, _ = strconv.Atoi(m[1])
			fe.Msg = strings.TrimSpace(strings.TrimPrefix(lineRE.ReplaceAllString(fe.Msg, ""), ":"))
		}
		if l, c := syntaxPosition(data); l > 0 {
			fe.Line, fe.Col = l, c
		}
		res.lists = append(res.lists, fe)
		return nil, res
	}
	if len(doc.Content) == 0 {
		res.lists = append(res.lists, &fieldErr{FieldError: FieldError{Msg: "empty domain file"}, structural: true})
		return nil, res
	}
	w := &walker{pos: res.pos}
	w.walk(doc.Content[0], reflect.TypeOf(Domain{}), "")
	res.lists = append(res.lists, w.errs...)
	res.bad = w.bad

	// The walker removed unknown and duplicate keys and nulled wrongly typed
	// values, so decoding the cleaned tree keeps every good field.
	var d Domain
	if err := decodeLinear(doc.Content[0], &d); err != nil && len(w.errs) == 0 {
		var te *yaml.TypeError
		msgs := []string{err.Error()}
		if errors.As(err, &te) {
			msgs = te.Errors
		}
		for _, m := range msgs {
			fe := &fieldErr{structural: true}
			fe.Msg = m
			if mm := lineRE.FindStringSubmatch(m); mm != nil {
				fe.Line, _ = strconv.Atoi(mm[1])
			}
			res.lists = append(res.lists, fe)
		}
	}
	decodeBlocks(&d, w.blocks, &res)
	applyDefaults(&d, w.present)
	canonicalNames(&d)
	return &d, res
}

// decodeLinear is root.Decode(d) in time linear in the file. yaml.v3
// checks every mapping for duplicate keys by comparing each key with every
// other (quadratic: a domain of 20,000 services took seconds, one of
// 260,000 did not finish); the walker has removed duplicates already,
// with a map. So the domain's large mappings (nodes, services, chains)
// are detached from the tree while the rest decodes, then decoded entry
// by entry into their Go maps. A mapping with a merge key (<<) is left to
// yaml, which knows how to merge.
func decodeLinear(root *yaml.Node, d *Domain) error {
	type detached struct {
		n       *yaml.Node
		content []*yaml.Node
		dst     reflect.Value // the map field
	}
	fields := map[string]reflect.Value{
		"nodes":    reflect.ValueOf(&d.Nodes).Elem(),
		"services": reflect.ValueOf(&d.Services).Elem(),
		"chains":   reflect.ValueOf(&d.Chains).Elem(),
	}
	var dets []detached
	if root.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(root.Content); i += 2 {
			dst, ok := fields[root.Content[i].Value]
			v := root.Content[i+1]
			if !ok || v.Kind != yaml.MappingNode || hasMergeKey(v) {
				continue
			}
			dets = append(dets, detached{v, v.Content, dst})
			v.Content = nil
		}
	}
	err := root.Decode(d)
	var errs []string
	if err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return err
		}
		errs = te.Errors
	}
	for _, x := range dets {
		x.n.Content = x.content
		if x.dst.IsNil() {
			x.dst.Set(reflect.MakeMapWithSize(x.dst.Type(), len(x.content)/2))
		}
		for i := 0; i+1 < len(x.content); i += 2 {
			e := reflect.New(x.dst.Type().Elem())
			if err := x.content[i+1].Decode(e.Interface()); err != nil {
				var te *yaml.TypeError
				if !errors.As(err, &te) {
					return err
				}
				errs = append(errs, te.Errors...)
			}
			x.dst.SetMapIndex(reflect.ValueOf(x.content[i].Value), e.Elem())
		}
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	return nil
}

func hasMergeKey(n *yaml.Node) bool {
	for i := 0; i < len(n.Content); i += 2 {
		if n.Content[i].Value == "<<" && n.Content[i].Tag == "!!merge" {
			return true
		}
	}
	return false
}

// walker checks the YAML tree against the Go types: unknown and duplicate
// keys, wrong node kinds and unparsable scalars, recording every path's
// position.
type walker struct {
	// blocks are the service kinds' blocks found (path → node).
	blocks  map[string]*yaml.Node
	pos     positions
	present map[string]bool
	errs    errorAcc
	bad     []string
	// fields caches yamlFields per struct type: the walk meets one per
	// service, node and chain.
	fields map[reflect.Type]map[string][]int
}

// nullify replaces a wrongly typed value by null so decoding skips it.
func nullify(n *yaml.Node) {
	*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
}

func (w *walker) errf(n *yaml.Node, path, format string, args ...any) {
	fe := &fieldErr{structural: true}
	fe.Path, fe.Msg = path, fmt.Sprintf(format, args...)
	if n != nil {
		fe.Line, fe.Col = n.Line, n.Column
	}
	w.errs = append(w.errs, fe)
	w.bad = append(w.bad, path)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields returns the YAML keys of a struct type, following inline
// fields, with the field index paths.
func yamlFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, idx := range yamlFields(f.Type) {
				out[k] = append([]int{i}, idx...)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = []int{i}
	}
	return out
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	if w.present == nil {
		w.present = map[string]bool{}
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	w.pos[path] = [2]int{n.Line, n.Column}
	w.present[path] = true
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isNull(n) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.errf(n, path, "want a mapping, got %s", kindName(n))
			nullify(n)
			return
		}
		fields := w.fields[t]
		if fields == nil {
			if w.fields == nil {
				w.fields = map[reflect.Type]map[string][]int{}
			}
			fields = yamlFields(t)
			w.fields[t] = fields
		}
		blocks := kindBlocks(t)
		w.mapping(n, path, func(key string, k, v *yaml.Node) bool {
			if key == "<<" {
				w.walk(v, t, path)
				return true
			}
			if bt, ok := blocks[key]; ok {
				// A service kind's own block: checked against the kind's
				// type here, decoded into Service.Blocks after.
				w.walk(v, bt, join(path, key))
				if w.blocks == nil {
					w.blocks = map[string]*yaml.Node{}
				}
				w.blocks[join(path, key)] = v
				return false
			}
			idx, ok := fields[key]
			if !ok {
				known := make([]string, 0, len(fields)+len(blocks))
				for f := range fields {
					known = append(known, f)
				}
				for f := range blocks {
					known = append(known, f)
				}
				sort.Strings(known)
				w.errf(k, join(path, key), "unknown field %q (known: %s)", key, strings.Join(known, ", "))
				return false
			}
			w.walk(v, t.FieldByIndex(idx).Type, join(path, key))
			return true
		})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.errf(n, path, "want a mapping, got %s", kindName(n))
			nullify(n)
			return
		}
		w.mapping(n, path, func(key string, k, v *yaml.Node) bool {
			w.walk(v, t.Elem(), join(path, key))
			return true
		})
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.errf(n, path, "want a list, got %s", kindName(n))
			nullify(n)
			return
		}
		for i, c := range n.Content {
			w.walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		if n.Kind != yaml.ScalarNode {
			w.errf(n, path, "want a %s, got %s", scalarName(t), kindName(n))
			nullify(n)
			return
		}
		v := reflect.New(t)
		if err := n.Decode(v.Interface()); err != nil {
			w.errf(n, path, "want a %s, got %q", scalarName(t), n.Value)
			nullify(n)
		}
	}
}

func scalarName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "number"
	case reflect.Bool:
		return "boolean"
	}
	return "string"
}

// mapping calls fn for each key of a mapping node, reporting duplicate and
// non-scalar keys. Pairs that are in error (or that fn rejects) are removed
// from the node.
func (w *walker) mapping(n *yaml.Node, path string, fn func(key string, k, v *yaml.Node) bool) {
	seen := map[string]int{}
	kept := n.Content[:0:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.errf(k, path, "keys must be strings")
			continue
		}
		if line, dup := seen[k.Value]; dup && k.Value != "<<" {
			w.errf(k, join(path, k.Value), "duplicate key (first at line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		if fn(k.Value, k, v) {
			kept = append(kept, k, v)
		}
	}
	n.Content = kept
}

// Defaults applied after decoding.
const (
	DefaultMode      = ModeEncap
	DefaultRouting   = RoutingStatic
	DefaultAlgorithm = "sha256"
	// DefaultReturnTable is the table of a bidirectional IPv6 chain's
	// default return egress (End.DT6 table main).
	DefaultReturnTable = 254
)

// applyDefaults fills in what the file leaves out. present says which
// paths the file set (args_bits: 0 is meaningful).
func applyDefaults(d *Domain, present map[string]bool) {
	if !present["sid.locator_bits"] {
		d.SID.LocatorBits = 64
	}
	if !present["sid.function_bits"] {
		d.SID.FunctionBits = 48
	}
	if !present["sid.args_bits"] {
		d.SID.ArgsBits = 16
	}
	if d.Routing.Mode == "" {
		d.Routing.Mode = DefaultRouting
	}
	if d.Routing.Mode == RoutingBGP {
		if d.Routing.BGP == nil {
			d.Routing.BGP = &BGPRouting{}
		}
		if d.Routing.BGP.Keepalive == 0 {
			d.Routing.BGP.Keepalive = DefaultKeepalive
		}
		if d.Routing.BGP.Hold == 0 {
			d.Routing.BGP.Hold = DefaultHold
		}
		if d.Routing.BGP.BFDInterval == 0 {
			d.Routing.BGP.BFDInterval = DefaultBFDInterval
		}
		if d.Routing.BGP.BFDMultiplier == 0 {
			d.Routing.BGP.BFDMultiplier = DefaultBFDMultiplier
		}
	}
	for _, k := range d.Security.HMAC {
		if k != nil && k.Algorithm == "" {
			k.Algorithm = DefaultAlgorithm
		}
	}
	for _, s := range d.Services {
		if s != nil {
			defaultCount(&s.Params)
		}
	}
	for _, c := range d.Chains {
		if c == nil {
			continue
		}
		if c.Mode == "" {
			c.Mode = DefaultMode
		}
		if c.Match.Family == 0 {
			c.Match.Family = familyOf(c.Match.Dst)
		}
		if c.Egress != nil {
			defaultCount(&c.Egress.Params)
		}
		if c.Bidirectional && c.Return == nil && c.Match.Family == 6 {
			c.Return = &Egress{Behavior: "End.DT6", Params: Params{Table: DefaultReturnTable}}
		}
		if c.Return != nil {
			if c.Return.Node == "" {
				c.Return.Node = c.Ingress
			}
			defaultCount(&c.Return.Params)
		}
	}
}

func defaultCount(p *Params) {
	if p.Count == nil {
		t := true
		p.Count = &t
	}
}
