package perf

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Report is the result of one experiment (`segchain perf run -o json`).
type Report struct {
	Experiment  string     `json:"experiment"`
	Description string     `json:"description,omitempty"`
	Baseline    string     `json:"baseline"`
	Method      string     `json:"method"`
	Testbed     string     `json:"testbed"`
	Kernel      string     `json:"kernel"`
	CPUs        int        `json:"cpus"`
	Started     time.Time  `json:"started"`
	Duration    Duration   `json:"duration"`
	Config      Experiment `json:"config"`
	// Ceilings are the testbed's limits (generator into XDP_DROP, into a
	// tc drop after the stack's skb + GRO), per run.
	Ceilings []Ceiling `json:"ceilings,omitempty"`
	// Controls are the A/A controls, one per run and size.
	Controls []Control `json:"controls,omitempty"`
	Results  []Result  `json:"results"`
	Skipped  []Skip    `json:"skipped,omitempty"`
	// Windows are the raw sandwich windows (windows.csv with --out; not
	// in the JSON, where they would dwarf the results).
	Windows []Window `json:"-"`
	// Valid is false when an A/A control drifted beyond the limit.
	Valid bool `json:"valid"`
}

// Ceiling is a measured testbed limit.
type Ceiling struct {
	Run  int `json:"run"`
	Size int `json:"size"`
	// GenPPS is what the generator sent while XDPDropPPS was measured
	// (more than XDPDropPPS when the SUT port's ring overflowed).
	GenPPS float64 `json:"gen_pps"`
	// XDPDropPPS is the physical limit: the generator into a native
	// XDP_DROP on the SUT's input port, run by the SUT CPU's NAPI thread;
	// frames are not rewritten when the generator can skip it (nothing
	// modifies them on this path).
	XDPDropPPS float64 `json:"xdp_drop_pps"`
	// XDPDropRewritePPS is the same with the per-frame template rewrite
	// that every stack SUT needs: the generator's limit as used in trials
	// (0 when the generator cannot skip the rewrite: then XDPDropPPS is it).
	XDPDropRewritePPS float64 `json:"xdp_drop_rewrite_pps,omitempty"`
	StackDropPPS      float64 `json:"stack_drop_pps"`
	// Window is how long each figure was measured (the median of 5
	// equal slices of it).
	Window Duration `json:"window,omitempty"`
	// XDPDropLatency and StackDropLatency are the testbed's own latency
	// at the latency phase's default rate, with the baseline's frame:
	// generator → native XDP_DROP on the SUT port (batch flush, veth, the
	// NAPI thread's wake-up) and → the SUT's stack and a tc ingress drop
	// (plus skb and GRO). Nil when the testbed cannot measure latency.
	XDPDropLatency   *LatencyResult `json:"xdp_drop_latency,omitempty"`
	StackDropLatency *LatencyResult `json:"stack_drop_latency,omitempty"`
}

// Control is an A/A control (baseline vs itself).
type Control struct {
	Run      int     `json:"run"`
	Size     int     `json:"size"`
	Ratio    Summary `json:"ratio"`
	CPURatio Summary `json:"cpu_ratio"`
	// Latency of the A/A arm: its added latency is the method's noise.
	Latency *LatencyResult `json:"latency,omitempty"`
	// Valid / CPUValid: the median is within aa_limit of 1.
	Valid    bool `json:"valid"`
	CPUValid bool `json:"cpu_valid"`
	// ThroughputInconclusive: fewer than a quarter of the control's rounds
	// (or fewer than 5) had the SUT thread on its CPU throughout; the
	// throughput ratios of this run are then the co-runners' more than
	// the SUT's and the throughput control does not judge (Valid false).
	ThroughputInconclusive bool `json:"throughput_inconclusive,omitempty"`
	// MedianBusy is the median fraction of the control's windows the SUT
	// thread ran (1 = it had its CPU to itself and work throughout).
	MedianBusy float64 `json:"median_busy,omitempty"`
}

