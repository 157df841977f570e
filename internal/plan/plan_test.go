package plan

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGolden renders the plan of every example domain and compares it with
// testdata/<example>.golden (go test ./internal/plan -update rewrites them).
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example domains: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			d, err := config.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Build(d)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			p.Render(&buf)
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if diff := cmp.Diff(string(want), buf.String()); diff != "" {
				t.Errorf("plan differs from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestBuildIsDeterministic builds the default plan twice.
func TestBuildIsDeterministic(t *testing.T) {
	d, err := config.Load("../../examples/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	p1, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	p1.Render(&a)
	p2, _ := Build(d)
	p2.Render(&b)
	if a.String() != b.String() {
		t.Error("two builds of the same domain differ")
	}
}
