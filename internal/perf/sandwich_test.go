package perf

import (
	"math"
	"testing"
	"time"
)

// fakeDriver is a simulated testbed on a virtual clock: the SUT forwards
// each slot's capacity × a slowly drifting machine speed (the steal and
// shared-CPU swings of PERF-METHOD.md), spending ns/packet inversely.
type fakeDriver struct {
	capacity map[int]float64 // slot → pps at speed 1
	drift    func(t time.Duration) float64
	// starve: the generator gets no CPU, offers only what the SUT takes
	// at a fraction of its speed.
	starve func(t time.Duration) bool
	// share: the fraction of its CPU the SUT thread gets (a co-runner
	// takes the rest; nil = all of it).
	share  func(t time.Duration) float64
	now    time.Duration
	wait   float64
	active int
	rx, tx float64
	cpu    float64
}

func (f *fakeDriver) Name() string           { return "fake" }
func (f *fakeDriver) Up() error              { return nil }
func (f *fakeDriver) Down() error            { return nil }
func (f *fakeDriver) Env() *Env              { return &Env{} }
func (f *fakeDriver) Generator() Generator   { return fakeGen{f} }
func (f *fakeDriver) Sink(SinkKind) error    { return nil }
func (f *fakeDriver) Load(int, []byte) error { return nil }
func (f *fakeDriver) sleep(d time.Duration) {
	// integrate in 1 ms steps
	for step := time.Millisecond; d > 0; d -= step {
		s := min(step, d)
		pps := f.capacity[f.active] * f.drift(f.now)
		sh := 1.0
		if f.share != nil {
			sh = f.share(f.now)
		}
		pps *= sh
		if f.starve != nil && f.starve(f.now) {
			pps *= 0.3 // a starved generator: not the SUT's capacity
			f.rx += pps * s.Seconds()
			f.tx += pps * s.Seconds()
		} else {
			f.rx += pps * s.Seconds()
			f.tx += 8e6 * s.Seconds()
		}
		f.cpu += sh * s.Seconds() * 1e9 // the SUT thread is saturated while it runs
		f.wait += (1 - sh) * s.Seconds() * 1e9
		f.now += s
	}
}

func (f *fakeDriver) Sample() (Sample, error) {
	return Sample{At: time.Unix(0, 0).Add(f.now), Tx: uint64(f.tx), Rx: uint64(f.rx), SUTCPU: uint64(f.cpu), SUTWait: uint64(f.wait)}, nil
}

type fakeGen struct{ f *fakeDriver }

func (g fakeGen) Load(int, []byte) error { return nil }
func (g fakeGen) MaxSlots() int          { return 32 }
func (g fakeGen) Select(s int) error     { g.f.active = s; return nil }
func (g fakeGen) SetRate(uint64) error   { return nil }
func (g fakeGen) Start() error           { return nil }
func (g fakeGen) Stop() error            { return nil }

func TestSandwichCancelsDrift(t *testing.T) {
	steady := func(time.Duration) float64 { return 1 }
	tests := []struct {
		name        string
		drift       func(time.Duration) float64
		starve      func(time.Duration) bool
		share       func(time.Duration) float64
		wantDiscard bool
		// wantDisturbed: some rounds leave the throughput ratio (a
		// co-runner took the SUT's CPU) but still count for the CPU ratio.
		wantDisturbed bool
	}{
		{name: "steady", drift: steady},
		// ±40% swing with a 7 s period: blocked trials would be useless.
		{name: "swinging", drift: func(t time.Duration) float64 { return 1 + 0.4*math.Sin(t.Seconds()*2*math.Pi/7) }},
		// The generator starves 0.5 s of every 4 s: those rounds are
		// discarded and replaced.
		{name: "starved", drift: steady, wantDiscard: true,
			starve: func(t time.Duration) bool { return math.Mod(t.Seconds(), 4) < 0.5 }},
		// A co-runner takes 30–70% of the SUT's CPU in bursts (1.3 s of
		// every 3.1 s, the share varying within the burst): the throughput
		// of those windows is the co-runner's doing and would scatter the
		// ratio; the CPU ratio is immune.
		{name: "co-runner", drift: steady, wantDisturbed: true,
			share: func(t time.Duration) float64 {
				if math.Mod(t.Seconds(), 3.1) < 1.3 {
					return 0.5 + 0.2*math.Sin(t.Seconds()*17)
				}
				return 1
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeDriver{capacity: map[int]float64{0: 1e6, 1: 1e6, 2: 0.74e6, 3: 0.85e6}, drift: tt.drift, starve: tt.starve, share: tt.share}
			arms := []Arm{{"A/A", 1}, {"End", 2}, {"T.Encaps", 3}}
			ticks := 0
			cfg := SandwichConfig{Rounds: 20, Settle: 60 * time.Millisecond, Window: 240 * time.Millisecond, Seed: 3, Sleep: f.sleep, Tick: func() { ticks++ }, MinOverload: 1.1, MaxLost: 0.05}
			_, res, err := Sandwich(f, Arm{"IPv6", 0}, arms, cfg)
			if err != nil {
				t.Fatal(err)
			}
			discarded, disturbed := 0, 0
			for _, r := range res {
				discarded += r.Discarded
				disturbed += r.Disturbed
			}
			if tt.wantDisturbed != (disturbed > 0) {
				t.Errorf("%d rounds disturbed, want some: %v", disturbed, tt.wantDisturbed)
			}
			if tt.wantDiscard != (discarded > 0) {
				t.Errorf("%d rounds discarded, want some: %v", discarded, tt.wantDiscard)
			}
			if !tt.wantDiscard && ticks != cfg.Windows(len(arms)) {
				t.Errorf("ticks %d, want %d", ticks, cfg.Windows(len(arms)))
			}
			for i, want := range []float64{1, 0.74, 0.85} {
				s := Summarize(res[i].Ratio)
				if s.Runs+res[i].Disturbed != 20 || len(res[i].CPURatio) != 20 {
					t.Errorf("%s: %d+%d throughput and %d cpu rounds, want 20", res[i].Name, s.Runs, res[i].Disturbed, len(res[i].CPURatio))
				}
				if math.Abs(s.Median-want) > 0.02*want {
					t.Errorf("%s: ratio %.3f, want %.3f ± 2%%", res[i].Name, s.Median, want)
				}
				if s.CI95[0] > want*1.02 || s.CI95[1] < want*0.98 {
					t.Errorf("%s: CI95 %v misses %.3f", res[i].Name, s.CI95, want)
				}
				cpu := Summarize(res[i].CPURatio)
				if math.Abs(cpu.Median-want) > 0.02*want {
					t.Errorf("%s: cpu ratio %.3f, want %.3f", res[i].Name, cpu.Median, want)
				}
			}
		})
	}
}
