package perf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written as "300ms" in YAML and JSON.
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).String()), nil
}
func (d Duration) D() time.Duration { return time.Duration(d) }

// Inner packet sizes an experiment takes: MaxSize leaves room for the
// longest headers a recipe pushes (outer IPv6 + an SRH of six SIDs, 144
// bytes) within the lab's 1500-byte MTU, and the frame within the
// generator's template (PERF_TMPL_MAX).
const (
	MinSize = 48
	MaxSize = 1356
)

// shapeRate is a tc rate: digits and a unit.
var shapeRate = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$`)

// Experiment is an experiment file (examples/perf/*.yaml).
type Experiment struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Baseline is the reference behaviour of every ratio (default IPv6).
	Baseline string `yaml:"baseline,omitempty" json:"baseline"`
	// Behaviors measured against the baseline (recipe names).
	Behaviors []string `yaml:"behaviors" json:"behaviors"`
	// Sizes of the innermost IP packet (default [64]), MinSize..MaxSize.
	Sizes []int `yaml:"sizes,omitempty" json:"sizes"`
	// Mix weighs Sizes (one weight each) into a packet size mix, e.g.
	// IMIX: sizes [64, 576, 1356], mix [7, 4, 1]. Each size is measured
	// on its own; the report adds, per behaviour, the mix's SUT ns/packet
	// (Σ wᵢ·nsᵢ / Σ wᵢ over each size's median) and its ratio to the
	// baseline's (docs/benchmarks.md "Packet size mixes").
	Mix []float64 `yaml:"mix,omitempty" json:"mix,omitempty"`
	// Rules: rule counts for recipes that have rules (throughput vs rules).
	Rules []int `yaml:"rules,omitempty" json:"rules,omitempty"`
	// Method: "sandwich" (saturated, interleaved; default), "pdr", or "both".
	Method string `yaml:"method,omitempty" json:"method"`
	// Runs repeats the whole measurement (reproducibility across runs).
	Runs int `yaml:"runs,omitempty" json:"runs"`
	// Shape makes the SUT's output port a byte-bound wire: a tc tbf of
	// this rate (tc's syntax, e.g. 20mbit) on it for the whole run, every
	// arm and the baseline alike. Throughput is then bytes on the wire,
	// not CPU: a link-bound figure, labelled so in the report; measure it
	// with method pdr (the saturated sandwich keeps the SUT's CPU busy
	// with what tbf drops), ceiling and latency off: the rx counter then
	// counts at the tester's end of the wire (SinkWire). Empty: no
	// shaping.
	Shape string `yaml:"shape,omitempty" json:"shape,omitempty"`
	// Ceiling measures the testbed's limits first (default true).
	Ceiling *bool `yaml:"ceiling,omitempty" json:"ceiling"`

	Sandwich SandwichSpec `yaml:"sandwich,omitempty" json:"sandwich"`
	PDR      PDRSpec      `yaml:"pdr,omitempty" json:"pdr"`
	Latency  LatencySpec  `yaml:"latency,omitempty" json:"latency"`
}

// LatencySpec configures the latency phase (after the throughput
// measurement, every arm at one paced rate; docs/benchmarks.md).
type LatencySpec struct {
	// Enabled runs the phase (default true).
	Enabled *bool `yaml:"enabled,omitempty" json:"enabled"`
	// RatePPS is the offered rate of every arm (default 20000: below the
	// point where any behaviour here queues; see docs/benchmarks.md).
	RatePPS float64 `yaml:"rate_pps,omitempty" json:"rate_pps"`
	// Rounds of REF, X, REF, Y, … (default 10), each window Settle +
	// Window long (default 20 ms + 100 ms).
	Rounds int      `yaml:"rounds,omitempty" json:"rounds"`
	Settle Duration `yaml:"settle,omitempty" json:"settle"`
	Window Duration `yaml:"window,omitempty" json:"window"`
}

// On reports whether the latency phase runs.
func (l LatencySpec) On() bool { return l.Enabled == nil || *l.Enabled }

// SandwichSpec configures the saturated measurement.
type SandwichSpec struct {
	Rounds int      `yaml:"rounds,omitempty" json:"rounds"`
	Settle Duration `yaml:"settle,omitempty" json:"settle"`
	Window Duration `yaml:"window,omitempty" json:"window"`
	// AALimit rejects a run whose A/A median is further than this from 1.
	AALimit float64 `yaml:"aa_limit,omitempty" json:"aa_limit"`
	// AAMetric: which A/A control decides: throughput, cpu or both [both].
	AAMetric string `yaml:"aa_metric,omitempty" json:"aa_metric"`
	Seed     uint64 `yaml:"seed,omitempty" json:"seed"`
	// MinOverload: windows where the generator offered less than this
	// multiple of the delivered rate are disturbed (the generator lost its
	// CPU) and their round is replaced (default 1.1; negative disables).
	MinOverload float64 `yaml:"min_overload,omitempty" json:"min_overload"`
	// MaxRounds bounds the rounds including replacements (0: 3×rounds).
	MaxRounds int `yaml:"max_rounds,omitempty" json:"max_rounds"`
	// MaxLost: a window in which the SUT thread did not run for more than
	// this fraction of it (it waited behind other work, was stolen, or
	// idled) does not count for the throughput ratio; the CPU ratio keeps
	// it (default 0.05; negative disables).
	MaxLost float64 `yaml:"max_lost,omitempty" json:"max_lost"`
}

// PDRSpec configures the PDR/NDR search (fixed-rate trials).
type PDRSpec struct {
	// Loss threshold of the PDR in percent (0.5 = PDR@0.5%). On veth use
	// ≥ 2: the 256-entry NAPI ring drops on any stall (PERF-METHOD.md).
	LossPercent float64  `yaml:"loss_percent,omitempty" json:"loss_percent"`
	NDR         bool     `yaml:"ndr,omitempty" json:"ndr"`
	StartPPS    float64  `yaml:"start_pps,omitempty" json:"start_pps"`
	MaxPPS      float64  `yaml:"max_pps,omitempty" json:"max_pps"`
	EpsilonPPS  float64  `yaml:"epsilon_pps,omitempty" json:"epsilon_pps"`
	Repeats     int      `yaml:"repeats,omitempty" json:"repeats"`
	Trial       Duration `yaml:"trial,omitempty" json:"trial"`
	Warmup      Duration `yaml:"warmup,omitempty" json:"warmup"`
	// Searches per behaviour (mean/CV/CI over them).
	Searches int `yaml:"searches,omitempty" json:"searches"`
}

// defaultLatencyRate is the default offered rate of the latency phase.
const defaultLatencyRate = 20000

// LoadExperiment reads and validates an experiment file; unknown fields
// are errors.
func LoadExperiment(path string) (*Experiment, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read experiment: %w", err)
	}
	return ParseExperiment(b)
}

// ParseExperiment parses YAML, fills defaults and validates.
func ParseExperiment(b []byte) (*Experiment, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var e Experiment
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("parse experiment: %w", err)
	}
	e.Defaults()
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return &e, nil
}

// Defaults fills unset fields.
func (e *Experiment) Defaults() {
	if e.Baseline == "" {
		e.Baseline = "IPv6"
	}
	if len(e.Sizes) == 0 {
		e.Sizes = []int{64}
	}
	if e.Method == "" {
		e.Method = "sandwich"
	}
	if e.Runs == 0 {
		e.Runs = 1
	}
	if e.Ceiling == nil {
		t := true
		e.Ceiling = &t
	}
	s := &e.Sandwich
	// Short windows, many rounds: the load of a shared machine drifts on
	// a scale of 100 ms, so more, shorter sandwiches cancel more of it
	// (40 rounds of 20+100 ms gave CIs half as wide as 20 of 60+240 ms).
	if s.Rounds == 0 {
		s.Rounds = 40
	}
	if s.Settle == 0 {
		s.Settle = Duration(20 * time.Millisecond)
	}
	if s.Window == 0 {
		s.Window = Duration(100 * time.Millisecond)
	}
	if s.AALimit == 0 {
		s.AALimit = 0.03
	}
	if s.AAMetric == "" {
		s.AAMetric = "both"
	}
	if s.MinOverload == 0 {
		s.MinOverload = 1.1
	}
	if s.MaxLost == 0 {
		s.MaxLost = 0.05
	}
	l := &e.Latency
	if l.Enabled == nil {
		t := true
		l.Enabled = &t
	}
	if l.RatePPS == 0 {
		l.RatePPS = defaultLatencyRate
	}
	if l.Rounds == 0 {
		l.Rounds = 10
	}
	if l.Settle == 0 {
		l.Settle = Duration(20 * time.Millisecond)
	}
	if l.Window == 0 {
		l.Window = Duration(100 * time.Millisecond)
	}
	p := &e.PDR
	if p.LossPercent == 0 {
		p.LossPercent = 2
	}
	if p.StartPPS == 0 {
		p.StartPPS = 100e3
	}
	if p.MaxPPS == 0 {
		p.MaxPPS = 8e6
	}
	if p.EpsilonPPS == 0 {
		p.EpsilonPPS = 20e3
	}
	if p.Repeats == 0 {
		p.Repeats = 3
	}
	if p.Trial == 0 {
		p.Trial = Duration(time.Second)
	}
	if p.Warmup == 0 {
		p.Warmup = Duration(200 * time.Millisecond)
	}
	if p.Searches == 0 {
		p.Searches = 1
	}
}

// Validate reports every problem, each with its field path.
func (e *Experiment) Validate() error {
	var errs []error
	bad := func(path, f string, a ...any) { errs = append(errs, fmt.Errorf(path+": "+f, a...)) }
	if e.Name == "" {
		bad("name", "required")
	}
	if len(e.Behaviors) == 0 {
		bad("behaviors", "at least one behaviour")
	}
	seen := map[string]bool{e.Baseline: true}
	for i, b := range e.Behaviors {
		if seen[b] {
			bad(fmt.Sprintf("behaviors[%d]", i), "%q listed twice (or is the baseline)", b)
		}
		seen[b] = true
	}
	if arms := len(e.Behaviors) * max(1, len(e.Rules)); arms+2 > perfTmplSlots {
		bad("behaviors", "%d behaviour × rule-count combinations, at most %d per experiment (generator slots)", arms, perfTmplSlots-2)
	}
	for i, n := range e.Rules {
		if n < 0 { // 0: the recipe's rule set is there, empty (hooks without rules)
			bad(fmt.Sprintf("rules[%d]", i), "%d: want ≥ 0", n)
		}
	}
	for i, s := range e.Sizes {
		if s < MinSize || s > MaxSize {
			bad(fmt.Sprintf("sizes[%d]", i), "%d outside %d..%d", s, MinSize, MaxSize)
		}
	}
	if e.Shape != "" && !shapeRate.MatchString(e.Shape) {
		bad("shape", "%q: want a tc rate such as 20mbit or 500kbit", e.Shape)
	}
	if e.Shape != "" && (e.Ceiling == nil || *e.Ceiling || e.Latency.On()) {
		bad("shape", "needs ceiling: false and latency: {enabled: false} (both count at the SUT's port, before the wire)")
	}
	if len(e.Mix) > 0 {
		sum := 0.0
		for i, w := range e.Mix {
			if w < 0 {
				bad(fmt.Sprintf("mix[%d]", i), "%g: want a weight ≥ 0", w)
			}
			sum += w
		}
		if len(e.Mix) != len(e.Sizes) {
			bad("mix", "%d weights for %d sizes: want one weight per size", len(e.Mix), len(e.Sizes))
		} else if sum <= 0 {
			bad("mix", "the weights add up to %g: want > 0", sum)
		}
	}
	switch e.Method {
	case "sandwich", "pdr", "both":
	default:
		bad("method", "%q: want sandwich, pdr or both", e.Method)
	}
	switch e.Sandwich.AAMetric {
	case "both", "throughput", "cpu":
	default:
		bad("sandwich.aa_metric", "%q: want both, throughput or cpu", e.Sandwich.AAMetric)
	}
	if e.Sandwich.Rounds < 1 {
		bad("sandwich.rounds", "must be ≥ 1")
	}
	if e.Sandwich.MaxLost >= 1 {
		bad("sandwich.max_lost", "%g: want a fraction below 1 (negative disables)", e.Sandwich.MaxLost)
	}
	if e.Latency.RatePPS < 0 {
		bad("latency.rate_pps", "%g: want > 0", e.Latency.RatePPS)
	}
	if e.Latency.Rounds < 0 {
		bad("latency.rounds", "%d: want ≥ 1", e.Latency.Rounds)
	}
	if e.Latency.Window < 0 || e.Latency.Settle < 0 {
		bad("latency.window", "settle and window must not be negative")
	}
	if e.PDR.LossPercent < 0 || e.PDR.LossPercent >= 100 {
		bad("pdr.loss_percent", "must be in [0, 100)")
	}
	if e.PDR.StartPPS > e.PDR.MaxPPS {
		bad("pdr.start_pps", "above max_pps")
	}
	return errors.Join(errs...)
}