// throughputConclusive says whether n undisturbed rounds of the wanted
// ones carry a throughput ratio (its CI then says how well).
func throughputConclusive(n, rounds int) bool { return n >= 5 && 4*n >= rounds }

// Result is one behaviour at one size (and rule count) in one run.
type Result struct {
	Name     string `json:"name"`
	Behavior string `json:"behavior"`
	Size     int    `json:"size"`
	Rules    int    `json:"rules,omitempty"`
	Run      int    `json:"run"`
	// Saturated (sandwich) figures.
	ThroughputPPS *Summary `json:"throughput_pps,omitempty"`
	// ThroughputDisturbed: no window of this arm had the SUT thread on its
	// CPU throughout, ThroughputPPS is over all saturated windows.
	ThroughputDisturbed bool     `json:"throughput_disturbed,omitempty"`
	NsPerPacket         *Summary `json:"ns_per_packet,omitempty"`
	// Ratio of throughput to the baseline measured in the same rounds;
	// CPURatio is the baseline's CPU ns/packet ÷ this one's, per round: the
	// throughput ratio with the SUT's CPU to itself.
	Ratio    *Summary `json:"ratio,omitempty"`
	CPURatio *Summary `json:"cpu_ratio,omitempty"`
	// PDR/NDR (fixed-rate trials); PDRRatio = PDR ÷ the baseline's PDR.
	PDRPPS   *Summary `json:"pdr_pps,omitempty"`
	NDRPPS   *Summary `json:"ndr_pps,omitempty"`
	PDRRatio float64  `json:"pdr_ratio,omitempty"`
	// DiscardedRounds were replaced because a window was not saturated.
	DiscardedRounds int `json:"discarded_rounds,omitempty"`
	// DisturbedRounds counted for CPURatio but not for Ratio: the SUT
	// thread lost its CPU in one of their windows (sandwich.max_lost).
	DisturbedRounds int           `json:"disturbed_rounds,omitempty"`
	Searches        []SearchTrace `json:"searches,omitempty"`
	// Latency at the latency phase's paced rate (absolute and added to
	// the baseline's), nil when the phase did not run.
	Latency *LatencyResult `json:"latency,omitempty"`
}

// SearchTrace keeps a search's steps (throughput vs input rate plots).
type SearchTrace struct {
	Kind string `json:"kind"` // pdr or ndr
	SearchResult
}

// Window is one measured sandwich window.
type Window struct {
	Run, Size int
	// Round of the sandwich and Seq, the window's position in the run.
	Round, Seq int
	Arm        string
	Slot       int
	Delta      Delta
	// Valid: "ok", or why the window's round did not count for the
	// throughput ratio (see SandwichConfig); "latency" for a window of the
	// latency phase.
	Valid string
	// LatPackets, LatP50, LatP99: a latency window's recorded packets and
	// percentiles (ns).
	LatPackets     uint64
	LatP50, LatP99 float64
}

// Skip is a behaviour that could not be measured, with the reason.
type Skip struct {
	Behavior string `json:"behavior"`
	Reason   string `json:"reason"`
}

// Runner runs experiments on a testbed that is already up.
type Runner struct {
	Driver   Driver
	Registry *Registry
	// Log receives progress lines (nil: discarded).
	Log io.Writer
	// Progress is told the total number of steps, then each step done.
	Progress Progress
}

// Progress reports progress (a progress bar with ETA in the CLI).
type Progress interface {
	Total(n int)
	Add(n int)
}

type nopProgress struct{}

func (nopProgress) Total(int) {}
func (nopProgress) Add(int)   {}

func (r *Runner) logf(f string, a ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, f+"\n", a...)
	}
}

type arm struct {
	Arm
	behavior string
	rules    int
}

