package config

import (
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files (testdata/bad/*.golden, docs/domain.schema.json)")

// TestBadGolden loads every testdata/bad/*.yaml and compares the full error
// list with its .golden file.
func TestBadGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad files: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			d, err := Load(f)
			if err == nil {
				t.Fatalf("Load(%s) succeeded: %+v", f, d)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList: %v", err, err)
			}
			for _, e := range list {
				if e.Msg == "" {
					t.Errorf("empty message at %q", e.Path)
				}
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(f, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("errors differ from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestExamplesLoad proves every published example is a valid domain.
func TestExamplesLoad(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	good, _ := filepath.Glob("testdata/good/*.yaml")
	files = append(files, good...)
	if len(files) == 0 {
		t.Fatal("no example files")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			d, err := Load(f)
			if err != nil {
				t.Fatalf("Load(%s):\n%v", f, err)
			}
			if _, err := d.SIDs(); err != nil {
				t.Errorf("SIDs: %v", err)
			}
			for name := range d.Security.HMAC {
				if _, err := d.Secret(name); err != nil {
					t.Errorf("Secret(%s): %v", name, err)
				}
			}
		})
	}
}

func TestErrorPositions(t *testing.T) {
	src := "name: x\nnodes:\n  a: {role: host, id: 1}\n  b:\n    role: nfv\n    id: 2\n    locator: \"fc00::/48\"\n    bogus: 1\n"
	_, err := Parse([]byte(src), ".")
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %v is not an ErrorList", err)
	}
	got := []FieldError{}
	for _, e := range list {
		got = append(got, *e)
	}
	want := []FieldError{
		{Path: "nodes.b.bogus", Line: 8, Col: 5, Msg: `unknown field "bogus" (known: agent, bgp, id, locator, netns, role, sysctls)`},
		{Path: "nodes.b.locator", Line: 7, Col: 14, Msg: "fc00::/48 is /48, sid.locator_bits is 64"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDefaults(t *testing.T) {
	src := `
name: defaults
nodes:
  in:  {role: edge, id: 1, locator: "fc00:1::/64"}
  out: {role: edge, id: 2, locator: "fc00:2::/64"}
services:
  s: {node: out, behavior: End}
chains:
  c:
    ingress: in
    match: {src: "fc00:a::/64", dst: "fc00:b::/64"}
    services: [s]
    egress: {node: out, behavior: End.DX6, nh6: "fc00:b::1"}
    bidirectional: true
`
	d, err := Parse([]byte(src), ".")
	if err != nil {
		t.Fatal(err)
	}
	tr := true
	want := &Domain{
		Name:     "defaults",
		SID:      SIDFormat{LocatorBits: 64, FunctionBits: 48, ArgsBits: 16},
		Nodes:    map[string]*Node{"in": {Role: "edge", ID: 1, Locator: "fc00:1::/64"}, "out": {Role: "edge", ID: 2, Locator: "fc00:2::/64"}},
		Services: map[string]*Service{"s": {Node: "out", Behavior: "End", Params: Params{Count: &tr}}},
		Chains: map[string]*Chain{"c": {
			Ingress: "in", Mode: "encap", Services: []string{"s"},
			Match:         Match{Family: 6, Src: "fc00:a::/64", Dst: "fc00:b::/64"},
			Egress:        &Egress{Node: "out", Behavior: "End.DX6", Params: Params{Nh6: "fc00:b::1", Count: &tr}},
			Bidirectional: true,
			Return:        &Egress{Node: "in", Behavior: "End.DT6", Params: Params{Table: 254, Count: &tr}},
		}},
		Routing: Routing{Mode: "static"},
		Dir:     ".",
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// args_bits: 0 given explicitly stays 0; absent fields default.
	d, err = Parse([]byte("nodes:\n  h: {role: host, id: 1}\nsid: {args_bits: 0}\n"), ".")
	if err != nil {
		t.Fatal(err)
	}
	if d.SID != (SIDFormat{LocatorBits: 64, FunctionBits: 48}) {
		t.Errorf("SID format = %+v, want 64/48/0", d.SID)
	}
}

func TestResolvedDefault(t *testing.T) {
	d, err := Load("../../examples/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ifs := d.Interfaces()
	byEnd := map[string]Interface{}
	for _, i := range ifs {
		byEnd[i.Node+":"+i.Name] = i
	}
	if len(byEnd) != 16 || len(ifs) != 16 {
		t.Fatalf("%d interfaces (%d distinct), want 16", len(ifs), len(byEnd))
	}
	pp := netip.MustParsePrefix
	for _, tt := range []struct {
		end  string
		want Interface
	}{
		{"ingress:eth-s", Interface{Node: "ingress", Name: "eth-s", PeerNode: "s", PeerName: "eth-ingress",
			Addrs: []netip.Prefix{pp("fc00:1a::1/64"), pp("198.18.1.1/24")}, Link: 0}},
		{"s:eth-ingress", Interface{Node: "s", Name: "eth-ingress", PeerNode: "ingress", PeerName: "eth-s",
			Addrs: []netip.Prefix{pp("fc00:1a::a/64"), pp("198.18.1.10/24")}, Link: 0}},
		{"d:eth-egress", Interface{Node: "d", Name: "eth-egress", PeerNode: "egress", PeerName: "eth-d",
			Addrs: []netip.Prefix{pp("fc00:4d::d/64"), pp("198.18.4.13/24")}, Link: 6}},
		{"nfv1:eth-r2", Interface{Node: "nfv1", Name: "eth-r2", PeerNode: "r2", PeerName: "eth-nfv1",
			Addrs: []netip.Prefix{pp("fc00:26::2/64"), pp("198.19.26.2/24")}, Link: 3}},
	} {
		t.Run(tt.end, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, byEnd[tt.end], cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for i := 1; i < len(ifs); i++ {
		a, b := ifs[i-1], ifs[i]
		if a.Node > b.Node || a.Node == b.Node && a.Name >= b.Name {
			t.Errorf("interfaces not sorted: %s:%s before %s:%s", a.Node, a.Name, b.Node, b.Name)
		}
	}
	for node, want := range map[string]string{"ingress": "fc00:1::1", "nfv2": "fc00:3::1", "s": "fc00:1a::a", "d": "fc00:4d::d", "r1": "fc00:15::5"} {
		if got := d.NodeAddr(node); got != netip.MustParseAddr(want) {
			t.Errorf("NodeAddr(%s) = %s, want %s", node, got, want)
		}
	}
	sids, err := d.SIDs()
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{"chains.filtered.egress", "chains.firewalled.egress", "chains.legacy4.egress", "chains.web.egress",
		"nfv1-end", "nfv1-fw", "nfv2-end", "nfv2-fw"}
	gotKeys := sortedKeys(sids)
	if diff := cmp.Diff(wantKeys, gotKeys); diff != "" {
		t.Errorf("SID keys (-want +got):\n%s", diff)
	}
	for k, a := range sids {
		node := map[string]string{"nfv1-end": "nfv1", "nfv1-fw": "nfv1", "nfv2-end": "nfv2", "nfv2-fw": "nfv2"}[k]
		if node == "" {
			node = "egress"
		}
		loc := netip.MustParsePrefix(d.Nodes[node].Locator)
		if !loc.Contains(a) || a == d.NodeAddr(node) {
			t.Errorf("%s = %s: not a SID of %s", k, a, node)
		}
	}
	if got, want := sids["nfv2-fw"], netip.MustParseAddr("fc00:3::f1:0"); got != want {
		t.Errorf("nfv2-fw = %s, want the pinned %s", got, want)
	}
	again, _ := d.SIDs()
	if diff := cmp.Diff(sids, again, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("SIDs not deterministic (-first +second):\n%s", diff)
	}
}

// TestSIDsStableUnderEdit: adding a service to a domain keeps every other
// SID (the file is edited, re-applied, nothing else moves).
func TestSIDsStableUnderEdit(t *testing.T) {
	base, err := Load("../../examples/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := base.SIDs()
	base.Services["nfv1-extra"] = &Service{Node: "nfv1", Behavior: "End"}
	after, err := base.SIDs()
	if err != nil {
		t.Fatal(err)
	}
	for k, a := range before {
		if after[k] != a {
			t.Errorf("%s moved from %s to %s", k, a, after[k])
		}
	}
	if !after["nfv1-extra"].IsValid() {
		t.Error("no SID for the new service")
	}
}

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	const want = "s3cret-s3cret-s3cret-s3cret-s3cr" // 32 bytes
	os.WriteFile(filepath.Join(dir, "k"), []byte(want+"\r\n"), 0o600)
	d := &Domain{Dir: dir, Security: Security{HMAC: map[string]*HMACKey{"k": {ID: 1, SecretFile: "k"}}}}
	got, err := d.Secret("k")
	if err != nil || string(got) != want {
		t.Errorf("Secret = %q, %v; want %s", got, err, want)
	}
	// Shorter than the hash output (RFC 2104 §3): refused.
	os.WriteFile(filepath.Join(dir, "short"), []byte(want[:31]), 0o600)
	d.Security.HMAC["short"] = &HMACKey{ID: 2, SecretFile: "short"}
	if _, err := d.Secret("short"); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("Secret of a 31-byte sha256 key: %v, want a refusal", err)
	}
	if _, err := d.Secret("nope"); err == nil {
		t.Error("Secret of an undefined key succeeded")
	}
}

func TestNaturalCompare(t *testing.T) {
	l := ErrorList{{Path: "links[10]"}, {Path: "links[2].ipv6"}, {Path: "chains.b"}, {Path: "links[2]"}}
	l.Sort()
	var got []string
	for _, e := range l {
		got = append(got, e.Path)
	}
	if diff := cmp.Diff([]string{"chains.b", "links[2]", "links[2].ipv6", "links[10]"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseForms(t *testing.T) {
	src := `
base: &loc {role: nfv, id: 2, locator: "fc00:2::/64"}
`
	if _, err := Parse([]byte(src), "."); err == nil || !strings.Contains(err.Error(), `unknown field "base"`) {
		t.Errorf("top-level anchor holder accepted: %v", err)
	}
	src = `
nodes:
  in: {role: ingress, id: 1, locator: "fc00:1::/64"}
  nfv: &n {role: nfv, id: 2, locator: "fc00:2::/64"}
  nfv2:
    <<: *n
    id: 3
    locator: "fc00:3::/64"
services:
  hex: {node: nfv, behavior: End, function: 0xf1}
  dec: {node: nfv, behavior: End, function: 242}
`
	d, err := Parse([]byte(src), ".")
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Nodes["nfv2"]; got.Role != "nfv" || got.ID != 3 {
		t.Errorf("merge key: nfv2 = %+v", got)
	}
	sids, err := d.SIDs()
	if err != nil {
		t.Fatal(err)
	}
	if sids["hex"] != netip.MustParseAddr("fc00:2::f1:0") || sids["dec"] != netip.MustParseAddr("fc00:2::f2:0") {
		t.Errorf("pinned functions: %v", sids)
	}
}
