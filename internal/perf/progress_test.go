package perf

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestBarETA: a run of 10 one-second steps behind 29 s of setup (testbed,
// programs, first rule set). The ETA must be the remaining steps at one
// second each, not inflated by the setup (the old estimator said 2m4s after
// two steps, with 8 s left).
func TestBarETA(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	var out bytes.Buffer
	b := &Bar{W: &out, Now: clk.now}
	b.Total(10)
	if _, ok := b.ETA(); ok {
		t.Error("ETA known before any step")
	}
	clk.advance(30 * time.Second) // 29 s setup + the first step
	b.Add(1)
	if _, ok := b.ETA(); ok {
		t.Error("ETA known after one step (no pace yet)")
	}
	for done := 2; done <= 10; done++ {
		clk.advance(time.Second)
		b.Add(1)
		eta, ok := b.ETA()
		if want := time.Duration(10-done) * time.Second; !ok || eta != want {
			t.Errorf("after %d steps: ETA %v (known %v), want %v", done, eta, ok, want)
		}
	}
	b.Finish()
	if !strings.Contains(out.String(), "100% 10/10 ETA 0s") {
		t.Errorf("final line: %q", out.String())
	}
	// A new Total starts a new pace.
	b.Total(4)
	clk.advance(5 * time.Second)
	b.Add(2)
	clk.advance(2 * time.Second)
	b.Add(1)
	if eta, ok := b.ETA(); !ok || eta != 2*time.Second {
		t.Errorf("second run: ETA %v (known %v), want 2s", eta, ok)
	}
}
