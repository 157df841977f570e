package bpfpin

import (
	"sync"
	"time"
)

// Defunct scans every namespace's pin directory of a program and loads
// each of their TCX links: an apply that pins a program in a node runs
// it, so applying a fabric of N nodes scanned N directories N times
// (O(N²) syscalls; at 1,000 nodes most of an agent group's CPU in the
// apply from scratch). It collects garbage (a deleted namespace's pins),
// which can wait: a long-lived process (the agent) sweeps at most once
// a minute per program; a command still sweeps each time, and Stale (a
// namespace whose inode this one inherited: a correctness matter) is
// always checked.

var sweeps struct {
	mu    sync.Mutex
	every time.Duration
	last  map[string]time.Time
	scans int // tests
}

// SweepAtMost makes Defunct scan at most once per d for each program in
// this process (0: on every call, the default).
func SweepAtMost(d time.Duration) {
	sweeps.mu.Lock()
	sweeps.every = d
	sweeps.mu.Unlock()
}

// sweepDue reports whether Defunct scans for program now, and notes it.
func sweepDue(program string) bool {
	sweeps.mu.Lock()
	defer sweeps.mu.Unlock()
	now := time.Now()
	if sweeps.every > 0 {
		if at, ok := sweeps.last[program]; ok && now.Sub(at) < sweeps.every {
			return false
		}
	}
	if sweeps.last == nil {
		sweeps.last = map[string]time.Time{}
	}
	sweeps.last[program] = now
	sweeps.scans++
	return true
}
