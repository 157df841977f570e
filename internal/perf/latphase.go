package perf

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// LatencyConfig tunes the latency phase: every arm at the same paced
// offered rate, interleaved like the sandwich (REF, X, REF, Y, …, REF,
// shuffled per round), each window's packets recorded in their template
// slot's histogram.
type LatencyConfig struct {
	// Rounds of REF, X, REF, Y, … REF.
	Rounds int
	// Settle after each template switch, Window measured.
	Settle, Window time.Duration
	// Rate offered (pps, > 0): latency at saturation is the time packets
	// wait in the full 256-entry ring, not the path's.
	Rate uint64
	// Seed of the per-round shuffle.
	Seed uint64
	// Sleep waits (time.Sleep when nil).
	Sleep func(time.Duration)
	// Tick is called after every measured window (progress bars).
	Tick func()
	// Trace, if set, receives every measured window (Valid "latency").
	Trace func(Window)
}

// Windows returns how many windows the phase measures for n arms.
func (c LatencyConfig) Windows(n int) int { return c.Rounds * (2*n + 1) }

// LatencyArm is one arm's latency over the phase.
type LatencyArm struct {
	Name string
	// Stamped is false when the arm's frames have no room for a stamp;
	// nothing else is then set.
	Stamped bool
	// Hist merges the arm's windows; Misses counts the packets that
	// reached the sink in its windows without a usable stamp.
	Hist   LatencyHist
	Misses LatencyMisses
	// Tx and Rx are the frames offered and delivered in its windows.
	Tx, Rx uint64
	// Dur is the time its windows lasted in total; Wait the time the SUT
	// thread spent runnable but not running in them (run-queue wait and
	// steal: its wake-ups, and co-runners on its CPU).
	Dur  time.Duration
	Wait uint64
	// AddedP50, AddedP99 per round: the arm's window percentile minus the
	// mean of its two REF neighbours' (empty for REF itself).
	AddedP50, AddedP99 []float64
}

// MeasureLatency measures per-packet latency of ref and every arm at
// c.Rate within one generator run. Stamping and recording are on only
// during this call; the generator is started and stopped here and left
// flat out (rate 0) with latency off. Arms whose frames carry no stamp
// are reported with Stamped false and not sent.
func MeasureLatency(d LatencyDriver, ref Arm, arms []Arm, c LatencyConfig) (LatencyArm, []LatencyArm, error) {
	if c.Rounds < 1 || c.Window <= 0 || c.Rate == 0 {
		return LatencyArm{}, nil, errors.New("latency: need rounds ≥ 1, a window > 0 and a rate > 0")
	}
	sleep := c.Sleep
	if sleep == nil {
		sleep = time.Sleep
	}
	refRes := LatencyArm{Name: ref.Name, Stamped: d.Stamped(ref.Slot)}
	res := make([]LatencyArm, len(arms))
	var live []int
	for i, a := range arms {
		res[i] = LatencyArm{Name: a.Name, Stamped: d.Stamped(a.Slot)}
		if res[i].Stamped {
			live = append(live, i)
		}
	}
	if !refRes.Stamped {
		return refRes, res, fmt.Errorf("latency: the reference %s has no room for a stamp", ref.Name)
	}
	gen := d.Generator()
	if err := gen.SetRate(c.Rate); err != nil {
		return refRes, res, err
	}
	if err := d.SetLatency(true); err != nil {
		return refRes, res, err
	}
	if err := gen.Select(ref.Slot); err != nil {
		return refRes, res, err
	}
	err := gen.Start()
	if err == nil {
		awaitStamped(d, ref.Slot, sleep)
		err = latencyRounds(d, ref, arms, live, c, sleep, &refRes, res)
		if serr := gen.Stop(); err == nil && serr != nil {
			err = fmt.Errorf("generator: %w", serr)
		}
	}
	err = errors.Join(err, d.SetLatency(false), gen.SetRate(0))
	return refRes, res, err
}

// awaitStamped waits (up to stampedWait) until the sink has recorded a
// stamped packet of slot. Frames reach the sink in the order they were
// sent, so by then every frame queued before stamping was on (up to a
// ring of 256, left by an earlier phase on a loaded host) has arrived,
// and none of them is counted as a miss in the first window. A sink that
// records nothing in time is left to the windows to report.
func awaitStamped(d LatencyDriver, slot int, sleep func(time.Duration)) {
	for waited := time.Duration(0); waited < stampedWait; waited += stampedPoll {
		if h, _, err := d.Latency(slot); err != nil || h.Count > 0 {
			return
		}
		sleep(stampedPoll)
	}
}

const (
	stampedWait = 2 * time.Second
	stampedPoll = time.Millisecond
)

