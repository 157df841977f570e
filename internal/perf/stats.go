package perf

import (
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/stat"
)

// Summary describes repeated measurements of one quantity.
type Summary struct {
	Mean   float64    `json:"mean"`
	Median float64    `json:"median"`
	CV     float64    `json:"cv"`   // stddev / mean
	CI95   [2]float64 `json:"ci95"` // bootstrap 95% CI of the median
	Runs   int        `json:"runs"`
	// Values are the measurements themselves, in order.
	Values []float64 `json:"values,omitempty"`
}

// Summarize computes mean, median, CV and a bootstrap 95% confidence
// interval of the median (resamples with a fixed seed: reproducible).
func Summarize(xs []float64) Summary {
	n := len(xs)
	if n == 0 {
		return Summary{}
	}
	s := Summary{Mean: Mean(xs), Median: Median(xs), Runs: n, Values: append([]float64(nil), xs...)}
	if s.Mean != 0 {
		s.CV = Stddev(xs) / math.Abs(s.Mean)
	}
	s.CI95 = BootstrapCI(xs, Median, 2000, 0.95, 1)
	return s
}

// Mean is the arithmetic mean (0 for no values), gonum's stat.Mean.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return stat.Mean(xs, nil)
}

// Stddev is the sample standard deviation (n−1), gonum's stat.StdDev.
func Stddev(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	return stat.StdDev(xs, nil)
}

// Median of xs (xs is not modified).
func Median(xs []float64) float64 { return Quantile(xs, 0.5) }

// Quantile with linear interpolation between order statistics (Hyndman and
// Fan's type 7, R's and NumPy's default: the median of an even count is the
// mean of the middle two). Kept by hand: gonum's stat.Quantile offers
// Empirical and LinInterp (type 4), which would change the published
// medians.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// BootstrapCI is the percentile bootstrap confidence interval of stat.
func BootstrapCI(xs []float64, stat func([]float64) float64, resamples int, level float64, seed uint64) [2]float64 {
	if len(xs) == 0 {
		return [2]float64{}
	}
	rng := rand.New(rand.NewPCG(seed, 0x5e6c4a1))
	est := make([]float64, resamples)
	buf := make([]float64, len(xs))
	for i := range est {
		for j := range buf {
			buf[j] = xs[rng.IntN(len(xs))]
		}
		est[i] = stat(buf)
	}
	a := (1 - level) / 2
	return [2]float64{Quantile(est, a), Quantile(est, 1-a)}
}
