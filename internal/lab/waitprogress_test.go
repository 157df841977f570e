package lab

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// lab up waits for agents by progress, not by a bound per agent: agents
// that come up one after another, the first-named last, each within the
// stall bound of the previous one, all pass although the first took
// longer than the bound; an agent that never starts fails with its name
// once nothing has started for the bound.
func TestWaitProgress(t *testing.T) {
	const stall = 300 * time.Millisecond
	start := time.Now()
	// "a" (first in order) comes up last, after 2 × stall in total.
	at := map[string]time.Duration{"b": stall * 2 / 3, "c": stall * 4 / 3, "a": 2 * stall}
	running := func(n string) bool { d, ok := at[n]; return ok && time.Since(start) >= d }
	var mu sync.Mutex
	var order []string
	ready := func(n string) error { mu.Lock(); order = append(order, n); mu.Unlock(); return nil }
	if err := waitProgress([]string{"a", "b", "c"}, stall, running, ready); err != nil {
		t.Fatalf("agents that kept coming up: %v", err)
	}
	if len(order) != 3 || order[0] != "b" || order[2] != "a" {
		t.Errorf("ready in order %v, want b, c, a (as they came up)", order)
	}

	start = time.Now()
	at = map[string]time.Duration{"b": 0}
	err := waitProgress([]string{"a", "b"}, stall, running, ready)
	var st stalled
	if !errors.As(err, &st) || st.node != "a" || st.left != 1 {
		t.Fatalf("an agent that never starts: %v, want stalled at a, 1 left", err)
	}
	if took := time.Since(start); took < stall {
		t.Errorf("gave up after %v, before the stall bound %v", took, stall)
	}

	boom := errors.New("no answer")
	start = time.Now()
	at = map[string]time.Duration{"a": 0}
	if err := waitProgress([]string{"a"}, stall, running, func(string) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("ready's error: got %v, want %v", err, boom)
	}
}

// startingNow counts the agents starting, not those running or backing
// off, nor a start older than StartingHold (one that hangs must not hold
// back the rest of a big lab's agents).
func TestStartingNow(t *testing.T) {
	now := time.Now()
	runs := map[string]*AgentRun{
		"a": {State: AgentStarting, Since: now.Add(-time.Second)},
		"b": {State: AgentStarting, Since: now.Add(-StartingHold - time.Second)},
		"c": {State: AgentRunning, Since: now},
		"d": {State: AgentBackoff, Since: now},
		"e": {State: AgentStarting, Since: now},
	}
	if got := startingNow(runs, now); got != 2 {
		t.Errorf("startingNow = %d, want 2 (a and e)", got)
	}
}