// Run measures every behaviour of e. It configures the SUT (PrepareSUT
// and each recipe), then per run and size: the ceilings, the sandwich and
// the PDR searches as the method says.
func (r *Runner) Run(e *Experiment) (*Report, error) {
	if r.Progress == nil {
		r.Progress = nopProgress{}
	}
	rep := &Report{
		Experiment: e.Name, Description: e.Description, Baseline: e.Baseline, Method: e.Method,
		Testbed: r.Driver.Name(), Kernel: kernelRelease(), CPUs: runtime.NumCPU(),
		Started: time.Now().UTC(), Config: *e, Valid: true,
	}
	env := r.Driver.Env()
	if err := PrepareSUT(env); err != nil {
		return nil, err
	}
	if e.Shape != "" {
		// A byte-bound wire out of the SUT: a burst of two full frames,
		// a queue of 50 ms, which rides out short stalls of the SUT (tbf
		// drops the rest).
		if out, err := env.Run("tc", "qdisc", "replace", "dev", env.Out, "root", "tbf", "rate", e.Shape, "burst", "4kb", "latency", "50ms"); err != nil {
			return nil, fmt.Errorf("shape %s with tbf: %v: %s", env.Out, err, out)
		}
		defer env.Run("tc", "qdisc", "del", "dev", env.Out, "root")
		// Count what crossed the wire, not what entered its qdisc.
		if err := r.Driver.Sink(SinkWire); err != nil {
			return nil, err
		}
		defer r.Driver.Sink(SinkForward)
	}
	ruleCounts := e.Rules
	if len(ruleCounts) == 0 {
		ruleCounts = []int{0}
	}
	// Estimate the work for the progress bar.
	nArms := len(e.Behaviors) * len(ruleCounts)
	steps := 0
	if e.Method != "pdr" {
		steps += e.Sandwich.Rounds * (2*(nArms+1) + 1)
	}
	if e.Method != "sandwich" {
		// exponential + binary steps, roughly
		n := int(math.Log2(e.PDR.MaxPPS/e.PDR.StartPPS)) + int(math.Log2(e.PDR.MaxPPS/e.PDR.EpsilonPPS)) + 1
		mult := 1
		if e.PDR.NDR {
			mult = 2
		}
		steps += (nArms + 1) * n * e.PDR.Repeats * e.PDR.Searches * mult
	}
	if *e.Ceiling {
		steps += 5
	}
	if e.Latency.On() {
		steps += e.Latency.Rounds * (2*(nArms+1) + 1)
	}
	r.Progress.Total(steps * len(e.Sizes) * e.Runs)

	gen := r.Driver.Generator()
	k := 0
	index := map[string]int{}
	nextK := func(key string) int {
		if v, ok := index[key]; ok {
			return v
		}
		k++
		index[key] = k
		return k
	}
	for run := 1; run <= e.Runs; run++ {
		for _, size := range e.Sizes {
			p := Params{Size: size}
			base, err := r.Registry.Get(e.Baseline)
			if err != nil {
				return nil, err
			}
			frame, err := base.Setup(env, nextK(e.Baseline), p)
			if err != nil {
				return nil, fmt.Errorf("baseline: %w", err)
			}
			if err := gen.Load(0, frame); err != nil {
				return nil, err
			}
			if err := gen.Load(1, frame); err != nil { // the A/A control
				return nil, err
			}
			ref := Arm{Name: e.Baseline, Slot: 0}
			arms := []arm{{Arm: Arm{Name: "A/A", Slot: 1}, behavior: e.Baseline}}
			for _, b := range e.Behaviors {
				rec, err := r.Registry.Get(b)
				if err != nil {
					return nil, err
				}
				for _, rules := range ruleCounts {
					name := b
					if rules > 0 {
						name = fmt.Sprintf("%s/%d rules", b, rules)
					}
					p.Rules = rules
					frame, err := rec.Setup(env, nextK(name), p)
					if err != nil {
						if IsNotSupported(err) {
							if run == 1 && size == e.Sizes[0] {
								rep.Skipped = append(rep.Skipped, Skip{Behavior: name, Reason: err.Error()})
								r.logf("skip %s: %v", name, err)
							}
							continue
						}
						return nil, err
					}
					slot := len(arms) + 1
					if slot >= gen.MaxSlots() {
						return nil, fmt.Errorf("too many behaviours for %d generator slots", gen.MaxSlots())
					}
					if err := gen.Load(slot, frame); err != nil {
						return nil, err
					}
					arms = append(arms, arm{Arm: Arm{Name: name, Slot: slot}, behavior: b, rules: rules})
				}
			}
			if *e.Ceiling {
				c, err := r.ceiling(run, size)
				if err != nil {
					return nil, err
				}
				rep.Ceilings = append(rep.Ceilings, c)
				r.logf("run %d, %d B: physical limit (xdp-drop) %.0f pps, with rewrite %.0f pps, stack-drop %.0f pps",
					run, size, c.XDPDropPPS, c.XDPDropRewritePPS, c.StackDropPPS)
				if c.XDPDropLatency != nil && c.StackDropLatency != nil {
					r.logf("run %d, %d B: testbed latency floor p50 %.1f µs (xdp-drop), %.1f µs (stack-drop)",
						run, size, c.XDPDropLatency.P50/1e3, c.StackDropLatency.P50/1e3)
				}
			}
			results := make([]Result, len(arms)+1)
			results[0] = Result{Name: e.Baseline, Behavior: e.Baseline, Size: size, Run: run}
			for i, a := range arms {
				results[i+1] = Result{Name: a.Name, Behavior: a.behavior, Size: size, Rules: a.rules, Run: run}
			}
			if e.Method != "pdr" {
				if err := r.sandwich(e, rep, ref, arms, results, run, size); err != nil {
					return nil, err
				}
			}
			if e.Method != "sandwich" {
				if err := r.pdr(e, ref, arms, results); err != nil {
					return nil, err
				}
			}
			if e.Latency.On() {
				if err := r.latency(e, rep, ref, arms, results, run, size); err != nil {
					return nil, err
				}
			}
			// results[1] is the A/A control: reported in Controls only.
			rep.Results = append(rep.Results, results[0])
			rep.Results = append(rep.Results, results[2:]...)
		}
	}
	rep.Duration = Duration(time.Since(rep.Started).Round(time.Second))
	return rep, nil
}

