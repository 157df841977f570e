package main

import (
	"io"
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

// TestPerfLimitFlags: bad flags are refused before any testbed is built.
func TestPerfLimitFlags(t *testing.T) {
	for _, args := range [][]string{{"--repeat", "0"}, {"--window", "0s"}, {"--size", "20"}} {
		cmd := newPerfLimitCmd()
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		if err := cmd.Execute(); err == nil {
			t.Errorf("perf limit %v: no error", args)
		}
	}
}
