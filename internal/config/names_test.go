package config

import (
	"os"
	"strings"
	"testing"
)

// TestBehaviorNamesAnyCase: a domain file takes behaviour names in any case,
// as segchain sid does, and they come out in iproute2 spelling.
func TestBehaviorNamesAnyCase(t *testing.T) {
	b, err := os.ReadFile("../../examples/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lower := strings.NewReplacer("behavior: End.DX6", "behavior: end.dx6", "behavior: End", "behavior: end").Replace(string(b))
	if lower == string(b) {
		t.Fatal("examples/default.yaml names no End behaviour any more: update the test")
	}
	d, err := Parse([]byte(lower), "../../examples")
	if err != nil {
		t.Fatalf("lower-case behaviours rejected: %v", err)
	}
	for name, s := range d.Services {
		if s.Behavior != "" && s.Behavior != canonicalBehavior(strings.ToUpper(s.Behavior)) {
			t.Errorf("service %s: behavior %q not in iproute2 spelling", name, s.Behavior)
		}
		if strings.HasPrefix(s.Behavior, "end") {
			t.Errorf("service %s: behavior %q kept its lower case", name, s.Behavior)
		}
	}
}