func latencyRounds(d LatencyDriver, ref Arm, arms []Arm, live []int, c LatencyConfig, sleep func(time.Duration), refRes *LatencyArm, res []LatencyArm) error {
	gen := d.Generator()
	rng := rand.New(rand.NewPCG(c.Seed, 0x1a7e))
	round, seq := 0, 0
	// measure runs one window of slot and returns its histogram.
	measure := func(a Arm, into *LatencyArm) (LatencyHist, error) {
		if err := gen.Select(a.Slot); err != nil {
			return LatencyHist{}, err
		}
		sleep(c.Settle)
		h0, m0, err := d.Latency(a.Slot)
		if err != nil {
			return LatencyHist{}, err
		}
		s0, err := d.Sample()
		if err != nil {
			return LatencyHist{}, err
		}
		sleep(c.Window)
		h1, m1, err := d.Latency(a.Slot)
		if err != nil {
			return LatencyHist{}, err
		}
		s1, err := d.Sample()
		if err != nil {
			return LatencyHist{}, err
		}
		if c.Tick != nil {
			c.Tick()
		}
		w := h1.Sub(&h0)
		into.Hist.Add(&w)
		mm := m1.Sub(m0)
		for i := range into.Misses {
			into.Misses[i] += mm[i]
		}
		dl := s1.Sub(s0)
		into.Tx += dl.Tx
		into.Rx += dl.Rx
		into.Dur += dl.Dur
		into.Wait += dl.SUTWait + dl.SUTSteal
		if c.Trace != nil {
			c.Trace(Window{Round: round, Seq: seq, Arm: a.Name, Slot: a.Slot, Delta: dl, Valid: "latency",
				LatPackets: w.Count, LatP50: w.Quantile(0.5), LatP99: w.Quantile(0.99)})
		}
		seq++
		return w, nil
	}
	for round = 0; round < c.Rounds; round++ {
		order := append([]int(nil), live...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		prev, err := measure(ref, refRes)
		if err != nil {
			return err
		}
		for _, i := range order {
			x, err := measure(arms[i], &res[i])
			if err != nil {
				return err
			}
			next, err := measure(ref, refRes)
			if err != nil {
				return err
			}
			if x.Count > 0 && prev.Count > 0 && next.Count > 0 {
				for _, q := range []struct {
					p   float64
					dst *[]float64
				}{{0.5, &res[i].AddedP50}, {0.99, &res[i].AddedP99}} {
					refQ := (prev.Quantile(q.p) + next.Quantile(q.p)) / 2
					*q.dst = append(*q.dst, x.Quantile(q.p)-refQ)
				}
			}
			prev = next
		}
	}
	return nil
}

// LatencyResult is an arm's latency in a report (all times in ns).
type LatencyResult struct {
	// RatePPS is the offered rate of the latency phase, DeliveredPPS what
	// reached the sink.
	RatePPS      float64 `json:"rate_pps"`
	DeliveredPPS float64 `json:"delivered_pps"`
	// Packets recorded; Unstamped reached the sink in this arm's windows
	// without a usable stamp (not in the figures), by reason in Misses.
	Packets   uint64            `json:"packets"`
	Unstamped uint64            `json:"unstamped,omitempty"`
	Misses    map[string]uint64 `json:"misses,omitempty"`
	// Absolute latency from the generator's send to the sink: the
	// testbed's own share (generator flush, veth, NAPI wake-up) included.
	P50  float64 `json:"p50_ns"`
	P90  float64 `json:"p90_ns"`
	P99  float64 `json:"p99_ns"`
	P999 float64 `json:"p999_ns"`
	Max  float64 `json:"max_ns"`
	Mean float64 `json:"mean_ns"`
	// Added latency: this arm's figure minus the baseline's in the same
	// run (0 for the baseline itself): what the behaviour adds to plain
	// forwarding.
	AddedP50  float64 `json:"added_p50_ns"`
	AddedP99  float64 `json:"added_p99_ns"`
	AddedMean float64 `json:"added_mean_ns"`
	// AddedP50Rounds / AddedP99Rounds: the same per sandwich round (the
	// window's percentile minus its REF neighbours'), median and CI.
	AddedP50Rounds *Summary `json:"added_p50_rounds,omitempty"`
	AddedP99Rounds *Summary `json:"added_p99_rounds,omitempty"`
	// SUTWaitPerPacket (ns) is how long the SUT thread waited for its CPU
	// per delivered packet: on a quiet machine its wake-up delay (a few
	// µs at a paced rate); far more means co-runners on the SUT CPU, and
	// the latency is theirs as much as the path's.
	SUTWaitPerPacket float64 `json:"sut_wait_per_packet_ns,omitempty"`
	// NotMeasured says why there are no figures (e.g. no room for a stamp).
	NotMeasured string `json:"not_measured,omitempty"`
}

// Result sums an arm up against the reference arm (nil ref: the
// reference itself).
func (a LatencyArm) Result(rate uint64, ref *LatencyArm) *LatencyResult {
	if !a.Stamped {
		return &LatencyResult{RatePPS: float64(rate),
			NotMeasured: fmt.Sprintf("its frames have no room for a %d-byte stamp at the end of the innermost payload", stampLen)}
	}
	h := &a.Hist
	r := &LatencyResult{RatePPS: float64(rate), DeliveredPPS: perSecond(a.Rx, a.Dur),
		Packets: h.Count, Unstamped: a.Misses.Total(), Misses: a.Misses.Map(),
		P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99), P999: h.Quantile(0.999),
		Max: float64(h.MaxNs), Mean: h.MeanNs()}
	if a.Rx > 0 {
		r.SUTWaitPerPacket = float64(a.Wait) / float64(a.Rx)
	}
	if len(r.Misses) == 0 {
		r.Misses = nil
	}
	if h.Count == 0 {
		r.NotMeasured = "no stamped packet reached the sink"
		return r
	}
	if ref != nil && ref.Hist.Count > 0 {
		rh := &ref.Hist
		r.AddedP50 = r.P50 - rh.Quantile(0.5)
		r.AddedP99 = r.P99 - rh.Quantile(0.99)
		r.AddedMean = r.Mean - rh.MeanNs()
		if len(a.AddedP50) > 0 {
			s50, s99 := Summarize(a.AddedP50), Summarize(a.AddedP99)
			s50.Values, s99.Values = nil, nil
			r.AddedP50Rounds, r.AddedP99Rounds = &s50, &s99
		}
	}
	return r
}