func (r *Runner) sandwich(e *Experiment, rep *Report, ref Arm, arms []arm, results []Result, run, size int) error {
	plain := make([]Arm, len(arms))
	for i, a := range arms {
		plain[i] = a.Arm
	}
	cfg := SandwichConfig{
		Rounds: e.Sandwich.Rounds, Settle: e.Sandwich.Settle.D(), Window: e.Sandwich.Window.D(),
		Seed: e.Sandwich.Seed + uint64(run)*1000 + uint64(size), Tick: func() { r.Progress.Add(1) },
		MinOverload: max(e.Sandwich.MinOverload, 0), MaxRounds: e.Sandwich.MaxRounds,
		MaxLost: max(e.Sandwich.MaxLost, 0),
		Trace: func(w Window) {
			w.Run, w.Size = run, size
			rep.Windows = append(rep.Windows, w)
		},
	}
	r.logf("run %d, %d B: sandwich of %d behaviours, %d rounds", run, size, len(arms), cfg.Rounds)
	refRes, res, err := Sandwich(r.Driver, ref, plain, cfg)
	if err != nil {
		return fmt.Errorf("sandwich: %w", err)
	}
	set := func(dst *Result, a ArmResult, ratio bool) {
		ns := Summarize(a.NsPerPacket)
		dst.NsPerPacket = &ns
		if len(a.RxPPS) > 0 {
			tp := Summarize(a.RxPPS)
			dst.ThroughputPPS = &tp
		} else if len(a.RxAllPPS) > 0 {
			tp := Summarize(a.RxAllPPS)
			dst.ThroughputPPS, dst.ThroughputDisturbed = &tp, true
		}
		if ratio {
			cr := Summarize(a.CPURatio)
			dst.CPURatio = &cr
			if len(a.Ratio) > 0 {
				rt := Summarize(a.Ratio)
				dst.Ratio = &rt
			}
		}
	}
	set(&results[0], refRes, false)
	one := Summary{Mean: 1, Median: 1, CI95: [2]float64{1, 1}, Runs: len(refRes.RxPPS)}
	results[0].Ratio = &one
	oneNs := one
	oneNs.Runs = len(refRes.NsPerPacket)
	results[0].CPURatio = &oneNs
	for i, a := range res {
		set(&results[i+1], a, true)
		results[i+1].DiscardedRounds = a.Discarded
		results[i+1].DisturbedRounds = a.Disturbed
		if len(a.CPURatio) == 0 {
			return fmt.Errorf("sandwich: no saturated round for %s (the testbed is too disturbed)", a.Name)
		}
	}
	aaCPU := *results[1].CPURatio
	var aa Summary
	if results[1].Ratio != nil {
		aa = *results[1].Ratio
	}
	c := Control{Run: run, Size: size, Ratio: aa, CPURatio: aaCPU,
		Valid:      aa.Runs > 0 && math.Abs(aa.Median-1) <= e.Sandwich.AALimit,
		CPUValid:   math.Abs(aaCPU.Median-1) <= e.Sandwich.AALimit,
		MedianBusy: Median(res[0].Busy)}
	if !throughputConclusive(aa.Runs, len(res[0].CPURatio)) {
		c.ThroughputInconclusive, c.Valid = true, false
	}
	rep.Controls = append(rep.Controls, c)
	// "both": every metric that can judge must pass; the throughput
	// control cannot when the SUT thread was disturbed in most rounds.
	ok := c.CPUValid && (c.Valid || c.ThroughputInconclusive)
	switch e.Sandwich.AAMetric {
	case "throughput":
		ok = c.Valid
	case "cpu":
		ok = c.CPUValid
	}
	if c.ThroughputInconclusive {
		r.logf("run %d, %d B: throughput ratio not measurable: the SUT thread had its CPU to itself in %d of %d rounds (median busy %.0f%% of a window): other work shares its CPU; the CPU ratio is the figure",
			run, size, aa.Runs, len(res[0].CPURatio), 100*c.MedianBusy)
	}
	if !ok {
		rep.Valid = false
		r.logf("run %d, %d B: A/A control (throughput %.3f, cpu %.3f) is more than %.0f%% from 1: run rejected",
			run, size, aa.Median, aaCPU.Median, 100*e.Sandwich.AALimit)
	}
	return nil
}

