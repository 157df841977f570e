package localsid

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLookup(t *testing.T) {
	tests := []struct{ in, want string }{
		{"End", "End"}, {"end", "End"}, {"END.DX6", "End.DX6"}, {"end.b6.encaps", "End.B6.Encaps"},
		{"End.B6.Insert", "End.B6"}, {"End.AS", ""}, {"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, CanonicalBehavior(tt.in)); diff != "" {
				t.Errorf("CanonicalBehavior(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestBehaviorExamples parses every example the manual prints: the help
// must never show a command that Parse rejects.
func TestBehaviorExamples(t *testing.T) {
	help := HelpTable(map[string]string{"End.AS": "End.AS oif DEV iif DEV nh4 IPV4"})
	for _, b := range Behaviors() {
		t.Run(b.Name, func(t *testing.T) {
			r, err := Parse(strings.Fields(b.Example))
			if err != nil {
				t.Fatalf("example %q: %v", b.Example, err)
			}
			if r.Seg6Local.Action != b.Name {
				t.Errorf("example %q parsed as %s", b.Example, r.Seg6Local.Action)
			}
			if !strings.Contains(help, b.Synopsis()) || !strings.Contains(help, "segchain sid add "+b.Example) {
				t.Errorf("help lacks %s's synopsis or example", b.Name)
			}
		})
	}
	if !strings.Contains(help, "End.AS oif DEV") {
		t.Errorf("help lacks the extension's behaviour")
	}
}
