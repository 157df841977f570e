package perf

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Arm is one traffic type of a sandwich run: a name and the generator slot
// holding its frame.
type Arm struct {
	Name string
	Slot int
}

// SandwichConfig tunes a sandwich-interleaved saturated measurement.
type SandwichConfig struct {
	// Rounds of REF, X, REF, Y, … REF (the arm order is shuffled per round).
	Rounds int
	// Settle after each template switch before measuring, Window measured.
	Settle, Window time.Duration
	// Rate offered (0: flat out, the saturated throughput).
	Rate uint64
	// Seed of the per-round shuffle.
	Seed uint64
	// Sleep waits (time.Sleep when nil; tests pass a virtual clock).
	Sleep func(time.Duration)
	// Tick is called after every measured window (progress bars).
	Tick func()
	// MinOverload: a window is valid only if the generator offered at least
	// this multiple of what the SUT delivered (the SUT was saturated, the
	// generator was not starved of CPU by other work). 0 disables the check.
	MinOverload float64
	// MaxRounds bounds the extra rounds run to replace rounds with invalid
	// windows (default 3 × Rounds).
	MaxRounds int
	// MaxLost: a window in which the SUT thread did not run for more than
	// this fraction of the time (it waited for its CPU behind other work,
	// the hypervisor stole it, or it idled because the generator lost its
	// CPU) measured the co-runners, not the SUT: its round does not count
	// for the throughput ratio (it still does for the CPU ratio, which
	// divides CPU time by packets and so is immune to the CPU share).
	// 0 disables the check (the testbed cannot see the SUT's CPU time).
	MaxLost float64
	// Trace, if set, receives every measured window (Run and Size unset).
	Trace func(Window)
}

// ArmResult holds one value per round for an arm.
type ArmResult struct {
	Name string
	// Ratio: the arm's throughput ÷ the mean of its two REF neighbours, in
	// the rounds whose three windows were undisturbed (see MaxLost).
	Ratio []float64
	// CPURatio: the mean of its REF neighbours' SUT CPU ns/packet ÷ the
	// arm's, in every saturated round: the throughput ratio the SUT would
	// show with its CPU to itself. It does not depend on how much CPU
	// other work left the SUT.
	CPURatio []float64
	// RxPPS is the arm's throughput per undisturbed window, NsPerPacket
	// its CPU cost per saturated window.
	RxPPS, NsPerPacket []float64
	// TxPPS is the offered rate, Busy the fraction of the window the SUT
	// thread ran and RxAllPPS the throughput, per saturated window
	// (disturbed or not).
	TxPPS, Busy, RxAllPPS []float64
	// Discarded counts rounds whose windows were not saturated (see
	// SandwichConfig.MinOverload); they were replaced and are in none of
	// the slices above.
	Discarded int
	// Disturbed counts saturated rounds left out of Ratio because the SUT
	// thread lost its CPU in one of their windows (see MaxLost).
	Disturbed int
}

// Windows returns how many windows a sandwich of n arms measures when no
// round has to be replaced.
func (c SandwichConfig) Windows(n int) int { return c.Rounds * (2*n + 1) }

// Sandwich measures every arm against ref within one generator run: the
// template switches every Settle+Window in the order REF, X, REF, Y, …, REF,
// randomised per round, and each arm's per-round ratio divides its
// throughput by the mean of its two REF neighbours. Slow drifts of the
// machine (other load, steal) cancel out in the ratio. The generator is
// started and stopped here.
func Sandwich(d Driver, ref Arm, arms []Arm, c SandwichConfig) (ArmResult, []ArmResult, error) {
	if c.Rounds < 1 || c.Window <= 0 {
		return ArmResult{}, nil, errors.New("sandwich: need rounds ≥ 1 and a window > 0")
	}
	sleep := c.Sleep
	if sleep == nil {
		sleep = time.Sleep
	}
	gen := d.Generator()
	if err := gen.SetRate(c.Rate); err != nil {
		return ArmResult{}, nil, err
	}
	if err := gen.Select(ref.Slot); err != nil {
		return ArmResult{}, nil, err
	}
	if err := gen.Start(); err != nil {
		return ArmResult{}, nil, err
	}
	refRes, res, err := sandwichRounds(d, ref, arms, c, sleep)
	if serr := gen.Stop(); err == nil && serr != nil {
		err = fmt.Errorf("generator: %w", serr)
	}
	return refRes, res, err
}