// latency runs the latency phase and puts each arm's figures into its
// result (the A/A arm's into the run's control). A testbed that cannot
// measure latency is logged once, not an error.
func (r *Runner) latency(e *Experiment, rep *Report, ref Arm, arms []arm, results []Result, run, size int) error {
	ld, ok := r.Driver.(LatencyDriver)
	if !ok {
		if run == 1 && size == e.Sizes[0] {
			r.logf("latency: testbed %s cannot measure it; skipped", r.Driver.Name())
		}
		return nil
	}
	plain := make([]Arm, len(arms))
	for i, a := range arms {
		plain[i] = a.Arm
	}
	l := e.Latency
	cfg := LatencyConfig{Rounds: l.Rounds, Settle: l.Settle.D(), Window: l.Window.D(), Rate: uint64(l.RatePPS),
		Seed: e.Sandwich.Seed + uint64(run)*1000 + uint64(size) + 7, Tick: func() { r.Progress.Add(1) },
		Trace: func(w Window) {
			w.Run, w.Size = run, size
			rep.Windows = append(rep.Windows, w)
		}}
	r.logf("run %d, %d B: latency of %d behaviours at %.0f pps, %d rounds", run, size, len(arms), l.RatePPS, l.Rounds)
	refRes, res, err := MeasureLatency(ld, ref, plain, cfg)
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	results[0].Latency = refRes.Result(cfg.Rate, nil)
	for i, a := range res {
		results[i+1].Latency = a.Result(cfg.Rate, &refRes)
	}
	for i := len(rep.Controls) - 1; i >= 0; i-- {
		if c := &rep.Controls[i]; c.Run == run && c.Size == size {
			c.Latency = results[1].Latency
			break
		}
	}
	return nil
}

