package session

import (
	"runtime/debug"
	"sync"
	"testing"
)

// TestTuneGC: a command collects at GOGC=300 under a 768 MiB limit,
// unless the environment says otherwise.
func TestTuneGC(t *testing.T) {
	pct, lim := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(pct); debug.SetMemoryLimit(lim); gcOnce = sync.Once{} })

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	gcOnce = sync.Once{}
	debug.SetGCPercent(100)
	tuneGC()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC %d, want %d", got, gcPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != gcLimit {
		t.Errorf("memory limit %d, want %d", got, gcLimit)
	}

	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "1GiB")
	gcOnce = sync.Once{}
	debug.SetGCPercent(50)
	debug.SetMemoryLimit(1 << 30)
	tuneGC()
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("GOGC set by the environment: %d, want 50", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("GOMEMLIMIT set by the environment: %d, want 1 GiB", got)
	}
}
