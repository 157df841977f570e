package ids

import (
	"os"
	"strings"
	"testing"
)

// TestDocRules parses every rule docs/ids.md shows in a code block, so the
// manual cannot drift from the parser.
func TestDocRules(t *testing.T) {
	b, err := os.ReadFile("../../docs/ids.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	inBlock := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 || (f[0] != "alert" && f[0] != "drop" && f[0] != "pass") || !strings.Contains(line, "sid:") {
			continue
		}
		n++
		if _, err := ParseRule(line, map[string]string{"HOME_NET": "any"}); err != nil {
			t.Errorf("docs/ids.md:%d: %v", i+1, err)
		}
	}
	if n < 3 {
		t.Errorf("found %d rules in docs/ids.md, want at least 3", n)
	}
}
