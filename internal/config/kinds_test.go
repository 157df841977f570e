package config

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service"
	"github.com/segchain/segchain/internal/service/kinds"
)

// demoBlock is the block of demoKind, a service kind this test registers
// to prove that a kind with a block of its own needs no field in Service.
type demoBlock struct {
	Level int      `yaml:"level" json:"level"`
	Tags  []string `yaml:"tags,omitempty" json:"tags,omitempty"`
}

func (*demoBlock) FieldDocs() map[string]string {
	return map[string]string{"Demo": "A demo kind.", "Demo.level": "Level 1..3.", "Demo.tags": "Tags.", "Service.demo": "demo only."}
}

type demoKind struct{}

func (demoKind) Name() string                  { return "demo" }
func (demoKind) Plural() string                { return "demos" }
func (demoKind) Noun() string                  { return "a demo" }
func (demoKind) Block() (string, any)          { return "demo", &demoBlock{} }
func (demoKind) MatchesArgs() bool             { return false }
func (demoKind) Behavior(service.Input) string { return "End.DEMO" }
func (demoKind) Validate(in service.Input) []service.FieldError {
	b, _ := in.Block.(*demoBlock)
	if b == nil {
		return []service.FieldError{service.Errorf("demo", "required for kind demo")}
	}
	var out []service.FieldError
	if b.Level < 1 || b.Level > 3 {
		out = append(out, service.Errorf("demo.level", "want 1..3, got %d", b.Level))
	}
	for i, t := range b.Tags {
		if t == "" {
			out = append(out, service.Errorf(fmt.Sprintf("demo.tags[%d]", i), "empty tag"))
		}
	}
	return out
}
func (demoKind) Plan(in service.Input) (nodestate.Service, error) {
	b, _ := json.Marshal(in.Block)
	return nodestate.Service{Kind: "demo", SID: in.Prefix, Spec: b}, nil
}
func (demoKind) Lines(s nodestate.Service) []string       { return []string{"demo " + s.SID.String()} }
func (demoKind) Canonical(s nodestate.Service) string     { return s.SID.String() + string(s.Spec) }
func (demoKind) ServiceBehavior(nodestate.Service) string { return "End.DEMO" }

// withDemoKind registers demoKind beside the real kinds for one test.
func withDemoKind(t *testing.T) {
	t.Helper()
	old := registry
	registry = func() *service.Registry {
		r, err := service.NewRegistry(append(kinds.Registry().Kinds(), demoKind{})...)
		if err != nil {
			panic(err)
		}
		return r
	}
	t.Cleanup(func() { registry = old })
}

const demoDomain = `
nodes:
  in:  {role: ingress, id: 1, locator: "fc00:1::/64"}
  nfv: {role: nfv, id: 2, locator: "fc00:2::/64"}
  out: {role: egress, id: 4, locator: "fc00:4::/64"}
links:
  - {endpoints: ["in:eth-nfv", "nfv:eth-in"], ipv6: "fc00:12::/64"}
  - {endpoints: ["nfv:eth-out", "out:eth-nfv"], ipv6: "fc00:24::/64"}
services:
%s
chains:
  c:
    ingress: in
    match: {dst: "fc00:99::/64"}
    services: [d]
    egress: {node: out, behavior: End.DX6, nh6: "fc00:24::99"}
`

// TestKindBlock: a registered kind's block decodes into Service.Blocks,
// its errors (structural and the kind's own) carry their paths, and the
// block on a service of another kind is refused.
func TestKindBlock(t *testing.T) {
	withDemoKind(t)
	tests := []struct {
		name    string
		svc     string
		wantErr []string // substrings, one per error
	}{
		{"valid", `  d: {node: nfv, kind: demo, demo: {level: 2, tags: [a]}}`, nil},
		{"unknown key in block", `  d: {node: nfv, kind: demo, demo: {level: 2, colour: red}}`,
			[]string{`services.d.demo.colour`, `unknown field "colour"`}},
		{"wrong type in block", `  d: {node: nfv, kind: demo, demo: {level: high}}`,
			[]string{`services.d.demo.level`, `want a number`}},
		{"kind's own errors", `  d: {node: nfv, kind: demo, demo: {level: 9, tags: [a, ""]}}`,
			[]string{`services.d.demo.level (line 10:44): want 1..3, got 9`, `services.d.demo.tags[1] (line 10:57): empty tag`}},
		{"block missing", `  d: {node: nfv, kind: demo}`, []string{`services.d.demo (line 10:6): required for kind demo`}},
		{"block on another kind", `  d: {node: nfv, behavior: End, demo: {level: 1}}`, []string{`services.d.demo (line 10:39): only for kind demo`}},
		{"endpoint params refused", `  d: {node: nfv, kind: demo, nh6: "fc00::1", demo: {level: 1}}`, []string{`services.d.nh6 (line 10:35): does not apply to kind demo`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(fmt.Sprintf(demoDomain, tt.svc)), t.TempDir())
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				b, ok := d.Services["d"].KindBlock().(*demoBlock)
				if !ok || b.Level != 2 || len(b.Tags) != 1 {
					t.Fatalf("block = %#v", d.Services["d"].KindBlock())
				}
				if got := d.Services["d"].EffectiveBehavior(); got != "End.DEMO" {
					t.Errorf("behaviour %q", got)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestKindBlockSchema: the schema and the reference describe a kind's
// block from its type and FieldDocs.
func TestKindBlockSchema(t *testing.T) {
	withDemoKind(t)
	b, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Defs map[string]struct {
			Properties map[string]map[string]any `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if ref := s.Defs["Service"].Properties["demo"]["$ref"]; ref != "#/$defs/Demo" {
		t.Errorf("Service.demo = %v, want a $ref to Demo", s.Defs["Service"].Properties["demo"])
	}
	if d := s.Defs["Demo"].Properties["level"]["description"]; d != "Level 1..3." {
		t.Errorf("Demo.level description %v", d)
	}
	if !strings.Contains(Reference(), "### Demo") {
		t.Error("reference lacks the Demo block")
	}
}
