// Command bench measures segchain's eBPF SR proxies against their
// baselines with the perf package's netns testbed and sandwich method
// (PERF-METHOD.md), until `segchain perf` registers proxyperf.Recipes:
//
//	go run ./test/proxy/bench -f test/proxy/bench/proxies.yaml
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/proxy"
	"github.com/segchain/segchain/internal/proxy/proxyperf"
)

func main() {
	file := flag.String("f", "test/proxy/bench/proxies.yaml", "experiment file")
	rounds := flag.Int("rounds", 0, "override sandwich rounds")
	out := flag.String("out", "", "directory for report files")
	debug := flag.String("debug", "", "set up this recipe, write its frame to /tmp/segchain-bench-frame and wait (no measurement)")
	flag.Parse()
	if *debug != "" {
		if err := debugRecipe(*debug); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*file, *rounds, *out); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(file string, rounds int, out string) error {
	exp, err := perf.LoadExperiment(file)
	if err != nil {
		return err
	}
	if rounds > 0 {
		exp.Sandwich.Rounds = rounds
	}
	reg, err := perf.NewRegistry(append(perf.NativeRecipes(), proxyperf.Recipes()...)...)
	if err != nil {
		return err
	}
	drv := perf.NewNetnsDriver(perf.NetnsOptions{GenCPU: 0, SUTCPU: 1})
	if err := drv.Up(); err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	defer drv.Down()
	// The recipes pin proxy state in the SUT: remove it before the SUT goes.
	_, sut := drv.Names()
	defer proxy.Remove(sut)
	r := &perf.Runner{Driver: drv, Registry: reg, Log: os.Stderr}
	rep, err := r.Run(exp)
	if err != nil {
		return err
	}
	if out != "" {
		if _, err := rep.WriteAll(out); err != nil {
			return err
		}
	}
	return rep.WriteMarkdown(os.Stdout)
}

// debugRecipe sets one recipe up on a fresh testbed and waits for Enter, so
// the SUT can be inspected and the frame replayed by hand.
func debugRecipe(name string) error {
	reg, err := perf.NewRegistry(append(perf.NativeRecipes(), proxyperf.Recipes()...)...)
	if err != nil {
		return err
	}
	r, err := reg.Get(name)
	if err != nil {
		return err
	}
	drv := perf.NewNetnsDriver(perf.NetnsOptions{GenCPU: 0, SUTCPU: 1})
	if err := drv.Up(); err != nil {
		return err
	}
	defer drv.Down()
	tester, sut := drv.Names()
	defer proxy.Remove(sut)
	if err := perf.PrepareSUT(drv.Env()); err != nil {
		return err
	}
	frame, err := r.Setup(drv.Env(), 1, perf.Params{Size: 64})
	if err != nil {
		return err
	}
	if err := os.WriteFile("/tmp/segchain-bench-frame", frame, 0o600); err != nil {
		return err
	}
	fmt.Printf("tester %s sut %s in %s out %s; frame in /tmp/segchain-bench-frame; Enter to tear down\n", tester, sut, drv.Env().In, drv.Env().Out)
	_, _ = fmt.Scanln()
	return nil
}
