package perf

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestStats(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		want Summary // CI95 checked separately
	}{
		{"odd", []float64{3, 1, 2}, Summary{Mean: 2, Median: 2, CV: 0.5, Runs: 3}},
		{"even", []float64{1, 2, 3, 4}, Summary{Mean: 2.5, Median: 2.5, CV: math.Sqrt(5.0/3) / 2.5, Runs: 4}},
		{"constant", []float64{7, 7, 7, 7}, Summary{Mean: 7, Median: 7, CV: 0, CI95: [2]float64{7, 7}, Runs: 4}},
		{"empty", nil, Summary{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(tt.xs)
			opt := cmpopts.EquateApprox(0, 1e-12)
			if diff := cmp.Diff(tt.want, got, opt, cmpopts.IgnoreFields(Summary{}, "CI95", "Values")); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if len(tt.xs) > 0 && (got.CI95[0] > got.Median || got.CI95[1] < got.Median) {
				t.Errorf("CI %v does not contain the median %v", got.CI95, got.Median)
			}
		})
	}
}

// TestBootstrapCoverage: the CI95 of the median of N(1, 0.05) samples of
// size 20 must contain the true median in roughly 95% of experiments.
func TestBootstrapCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 42))
	const experiments = 200
	hit := 0
	for e := 0; e < experiments; e++ {
		xs := make([]float64, 20)
		for i := range xs {
			xs[i] = 1 + 0.05*rng.NormFloat64()
		}
		ci := BootstrapCI(xs, Median, 500, 0.95, uint64(e))
		if ci[0] <= 1 && 1 <= ci[1] {
			hit++
		}
	}
	if cov := float64(hit) / experiments; cov < 0.88 || cov > 0.995 {
		t.Errorf("coverage %.3f, want ≈ 0.95", cov)
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{10, 0, 5}
	for _, tt := range []struct{ q, want float64 }{{0, 0}, {0.25, 2.5}, {0.5, 5}, {1, 10}} {
		if got := Quantile(xs, tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if diff := cmp.Diff([]float64{10, 0, 5}, xs); diff != "" {
		t.Errorf("input modified (-want +got)\n%s", diff)
	}
}

// TestStatsMatchGonum pins the library-backed statistics to the values the
// hand-written code gave, so the published figures do not move.
func TestStatsMatchGonum(t *testing.T) {
	xs := []float64{3, 1, 4, 1, 5, 9, 2, 6}
	if got := Mean(xs); got != 3.875 {
		t.Errorf("Mean = %v, want 3.875", got)
	}
	if got, want := Stddev(xs), 2.748376143938713; math.Abs(got-want) > 1e-12 { // python3 statistics.stdev
		t.Errorf("Stddev = %v, want %v", got, want)
	}
	if got := Median(xs); got != 3.5 { // type 7: the mean of the middle two
		t.Errorf("Median = %v, want 3.5", got)
	}
}
