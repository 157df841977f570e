package plan

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
)

// f3216 loads an example domain with sid.format: f3216 added.
func f3216(t *testing.T, file string) (*config.Domain, error) {
	return withSID(t, file, "{format: f3216}")
}

// withSID loads an example domain with the sid: line sid added.
func withSID(t *testing.T, file, sid string) (*config.Domain, error) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^name: .*$`)
	b = re.ReplaceAll(b, []byte("$0\nsid: "+sid))
	return config.Parse(b, filepath.Dir(file))
}

// TestGoldenF3216 renders every example domain in f3216 (except the BGP
// one, refused: see TestF3216Refusals) against testdata/<example>-f3216.golden.
func TestGoldenF3216(t *testing.T) { goldenFormat(t, "f3216", "{format: f3216}") }

// goldenFormat renders every example domain (but the BGP one) with sid
// against testdata/<example>-<suffix>.golden.
func goldenFormat(t *testing.T, suffix, sid string) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		if name == "redundant" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			d, err := withSID(t, f, sid)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Build(d)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			p.Render(&buf)
			golden := filepath.Join("testdata", name+"-"+suffix+".golden")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), buf.String()); diff != "" {
				t.Errorf("plan differs from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestF3216Refusals: what f3216 cannot do is refused with the field path.
func TestF3216Refusals(t *testing.T) {
	sidRefusals(t, []sidRefusal{
		{"bgp", "{format: f3216}", "routing:\n  mode: bgp\n", "routing.mode"},
		{"unknown format", "{format: f6464}", "", "sid.format"},
		{"block length", "{format: f3216, block: \"fcbb:bb00::/48\"}", "", "sid.block"},
		{"block overlap", "{format: f3216, block: \"fc00:4d::/32\"}", "", "overlaps the uSID block"},
		{"block without f3216", "{block: \"fcbb:bb00::/32\"}", "", "sid.block"},
		{"node id", "{format: f3216}", "", "nodes.nfv1.id"},
	})
}

// sidRefusal is a sid: block (and an edit of the default domain's
// routing block) that config must refuse with an error containing want;
// the case named "node id" also gives nfv1 the id 300.
type sidRefusal struct{ name, sid, edit, want string }

// sidRefusals parses examples/default.yaml with each case's sid block.
func sidRefusals(t *testing.T, cases []sidRefusal) {
	base, err := os.ReadFile("../../examples/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(string(base), "name: default", "name: default\nsid: "+tc.sid, 1)
			if tc.edit != "" {
				y = strings.Replace(y, "routing:\n  mode: static\n", tc.edit, 1)
			}
			if tc.name == "node id" {
				y = strings.Replace(y, "nfv1:    {role: nfv,     id: 2,", "nfv1:    {role: nfv,     id: 300,", 1)
			}
			_, err := config.Parse([]byte(y), "../../examples")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestF3216Pack: a chain longer than one container spills into the SRH;
// all-uSID chains use the reduced encapsulation.
func TestF3216Pack(t *testing.T) {
	d, err := f3216(t, "../../examples/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Seven End hops on nfv1/nfv2 plus the egress: 8 uSIDs, 2 containers.
	for i := 0; i < 7; i++ {
		node := []string{"nfv1", "nfv2"}[i%2]
		name := "e" + string(rune('a'+i))
		d.Services[name] = &config.Service{Node: node, Behavior: "End"}
		d.Chains["web"].Services = append(d.Chains["web"].Services, name)
	}
	d.Chains["web"].Services = d.Chains["web"].Services[2:]
	p, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Chains {
		if c.Name != "web" {
			continue
		}
		if len(c.Hops) != 8 || len(c.Segments) != 2 || c.Encap != "encap.red" {
			t.Fatalf("web: %d hops pushed as %s %v, want 8 hops in 2 containers, encap.red", len(c.Hops), c.Encap, c.Segments)
		}
		f := d.USIDFormat()
		var got []netip.Addr
		for _, s := range c.Segments {
			a := s
			for {
				c, err := f.Decode(a)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, f.SID(c.Active))
				var ok bool
				if a, ok = f.Shift(a); !ok {
					break
				}
			}
		}
		for i, h := range c.Hops {
			if got[i] != h.SID {
				t.Errorf("uSID %d = %s, want hop %s", i, got[i], h.SID)
			}
		}
		return
	}
	t.Fatal("no chain web")
}

// TestUSIDServedKinds: in f3216 the SR proxies, End.AN.NF and userspace
// services take uSIDs. End.AD/End.AS shift in the middle of a container
// (chain firewalled: one container, encap.red), and so does a userspace
// service (the library shifts; its binding is planned as a uSID, usid
// 32/16); End.AM ends its container, and a chain through it of several
// containers keeps the full SRH (its SRH walk refuses the reduced one).
func TestUSIDServedKinds(t *testing.T) {
	const dynamic = "proxy: dynamic\n    inner: ipv6\n"
	for _, tc := range []struct {
		name, file   string
		edits        []string // from, to, from, to ...
		chain, encap string
		containers   int
	}{
		{"End.AD mid-container", "../../examples/default.yaml", nil, "firewalled", "encap.red", 1},
		{"End.AS mid-container", "../../examples/default.yaml", []string{dynamic, "proxy: static\n    inner: ipv6\n"}, "firewalled", "encap.red", 1},
		{"End.AM ends its container", "../../examples/default.yaml", []string{dynamic, "proxy: masquerading\n"}, "firewalled", "encap", 2},
		{"userspace mid-container", "../../examples/userspace.yaml", []string{"    function: \"0x5c\"\n", "", ", function: \"0x1d5\"", ""}, "accounted", "encap.red", 1},
		{"End.AN.NF without ARGS, mid-container", "../../examples/netfilter.yaml",
			[]string{"    function: \"0xf1\"\n", "", "    function: \"0xe0\"\n", "", "      args: 16\n", ""}, "filtered", "encap.red", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			for i := 0; i+1 < len(tc.edits); i += 2 {
				if !strings.Contains(s, tc.edits[i]) {
					t.Fatalf("%s: no %q", tc.file, tc.edits[i])
				}
				s = strings.Replace(s, tc.edits[i], tc.edits[i+1], 1)
			}
			s = regexp.MustCompile(`(?m)^name: .*$`).ReplaceAllString(s, "$0\nsid: {format: f3216}")
			d, err := config.Parse([]byte(s), filepath.Dir(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Build(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range p.Chains {
				if c.Name != tc.chain {
					continue
				}
				for _, h := range c.Hops {
					if h.Node != "ingress" && !netip.MustParsePrefix(config.DefaultUSIDBlock).Contains(h.SID) {
						t.Errorf("%s keeps a full SID %s", h.Service, h.SID)
					}
				}
				if c.Encap != tc.encap || len(c.Segments) != tc.containers {
					t.Errorf("pushed as %s %v, want %s with %d containers", c.Encap, c.Segments, tc.encap, tc.containers)
				}
				for _, n := range p.Nodes {
					for _, s := range n.Services {
						if s.Kind == "userspace" && !strings.Contains(string(s.Spec), `"usid":"32/16"`) {
							t.Errorf("userspace binding %s planned as %s: want usid 32/16", s.SID, s.Spec)
						}
					}
				}
				return
			}
			t.Fatalf("no chain %s", tc.chain)
		})
	}
}