func sandwichRounds(d Driver, ref Arm, arms []Arm, c SandwichConfig, sleep func(time.Duration)) (ArmResult, []ArmResult, error) {
	gen := d.Generator()
	rng := rand.New(rand.NewPCG(c.Seed, 0x5a4d))
	seq, round := 0, 0
	measure := func(name string, slot int) (Delta, error) {
		if err := gen.Select(slot); err != nil {
			return Delta{}, err
		}
		sleep(c.Settle)
		s0, err := d.Sample()
		if err != nil {
			return Delta{}, err
		}
		sleep(c.Window)
		s1, err := d.Sample()
		if err != nil {
			return Delta{}, err
		}
		if c.Tick != nil {
			c.Tick()
		}
		dl := s1.Sub(s0)
		if c.Trace != nil {
			c.Trace(Window{Round: round, Seq: seq, Arm: name, Slot: slot, Delta: dl, Valid: validity(dl, c)})
		}
		seq++
		return dl, nil
	}
	refRes := ArmResult{Name: ref.Name}
	res := make([]ArmResult, len(arms))
	for i, a := range arms {
		res[i].Name = a.Name
	}
	valid := func(d Delta) bool { v := validity(d, c); return v == "ok" || v == "disturbed" }
	calm := func(d Delta) bool { return validity(d, c) == "ok" }
	maxRounds := c.MaxRounds
	if maxRounds == 0 {
		maxRounds = 3 * c.Rounds
	}
	for round = 0; round < maxRounds; round++ {
		// Arms still short of saturated rounds, in a fresh random order.
		var order []int
		for i := range arms {
			if len(res[i].CPURatio) < c.Rounds {
				order = append(order, i)
			}
		}
		if len(order) == 0 {
			break
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		prev, err := measure(ref.Name, ref.Slot)
		if err != nil {
			return refRes, res, err
		}
		if valid(prev) {
			refRes.addCPU(prev, 1)
			if calm(prev) {
				refRes.addThroughput(prev, 1)
			}
		}
		for _, i := range order {
			x, err := measure(arms[i].Name, arms[i].Slot)
			if err != nil {
				return refRes, res, err
			}
			next, err := measure(ref.Name, ref.Slot)
			if err != nil {
				return refRes, res, err
			}
			if valid(next) {
				refRes.addCPU(next, 1)
				if calm(next) {
					refRes.addThroughput(next, 1)
				}
			}
			if !valid(prev) || !valid(x) || !valid(next) {
				res[i].Discarded++
				prev = next
				continue
			}
			refNs := (prev.NsPerPacket() + next.NsPerPacket()) / 2
			cr := 0.0
			if xn := x.NsPerPacket(); xn > 0 {
				cr = refNs / xn
			}
			res[i].addCPU(x, cr)
			if calm(prev) && calm(x) && calm(next) {
				refPPS := (prev.RxPPS() + next.RxPPS()) / 2
				res[i].addThroughput(x, x.RxPPS()/refPPS)
			} else {
				res[i].Disturbed++
			}
			prev = next
		}
	}
	return refRes, res, nil
}

func (a *ArmResult) addCPU(d Delta, cpuRatio float64) {
	a.CPURatio = append(a.CPURatio, cpuRatio)
	a.TxPPS = append(a.TxPPS, d.TxPPS())
	a.NsPerPacket = append(a.NsPerPacket, d.NsPerPacket())
	a.Busy = append(a.Busy, d.Busy())
	a.RxAllPPS = append(a.RxAllPPS, d.RxPPS())
}

func (a *ArmResult) addThroughput(d Delta, ratio float64) {
	a.Ratio = append(a.Ratio, ratio)
	a.RxPPS = append(a.RxPPS, d.RxPPS())
}

// validity says whether a window measured a saturated SUT that had its
// CPU to itself: "ok"; "disturbed" (saturated, but the SUT thread lost its
// CPU: good for the CPU ratio only); or why it measured nothing useful.
func validity(d Delta, c SandwichConfig) string {
	switch {
	case d.Rx == 0:
		return "no-rx"
	case c.MinOverload != 0 && float64(d.Tx) < c.MinOverload*float64(d.Rx):
		return "not-saturated"
	case c.MaxLost != 0 && d.SUTCPU > 0 && d.Busy() < 1-c.MaxLost:
		return "disturbed"
	}
	return "ok"
}