// trial offers rate pps on slot for one trial; the generator is running.
func (r *Runner) trial(slot int, spec PDRSpec) TrialFunc {
	return func(rate float64) (Delta, error) {
		gen := r.Driver.Generator()
		if err := gen.Select(slot); err != nil {
			return Delta{}, err
		}
		if err := gen.SetRate(uint64(rate)); err != nil {
			return Delta{}, err
		}
		time.Sleep(spec.Warmup.D())
		s0, err := r.Driver.Sample()
		if err != nil {
			return Delta{}, err
		}
		time.Sleep(spec.Trial.D())
		s1, err := r.Driver.Sample()
		r.Progress.Add(1)
		return s1.Sub(s0), err
	}
}

func (r *Runner) pdr(e *Experiment, ref Arm, arms []arm, results []Result) error {
	gen := r.Driver.Generator()
	if err := gen.Start(); err != nil {
		return err
	}
	defer gen.Stop()
	all := append([]Arm{ref}, func() []Arm {
		out := []Arm{}
		for _, a := range arms {
			out = append(out, a.Arm)
		}
		return out
	}()...)
	var basePDR float64
	for i, a := range all {
		if i == 1 { // the A/A control is a sandwich device
			continue
		}
		kinds := []float64{e.PDR.LossPercent / 100}
		if e.PDR.NDR {
			kinds = append(kinds, 0)
		}
		for _, loss := range kinds {
			var vals []float64
			for s := 0; s < e.PDR.Searches; s++ {
				res, err := FindPDR(r.trial(a.Slot, e.PDR), SearchConfig{
					Loss: loss, Start: e.PDR.StartPPS, Max: e.PDR.MaxPPS, Epsilon: e.PDR.EpsilonPPS, Repeats: e.PDR.Repeats,
				})
				if err != nil {
					return fmt.Errorf("%s: %w", a.Name, err)
				}
				kind := "pdr"
				if loss == 0 {
					kind = "ndr"
				}
				results[i].Searches = append(results[i].Searches, SearchTrace{Kind: kind, SearchResult: res})
				vals = append(vals, res.PDR())
				r.logf("%s: %s search [%.0f, %.0f] pps", a.Name, kind, res.Low, res.High)
			}
			s := Summarize(vals)
			if loss == 0 {
				results[i].NDRPPS = &s
			} else {
				results[i].PDRPPS = &s
				if i == 0 {
					basePDR = s.Mean
				} else if basePDR > 0 {
					results[i].PDRRatio = s.Mean / basePDR
				}
			}
		}
	}
	return nil
}

// ceiling measures the generator flat out into the XDP drop sink (without,
// then with the per-frame rewrite) and into the stack drop sink, then
// restores the forwarding sink.
func (r *Runner) ceiling(run, size int) (Ceiling, error) {
	return MeasureCeiling(r.Driver, run, size, ceilingWarmup, ceilingWindow, func() { r.Progress.Add(1) })
}

// Ceiling timing: the generator's first chunk sets up its page pool and
// the NAPI thread wakes; then a window cut in slices whose median rate is
// the figure (a co-runner taking either CPU for a while spoils a slice,
// not the figure).
const (
	ceilingWarmup = 300 * time.Millisecond
	ceilingWindow = time.Second
	ceilingSlices = 5
)

