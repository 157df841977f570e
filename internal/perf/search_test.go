package perf

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// simSUT is a simulated SUT with a known capacity: below it, a small loss
// that grows with load (like Linux's, thesis Fig. 5.3); above it, it
// forwards exactly its capacity. Noise perturbs each trial.
type simSUT struct {
	capacity  float64 // pps
	baseLoss  float64 // loss ratio at capacity from the linear region
	noise     float64 // relative stddev of each trial's throughput
	rng       *rand.Rand
	outlierEv int // every Nth trial loses half its packets (0 = never)
	trials    int
}

func (s *simSUT) trial(rate float64) (Delta, error) {
	s.trials++
	out := math.Min(rate, s.capacity) * (1 - s.baseLoss*math.Min(rate/s.capacity, 1))
	out *= 1 + s.noise*s.rng.NormFloat64()
	if s.outlierEv > 0 && s.trials%s.outlierEv == 0 {
		out /= 2
	}
	out = math.Max(0, math.Min(out, rate))
	return Delta{Dur: time.Second, Tx: uint64(rate), Rx: uint64(out)}, nil
}

// trueLimit is the highest rate whose noiseless delivery ratio is ≥ 1−loss.
func (s *simSUT) trueLimit(loss float64) float64 {
	lo, hi := 0.0, 100*s.capacity
	for hi-lo > 1e-3 {
		m := (lo + hi) / 2
		out := math.Min(m, s.capacity) * (1 - s.baseLoss*math.Min(m/s.capacity, 1))
		if out/m >= 1-loss {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

func TestFindPDRBracketsCapacity(t *testing.T) {
	tests := []struct {
		name string
		sut  simSUT
		cfg  SearchConfig
	}{
		{"ndr-noiseless", simSUT{capacity: 1.2e6}, SearchConfig{Loss: 0, Start: 1e5, Max: 12e6, Epsilon: 1e4, Repeats: 1}},
		{"pdr0.5-lossy", simSUT{capacity: 901e3, baseLoss: 0.002}, SearchConfig{Loss: 0.005, Start: 1e5, Max: 12e6, Epsilon: 5e3, Repeats: 1}},
		{"pdr2-noisy-median", simSUT{capacity: 750e3, baseLoss: 0.001, noise: 0.001, outlierEv: 3}, SearchConfig{Loss: 0.02, Start: 5e4, Max: 8e6, Epsilon: 1e4, Repeats: 3}},
		{"capacity-above-max", simSUT{capacity: 20e6}, SearchConfig{Loss: 0, Start: 1e6, Max: 8e6, Epsilon: 1e4, Repeats: 1}},
		{"start-fails", simSUT{capacity: 3e4}, SearchConfig{Loss: 0.005, Start: 1e5, Max: 8e6, Epsilon: 1e3, Repeats: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.sut
			s.rng = rand.New(rand.NewPCG(7, 7))
			res, err := FindPDR(s.trial, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := math.Min(s.trueLimit(tt.cfg.Loss), tt.cfg.Max)
			// noise can move a decision by a few noise sigmas around the limit
			slack := 5*s.noise*want + 1 // + 1 pps: the oracle is itself a bisection
			if res.High-res.Low > tt.cfg.Epsilon {
				t.Errorf("window [%.0f, %.0f] wider than ε=%.0f", res.Low, res.High, tt.cfg.Epsilon)
			}
			if want < res.Low-slack || want > res.High+slack {
				t.Errorf("true limit %.0f outside [%.0f, %.0f] (steps %+v)", want, res.Low, res.High, res.Steps)
			}
		})
	}
}

func TestFindPDRRejectsBadConfig(t *testing.T) {
	s := simSUT{capacity: 1e6, rng: rand.New(rand.NewPCG(1, 1))}
	for _, c := range []SearchConfig{{Start: 0, Max: 1, Epsilon: 1}, {Start: 2, Max: 1, Epsilon: 1}, {Start: 1, Max: 2, Epsilon: 0}} {
		if _, err := FindPDR(s.trial, c); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}
