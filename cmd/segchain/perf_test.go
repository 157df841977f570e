package main

import (
	"path/filepath"
	"testing"

	"github.com/segchain/segchain/internal/perf"
)

// TestPerfExamplesParse loads every experiment in examples/perf and checks
// each behaviour names a recipe of the CLI's registry (native, baselines and
// the proxies' recipes).
func TestPerfExamplesParse(t *testing.T) {
	files, err := filepath.Glob("../../examples/perf/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	reg, err := perfRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			e, err := perf.LoadExperiment(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range append([]string{e.Baseline}, e.Behaviors...) {
				if _, err := reg.Get(b); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
