package config

import (
	"errors"
	"strings"
	"testing"
)

// TestSyntaxErrorPosition: a YAML syntax error is reported at the line and
// column where parsing stopped (yaml.v3 alone said the line before, without
// a column), and InFile names the file.
func TestSyntaxErrorPosition(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string
	}{
		{"name: x\nnodes:\n  s:\n    role: host\n   id: 3\n", "(line 5:4)"},
		{"name: x\nnodes: {a: 1\n", "(line 2:8)"},
		{"a: b: c\n", "(line 1:4)"},
	} {
		_, err := Parse([]byte(tc.yaml), ".")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s", tc.yaml, err, tc.want)
		}
		ferr := InFile("d.yaml", err)
		var list ErrorList
		if !strings.HasPrefix(ferr.Error(), "d.yaml: (file) "+tc.want) || !errors.As(ferr, &list) {
			t.Errorf("InFile: %v", ferr)
		}
	}
}
