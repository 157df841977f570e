package perf

import (
	"testing"
	"time"
)

// TestRunReportsLatency runs a short experiment on the netns testbed and
// checks every result carries latency figures: packets recorded, none
// unstamped, 0 < p50 ≤ p99 ≤ max, the baseline's added latency 0, and the
// A/A control's latency. No timing is asserted.
func TestRunReportsLatency(t *testing.T) {
	d := upTestbedNamed(t, "h16p-pf")
	reg, err := NewRegistry(NativeRecipes()...)
	if err != nil {
		t.Fatal(err)
	}
	e, err := ParseExperiment([]byte(`
name: latency-smoke
behaviors: [End, T.Encaps]
ceiling: false
sandwich: {rounds: 2, aa_metric: cpu, aa_limit: 0.9, min_overload: -1, max_lost: -1}
latency: {rounds: 2, rate_pps: 20000, settle: 10ms, window: 50ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := (&Runner{Driver: d, Registry: reg}).Run(e)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 3 {
		t.Fatalf("%d results, want 3", len(rep.Results))
	}
	check := func(name string, l *LatencyResult) {
		t.Helper()
		switch {
		case l == nil:
			t.Fatalf("%s: no latency in the report", name)
		case l.NotMeasured != "":
			t.Fatalf("%s: latency not measured: %s", name, l.NotMeasured)
		case l.Packets == 0:
			t.Errorf("%s: no packet recorded", name)
		case l.Unstamped > 0:
			// Every frame is stamped while latency is on, and the frames
			// queued before (a ring of 256, seen once under CI load) have
			// reached the sink before the first window (awaitStamped).
			t.Errorf("%s: %d packets without a stamp (%v), %d with one", name, l.Unstamped, l.Misses, l.Packets)
		case !(0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max):
			t.Errorf("%s: want 0 < p50 ≤ p99 ≤ p99.9 ≤ max, got %.0f %.0f %.0f %.0f", name, l.P50, l.P99, l.P999, l.Max)
		case l.RatePPS != 20000:
			t.Errorf("%s: rate %.0f, want 20000", name, l.RatePPS)
		}
	}
	for _, r := range rep.Results {
		check(r.Name, r.Latency)
		if r.Name != e.Baseline && r.Latency.AddedP50Rounds == nil {
			t.Errorf("%s: no per-round added latency", r.Name)
		}
	}
	if b := rep.Results[0].Latency; b.AddedP50 != 0 || b.AddedP99 != 0 {
		t.Errorf("baseline added latency %.0f/%.0f, want 0", b.AddedP50, b.AddedP99)
	}
	if len(rep.Controls) != 1 {
		t.Fatalf("%d controls, want 1", len(rep.Controls))
	}
	check("A/A", rep.Controls[0].Latency)
	// Latency is off again: the sink records nothing while the generator
	// runs flat out afterwards.
	before, _, err := d.Latency(0)
	if err != nil {
		t.Fatal(err)
	}
	gen := d.Generator()
	s0, err := d.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if err := gen.Stop(); err != nil {
		t.Fatal(err)
	}
	s1 := drained(t, d)
	if s1.Rx == s0.Rx {
		t.Fatal("nothing forwarded after the run")
	}
	after, _, err := d.Latency(0)
	if err != nil {
		t.Fatal(err)
	}
	if after.Count != before.Count {
		t.Errorf("latency off: the sink recorded %d packets (rx %d)", after.Count-before.Count, s1.Rx-s0.Rx)
	}
}