// MeasureCeiling measures the testbed's limits with template slot 0 (the
// baseline's frame): the physical limit (generator → native XDP_DROP on the
// SUT's input port) with the rewrite skipped if the generator can, the same
// with the rewrite, and the stack ceiling (→ skb + GRO + tc drop). The
// generator must be stopped; the forwarding sink is restored afterwards.
// tick (may be nil) is called after each figure.
func MeasureCeiling(d Driver, run, size int, warmup, window time.Duration, tick func()) (Ceiling, error) {
	c := Ceiling{Run: run, Size: size, Window: Duration(window)}
	gen := d.Generator()
	pg, canSkip := gen.(PristineGenerator)
	type step struct {
		sink     SinkKind
		pristine bool
		dst      *float64
	}
	steps := []step{{SinkXDPDrop, canSkip, &c.XDPDropPPS}}
	if canSkip {
		steps = append(steps, step{SinkXDPDrop, false, &c.XDPDropRewritePPS})
	}
	steps = append(steps, step{SinkStackDrop, false, &c.StackDropPPS})
	defer func() {
		if canSkip {
			_ = pg.SetPristine(false)
		}
	}()
	for _, st := range steps {
		if err := d.Sink(st.sink); err != nil {
			return c, err
		}
		if canSkip {
			if err := pg.SetPristine(st.pristine); err != nil {
				return c, err
			}
		}
		if err := gen.Select(0); err != nil {
			return c, err
		}
		if err := gen.SetRate(0); err != nil {
			return c, err
		}
		if err := gen.Start(); err != nil {
			return c, err
		}
		time.Sleep(warmup)
		var rx, tx []float64
		s0, err := d.Sample()
		for i := 0; i < ceilingSlices && err == nil; i++ {
			time.Sleep(window / ceilingSlices)
			var s1 Sample
			if s1, err = d.Sample(); err == nil {
				dl := s1.Sub(s0)
				rx, tx = append(rx, dl.RxPPS()), append(tx, dl.TxPPS())
				s0 = s1
			}
		}
		if err == nil {
			*st.dst = Median(rx)
			if st.dst == &c.XDPDropPPS {
				c.GenPPS = Median(tx)
			}
		}
		if serr := gen.Stop(); err == nil {
			err = serr
		}
		if err != nil {
			return c, fmt.Errorf("ceiling %s: %w", st.sink, err)
		}
		if tick != nil {
			tick()
		}
	}
	if ld, ok := d.(LatencyDriver); ok && ld.Stamped(0) {
		for _, st := range []struct {
			sink SinkKind
			dst  **LatencyResult
		}{{SinkXDPDrop, &c.XDPDropLatency}, {SinkStackDrop, &c.StackDropLatency}} {
			l, err := latencyFloor(ld, st.sink, warmup, window)
			if err != nil {
				return c, fmt.Errorf("latency floor %s: %w", st.sink, err)
			}
			*st.dst = l
			if tick != nil {
				tick()
			}
		}
	}
	return c, d.Sink(SinkForward)
}

// latencyFloor measures the latency of template slot 0 into sink k at
// the default latency rate: the testbed's own share of every latency.
func latencyFloor(d LatencyDriver, k SinkKind, warmup, window time.Duration) (*LatencyResult, error) {
	gen := d.Generator()
	if err := d.Sink(k); err != nil {
		return nil, err
	}
	if err := gen.Select(0); err != nil {
		return nil, err
	}
	if err := gen.SetRate(defaultLatencyRate); err != nil {
		return nil, err
	}
	if err := d.SetLatency(true); err != nil {
		return nil, err
	}
	a := LatencyArm{Name: k.String(), Stamped: true}
	err := gen.Start()
	if err == nil {
		time.Sleep(warmup)
		var h0, h1 LatencyHist
		var m0, m1 LatencyMisses
		var s0, s1 Sample
		if h0, m0, err = d.Latency(0); err == nil {
			if s0, err = d.Sample(); err == nil {
				time.Sleep(window / 2)
				if h1, m1, err = d.Latency(0); err == nil {
					s1, err = d.Sample()
				}
			}
		}
		a.Hist, a.Misses = h1.Sub(&h0), m1.Sub(m0)
		dl := s1.Sub(s0)
		a.Tx, a.Rx, a.Dur, a.Wait = dl.Tx, dl.Rx, dl.Dur, dl.SUTWait+dl.SUTSteal
		if serr := gen.Stop(); err == nil {
			err = serr
		}
	}
	err = errors.Join(err, d.SetLatency(false), gen.SetRate(0))
	if err != nil {
		return nil, err
	}
	return a.Result(defaultLatencyRate, nil), nil
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return strings.TrimRight(string(u.Release[:]), "\x00")
}
