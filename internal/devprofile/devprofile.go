package devprofile

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
)

// Env names a directory: when set, every segchain process writes a
// CPU profile of its run there (pprof format), for developers measuring
// the control plane (docs/benchmarks.md). A long-running process (the
// agent) starts a new file on SIGUSR1, so that the phases of a benchmark
// can be profiled apart: VERB-PID-N.pprof, with the heap profile at the
// end of each as VERB-PID-N.heap.
const Env = "SEGCHAIN_CPUPROFILE"

// Start starts the CPU profile when Env is set, naming the files after
// the first non-flag argument (the verb); the returned function ends it
// (a no-op otherwise).
func Start(args []string) func() {
	dir := os.Getenv(Env)
	if dir == "" {
		return func() {}
	}
	verb := "segchain"
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			verb = a
			break
		}
	}
	var (
		mu  sync.Mutex
		f   *os.File
		seq int
	)
	begin := func() {
		seq++
		name := filepath.Join(dir, fmt.Sprintf("%s-%d-%d.pprof", verb, os.Getpid(), seq))
		var err error
		if f, err = os.Create(name); err != nil {
			fmt.Fprintf(os.Stderr, "segchain: %s: %v\n", Env, err)
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "segchain: %s: %v\n", Env, err)
			f.Close()
			f = nil
		}
	}
	end := func() {
		if f != nil {
			pprof.StopCPUProfile()
			f.Close()
			f = nil
			// The heap as the phase left it, next to its CPU profile.
			name := filepath.Join(dir, fmt.Sprintf("%s-%d-%d.heap", verb, os.Getpid(), seq))
			if h, err := os.Create(name); err == nil {
				_ = pprof.Lookup("heap").WriteTo(h, 0)
				h.Close()
			}
		}
	}
	mu.Lock()
	begin()
	mu.Unlock()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for range sig {
			mu.Lock()
			end()
			begin()
			mu.Unlock()
		}
	}()
	return func() {
		signal.Stop(sig)
		mu.Lock()
		end()
		mu.Unlock()
	}
}
