package health

import (
	"math/rand/v2"
	"testing"
	"time"
)

// world is a made-up host for the detector: when the path answers probe
// seq sent at t (never: a failed instance), and how late the checker
// wakes at a planned instant.
type world struct {
	answer func(seq uint64, sent time.Time) (time.Time, bool)
	wake   func(planned time.Time) time.Time
}

type simResult struct {
	downAt  time.Time // the first down transition (zero: none)
	ups     int       // up transitions
	downs   int
	results int
}

// simulate runs probeLoop's schedule (send every interval, wake at the
// next send or the oldest deadline, read answers that arrived by then,
// judge, count rise/fall) on a virtual clock from t0 until end.
func simulate(spec Spec, w world, t0, end time.Time) simResult {
	spec = spec.withDefaults()
	d := newDetector(spec)
	type ans struct {
		seq uint64
		at  time.Time
	}
	var inflight []ans
	var r simResult
	up, okRun, failRun := true, 0, 0
	var seq uint64
	next, planned := t0, t0
	now := t0
	for now.Before(end) {
		kept := inflight[:0]
		for _, a := range inflight {
			if !a.at.After(now) {
				d.answer(a.seq, a.at)
			} else {
				kept = append(kept, a)
			}
		}
		inflight = kept
		for _, res := range d.due(now, now.Sub(planned)) {
			r.results++
			if res.ok {
				okRun, failRun = okRun+1, 0
			} else {
				okRun, failRun = 0, failRun+1
			}
			switch {
			case up && failRun >= spec.Fall:
				up = false
				r.downs++
				if r.downAt.IsZero() {
					r.downAt = now
				}
			case !up && okRun >= spec.Rise:
				up = true
				r.ups++
			}
		}
		if !now.Before(next) {
			seq++
			d.sent(seq, now)
			if at, ok := w.answer(seq, now); ok {
				inflight = append(inflight, ans{seq, at})
			}
			next = next.Add(spec.Interval)
			if !next.After(now) {
				next = now.Add(spec.Interval)
			}
		}
		planned = next
		if dl := d.next(); !dl.IsZero() && dl.Before(planned) {
			planned = dl
		}
		now = w.wake(planned)
	}
	return r
}

var t0 = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

func onTime(p time.Time) time.Time { return p.Add(50 * time.Microsecond) }

// rttOf answers after rtt(seq) unless the instance failed at failAt.
func rttOf(failAt time.Time, rtt func() time.Duration) func(uint64, time.Time) (time.Time, bool) {
	return func(_ uint64, sent time.Time) (time.Time, bool) {
		if !failAt.IsZero() && !sent.Before(failAt) {
			return time.Time{}, false
		}
		at := sent.Add(rtt())
		if !failAt.IsZero() && !at.Before(failAt) {
			return time.Time{}, false // in flight when it failed
		}
		return at, true
	}
}

// On an idle host (RTT 80 µs, the checker on time) a failure is found
// within interval × (fall + 1) with the defaults, as before: 30 ms.
func TestDetectorIdle(t *testing.T) {
	fail := t0.Add(2*time.Second + 3*time.Millisecond)
	r := simulate(Spec{}, world{answer: rttOf(fail, func() time.Duration { return 80 * time.Microsecond }), wake: onTime}, t0, t0.Add(3*time.Second))
	if r.downs != 1 || r.ups != 0 {
		t.Fatalf("%d downs %d ups, want 1 down", r.downs, r.ups)
	}
	if got := r.downAt.Sub(fail); got > 3*DefaultInterval+time.Millisecond {
		t.Errorf("found %v after the failure, want ≤ 30 ms", got)
	}
}

