package perf

import (
	"errors"
	"fmt"
	"sort"
)

// TrialFunc offers traffic at rate pps for one fixed-duration trial and
// returns what was sent and received.
type TrialFunc func(pps float64) (Delta, error)

// SearchConfig drives the PDR/NDR finder.
type SearchConfig struct {
	// Loss is the accepted loss ratio: 0 finds the NDR, 0.005 PDR@0.5%.
	Loss float64
	// Start is the first rate tried; Max the line rate (upper bound).
	Start, Max float64
	// Epsilon: the search stops when the window [Low, High] is this narrow.
	Epsilon float64
	// Repeats trials per step; the step uses their median delivery ratio.
	Repeats int
}

// Step is one evaluated rate of a search.
type Step struct {
	Rate          float64 `json:"rate_pps"`
	DeliveryRatio float64 `json:"delivery_ratio"`
	Pass          bool    `json:"pass"`
}

// SearchResult brackets the PDR: Low passed (or is 0), High failed (or is
// Max when even Max passed).
type SearchResult struct {
	Low   float64 `json:"low_pps"`
	High  float64 `json:"high_pps"`
	Steps []Step  `json:"steps"`
}

// PDR is the estimate reported: the highest rate known to pass.
func (r SearchResult) PDR() float64 { return r.Low }

// FindPDR is SRPerf's PDR finder with an exponential phase in front: from
// Start, double the rate while the delivery ratio stays ≥ 1−Loss, then
// halve the window [last pass, first fail] until it is at most Epsilon
// wide. Each step takes the median delivery ratio of Repeats trials, which
// makes a single disturbed trial harmless.
func FindPDR(trial TrialFunc, c SearchConfig) (SearchResult, error) {
	if c.Start <= 0 || c.Max < c.Start || c.Epsilon <= 0 {
		return SearchResult{}, errors.New("pdr search: need 0 < start ≤ max and epsilon > 0")
	}
	if c.Repeats < 1 {
		c.Repeats = 1
	}
	var res SearchResult
	eval := func(rate float64) (bool, error) {
		drs := make([]float64, 0, c.Repeats)
		for i := 0; i < c.Repeats; i++ {
			d, err := trial(rate)
			if err != nil {
				return false, fmt.Errorf("trial at %.0f pps: %w", rate, err)
			}
			drs = append(drs, d.DeliveryRatio())
		}
		sort.Float64s(drs)
		dr := Median(drs)
		pass := dr >= 1-c.Loss
		res.Steps = append(res.Steps, Step{Rate: rate, DeliveryRatio: dr, Pass: pass})
		return pass, nil
	}
	low, high := 0.0, c.Max
	rate := c.Start
	for {
		pass, err := eval(rate)
		if err != nil {
			return res, err
		}
		if !pass {
			high = rate
			break
		}
		low = rate
		if rate >= c.Max {
			res.Low, res.High = c.Max, c.Max
			return res, nil
		}
		rate = min(rate*2, c.Max)
	}
	for high-low > c.Epsilon {
		mid := (low + high) / 2
		pass, err := eval(mid)
		if err != nil {
			return res, err
		}
		if pass {
			low = mid
		} else {
			high = mid
		}
	}
	res.Low, res.High = low, high
	return res, nil
}
