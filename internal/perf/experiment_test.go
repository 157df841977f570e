package perf

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseExperiment(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string // substrings, all must appear
		check   func(t *testing.T, e *Experiment)
	}{
		{name: "defaults", yaml: "name: x\nbehaviors: [End]\n", check: func(t *testing.T, e *Experiment) {
			if diff := cmp.Diff([]int{64}, e.Sizes); diff != "" {
				t.Errorf("sizes (-want +got)\n%s", diff)
			}
			if e.Baseline != "IPv6" || e.Method != "sandwich" || e.Sandwich.Rounds != 40 || e.Sandwich.AALimit != 0.03 {
				t.Errorf("defaults not applied: %+v", e)
			}
			if e.Sandwich.Window.D() != 100*time.Millisecond || e.PDR.LossPercent != 2 {
				t.Errorf("defaults not applied: %+v", e)
			}
		}},
		{name: "durations", yaml: "name: x\nbehaviors: [End]\nsandwich: {window: 1s, settle: 5ms}\n", check: func(t *testing.T, e *Experiment) {
			if e.Sandwich.Window.D() != time.Second || e.Sandwich.Settle.D() != 5*time.Millisecond {
				t.Errorf("durations: %+v", e.Sandwich)
			}
		}},
		{name: "unknown field", yaml: "name: x\nbehaviors: [End]\nbehaviours: [End]\n", wantErr: []string{"behaviours", "not found"}},
		{name: "all errors listed", yaml: "behaviors: [End, End]\nsizes: [10]\nmethod: fast\n",
			wantErr: []string{"name: required", "behaviors[1]", "sizes[0]", "method"}},
		{name: "baseline listed", yaml: "name: x\nbehaviors: [IPv6]\n", wantErr: []string{"behaviors[0]"}},
		{name: "rule count 0", yaml: "name: x\nbehaviors: [End]\nrules: [0, 128]\n", check: func(t *testing.T, e *Experiment) {
			if diff := cmp.Diff([]int{0, 128}, e.Rules); diff != "" {
				t.Errorf("rules (-want +got)\n%s", diff)
			}
		}},
		{name: "mix", yaml: "name: x\nbehaviors: [End]\nsizes: [64, 576, 1356]\nmix: [7, 4, 1]\n", check: func(t *testing.T, e *Experiment) {
			if diff := cmp.Diff([]float64{7, 4, 1}, e.Mix); diff != "" {
				t.Errorf("mix (-want +got)\n%s", diff)
			}
		}},
		{name: "mix errors", yaml: "name: x\nbehaviors: [End]\nsizes: [64, 1357]\nmix: [7, -1, 1]\n",
			wantErr: []string{"sizes[1]: 1357 outside 48..1356", "mix[1]", "mix: 3 weights for 2 sizes"}},
		{name: "shape", yaml: "name: x\nbehaviors: [End]\nshape: 20mbit\nceiling: false\nlatency: {enabled: false}\n", check: func(t *testing.T, e *Experiment) {
			if e.Shape != "20mbit" {
				t.Errorf("shape %q", e.Shape)
			}
		}},
		{name: "shape errors", yaml: "name: x\nbehaviors: [End]\nshape: fast\n", wantErr: []string{"shape: \"fast\"", "needs ceiling: false"}},
		{name: "negative rule count", yaml: "name: x\nbehaviors: [End]\nrules: [1, -1]\n", wantErr: []string{"rules[1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseExperiment([]byte(tt.yaml))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, e)
		})
	}
}

// TestExamplesParse: every shipped experiment parses and names only
// registered recipes.
func TestRegistry(t *testing.T) {
	extra := nativeRecipe{name: "End.AS", desc: "from another package"}
	reg, err := NewRegistry(NativeRecipes()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(extra); err != nil {
		t.Fatalf("adding a new recipe: %v", err)
	}
	if _, err := reg.Get("End.AS"); err != nil {
		t.Error(err)
	}
	if err := reg.Add(extra); err == nil {
		t.Error("duplicate recipe accepted")
	}
	if _, err := reg.Get("End.Nope"); err == nil {
		t.Error("unknown recipe found")
	}
	names := []string{}
	for _, r := range reg.List() {
		names = append(names, r.Name())
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("List not sorted: %v", names)
		}
	}
}