// A checker that wakes up to 40 ms late (its process starved) while the
// path answers in 100 µs: no failure at all (the answers are read with
// their kernel times before judging). The old detector — judge probe n
// at the next tick, whatever was read by then — took such instances down.
func TestDetectorLateChecker(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	late := func(p time.Time) time.Time { return p.Add(time.Duration(rng.Int64N(int64(40 * time.Millisecond)))) }
	r := simulate(Spec{}, world{answer: rttOf(time.Time{}, func() time.Duration { return 100 * time.Microsecond }), wake: late}, t0, t0.Add(60*time.Second))
	if r.downs != 0 {
		t.Fatalf("%d false downs with a late checker", r.downs)
	}
	// A real failure is still found: each of the fall+1 intervals may
	// start 40 ms late, and the late wake gives one more timeout.
	fail := t0.Add(5 * time.Second)
	r = simulate(Spec{}, world{answer: rttOf(fail, func() time.Duration { return 100 * time.Microsecond }), wake: late}, t0, t0.Add(6*time.Second))
	if r.downs != 1 {
		t.Fatalf("%d downs after a real failure, want 1", r.downs)
	}
	if got := r.downAt.Sub(fail); got > 3*(DefaultInterval+40*time.Millisecond)+DefaultInterval {
		t.Errorf("found %v after the failure", got)
	}
}

// The host stalls now and then (every 20th probe, 30 ms, just after it
// was sent): the checker and the path both stop; the answer in flight
// lands just after the checker wakes from the same stall. The late
// wake-up gives it one more timeout: no false down, even with fall 1.
// Without that grace the answer in flight through a stall is counted
// lost.
func TestDetectorHostStalls(t *testing.T) {
	type window struct{ from, to time.Time }
	var stalls []window
	in := func(at time.Time) (time.Time, bool) {
		for _, w := range stalls {
			if !at.Before(w.from) && at.Before(w.to) {
				return w.to, true
			}
		}
		return at, false
	}
	w := world{
		answer: func(seq uint64, sent time.Time) (time.Time, bool) {
			if seq%20 == 0 {
				stalls = append(stalls, window{sent.Add(100 * time.Microsecond), sent.Add(30 * time.Millisecond)})
				return sent.Add(31 * time.Millisecond), true
			}
			return sent.Add(300 * time.Microsecond), true
		},
		wake: func(p time.Time) time.Time {
			if end, ok := in(p); ok {
				return end.Add(50 * time.Microsecond)
			}
			return p.Add(50 * time.Microsecond)
		},
	}
	r := simulate(Spec{Fall: 1}, w, t0, t0.Add(30*time.Second))
	if r.downs != 0 || len(stalls) < 100 {
		t.Fatalf("%d false downs with %d host stalls (fall 1)", r.downs, len(stalls))
	}
}

// A path that slows (RTT 8 ms ± 3 ms, a loaded host's forwarding) after
// 1 s at 100 µs: the timeout follows the RTT, no false down; a fixed
// timeout of one interval took it down. A failure is still found within
// the ceiling.
func TestDetectorSlowPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	rtt := func(now func() time.Time) func() time.Duration {
		return func() time.Duration {
			if now().Before(t0.Add(time.Second)) {
				return 100 * time.Microsecond
			}
			return max(time.Duration(8e6+3e6*rng.NormFloat64()), 500*time.Microsecond)
		}
	}
	var clock time.Time
	w := func(fail time.Time) world {
		return world{answer: func(s uint64, sent time.Time) (time.Time, bool) {
			clock = sent
			return rttOf(fail, rtt(func() time.Time { return clock }))(s, sent)
		}, wake: onTime}
	}
	r := simulate(Spec{}, w(time.Time{}), t0, t0.Add(60*time.Second))
	if r.downs != 0 {
		t.Fatalf("%d false downs on a slow path", r.downs)
	}
	fail := t0.Add(10 * time.Second)
	r = simulate(Spec{}, w(fail), t0, t0.Add(11*time.Second))
	if r.downs != 1 {
		t.Fatalf("%d downs after a real failure, want 1", r.downs)
	}
	if got := r.downAt.Sub(fail); got > 2*DefaultInterval+ceilFactor*DefaultInterval {
		t.Errorf("found %v after the failure", got)
	}
	t.Logf("slow path: found %v after the failure", r.downAt.Sub(fail))
}
