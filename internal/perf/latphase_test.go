package perf

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// fakeLatDriver adds latency to the simulated testbed: while latency is
// on, every millisecond of virtual time records 20 packets of the active
// slot (20 kpps) with the testbed's floor — drifting over the run, like a
// machine whose load changes — plus the slot's own added latency and
// exponential jitter.
type fakeLatDriver struct {
	*fakeDriver
	floor     func(time.Duration) float64
	added     map[int]float64
	unstamped map[int]bool
	hist      [latSlots]LatencyHist
	on        bool
	switches  []bool
	rng       *rand.Rand
}

func (f *fakeLatDriver) SetLatency(on bool) error {
	f.on = on
	f.switches = append(f.switches, on)
	return nil
}
func (f *fakeLatDriver) Stamped(slot int) bool { return !f.unstamped[slot] }
func (f *fakeLatDriver) Latency(slot int) (LatencyHist, LatencyMisses, error) {
	return f.hist[slot], LatencyMisses{}, nil
}

func (f *fakeLatDriver) sleep(d time.Duration) {
	for ; d > 0; d -= time.Millisecond {
		if f.on {
			for i := 0; i < 20; i++ {
				v := f.floor(f.now) + f.added[f.active] + f.rng.ExpFloat64()*2000
				f.hist[f.active].Record(uint64(v))
			}
		}
		f.fakeDriver.sleep(min(d, time.Millisecond))
	}
}

// TestMeasureLatencyCancelsDrift: the testbed's floor doubles during the
// run (20 → 40 µs); the per-round added p50 — a window's p50 minus its two
// REF neighbours' — still finds each arm's own added latency, the A/A arm
// adds nothing, an arm without a stamp is not sent, and latency is on
// only during the call.
func TestMeasureLatencyCancelsDrift(t *testing.T) {
	base := &fakeDriver{capacity: map[int]float64{0: 1e6, 1: 1e6, 2: 6e5, 3: 7e5, 4: 7e5}, drift: func(time.Duration) float64 { return 1 }}
	f := &fakeLatDriver{fakeDriver: base, rng: rand.New(rand.NewPCG(5, 6)),
		floor:     func(t time.Duration) float64 { return 20000 + 20000*math.Min(1, t.Seconds()/4) },
		added:     map[int]float64{2: 1500, 3: 800},
		unstamped: map[int]bool{4: true}}
	arms := []Arm{{"A/A", 1}, {"End", 2}, {"T.Encaps", 3}, {"no-room", 4}}
	var windows []Window
	cfg := LatencyConfig{Rounds: 10, Settle: 20 * time.Millisecond, Window: 100 * time.Millisecond, Rate: 20000, Seed: 1,
		Sleep: f.sleep, Trace: func(w Window) { windows = append(windows, w) }}
	ref, res, err := MeasureLatency(f, Arm{"IPv6", 0}, arms, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.switches) != 2 || !f.switches[0] || f.switches[1] || f.on {
		t.Errorf("latency switched %v, want on then off", f.switches)
	}
	if want := cfg.Windows(3); len(windows) != want {
		t.Errorf("%d windows, want %d (the arm without a stamp is not sent)", len(windows), want)
	}
	for i, w := range windows {
		if (i%7%2 == 0) != (w.Arm == "IPv6") || w.Arm == "no-room" || w.Valid != "latency" || w.LatPackets == 0 {
			t.Fatalf("window %d: %+v: want REF, X, REF, Y, … with latency figures", i, w)
		}
	}
	if res[3].Stamped || res[3].Hist.Count != 0 || res[3].Result(20000, &ref).NotMeasured == "" {
		t.Errorf("arm without a stamp: %+v, want not measured", res[3])
	}
	want := map[string]float64{"A/A": 0, "End": 1500, "T.Encaps": 800}
	for _, a := range res[:3] {
		r := a.Result(20000, &ref)
		if len(a.AddedP50) != cfg.Rounds {
			t.Errorf("%s: %d rounds, want %d", a.Name, len(a.AddedP50), cfg.Rounds)
		}
		if got := r.AddedP50Rounds.Median; math.Abs(got-want[a.Name]) > 300 {
			t.Errorf("%s: added p50 per round %.0f ns, want %.0f ± 300 (the drift cancels)", a.Name, got, want[a.Name])
		}
		if math.Abs(r.AddedMean-want[a.Name]) > 1000 {
			t.Errorf("%s: added mean %.0f ns, want %.0f ± 1000", a.Name, r.AddedMean, want[a.Name])
		}
		if !(r.P50 <= r.P99 && r.P99 <= r.Max) || r.Packets == 0 {
			t.Errorf("%s: p50 %.0f p99 %.0f max %.0f packets %d", a.Name, r.P50, r.P99, r.Max, r.Packets)
		}
	}
	if r := ref.Result(20000, nil); r.AddedP50 != 0 || r.AddedP50Rounds != nil {
		t.Errorf("reference: added %.0f, rounds %v; want none", r.AddedP50, r.AddedP50Rounds)
	}
}

// countingLatDriver records slot 0's first stamped packet after a given
// number of reads (the frames queued before it still on their way).
type countingLatDriver struct {
	fakeLatDriver
	reads, stampedAt int
}

func (f *countingLatDriver) Latency(slot int) (LatencyHist, LatencyMisses, error) {
	f.reads++
	var h LatencyHist
	if f.stampedAt > 0 && f.reads >= f.stampedAt {
		h.Record(1000)
	}
	return h, LatencyMisses{}, nil
}

// The latency phase starts measuring only once the sink has seen a
// stamped packet (the ring queued before stamping was on has drained),
// and does not wait forever for one.
func TestAwaitStamped(t *testing.T) {
	for _, tc := range []struct {
		stampedAt int
		want      time.Duration
	}{
		{1, 0},
		{40, 39 * stampedPoll},
		{0, stampedWait}, // never
	} {
		f := &countingLatDriver{stampedAt: tc.stampedAt}
		var slept time.Duration
		awaitStamped(f, 0, func(d time.Duration) { slept += d })
		if slept != tc.want {
			t.Errorf("first stamped at read %d: waited %v, want %v", tc.stampedAt, slept, tc.want)
		}
	}
}
