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
}

// ArmResult holds one value per round for an arm.
type ArmResult struct {
	Name string
	// Ratio: the arm's throughput ÷ the mean of its two REF neighbours.
	Ratio []float64
	// CPURatio: the mean of its REF neighbours' SUT CPU ns/packet ÷ the
	// arm's: the throughput ratio the SUT would show with its CPU to itself.
	// It does not depend on how much CPU other work left the SUT.
	CPURatio []float64
	// RxPPS and NsPerPacket are the arm's absolute figures per round.
	RxPPS, NsPerPacket []float64
	// TxPPS is the offered rate per round.
	TxPPS []float64
	// Discarded counts rounds whose windows were not valid (see
	// SandwichConfig.MinOverload); they are not in the slices above.
	Discarded int
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
	measure := func(slot int) (Delta, error) {
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
		return s1.Sub(s0), nil
	}
	refRes := ArmResult{Name: ref.Name}
	res := make([]ArmResult, len(arms))
	for i, a := range arms {
		res[i].Name = a.Name
	}
	valid := func(d Delta) bool {
		return d.Rx > 0 && (c.MinOverload == 0 || float64(d.Tx) >= c.MinOverload*float64(d.Rx))
	}
	maxRounds := c.MaxRounds
	if maxRounds == 0 {
		maxRounds = 3 * c.Rounds
	}
	for round := 0; round < maxRounds; round++ {
		// Arms still short of valid rounds, in a fresh random order.
		var order []int
		for i := range arms {
			if len(res[i].Ratio) < c.Rounds {
				order = append(order, i)
			}
		}
		if len(order) == 0 {
			break
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		prev, err := measure(ref.Slot)
		if err != nil {
			return refRes, res, err
		}
		if valid(prev) {
			refRes.add(prev, 1, 1)
		}
		for _, i := range order {
			x, err := measure(arms[i].Slot)
			if err != nil {
				return refRes, res, err
			}
			next, err := measure(ref.Slot)
			if err != nil {
				return refRes, res, err
			}
			if valid(next) {
				refRes.add(next, 1, 1)
			}
			if !valid(prev) || !valid(x) || !valid(next) {
				res[i].Discarded++
				prev = next
				continue
			}
			refPPS := (prev.RxPPS() + next.RxPPS()) / 2
			refNs := (prev.NsPerPacket() + next.NsPerPacket()) / 2
			cr := 0.0
			if xn := x.NsPerPacket(); xn > 0 {
				cr = refNs / xn
			}
			res[i].add(x, x.RxPPS()/refPPS, cr)
			prev = next
		}
	}
	return refRes, res, nil
}

func (a *ArmResult) add(d Delta, ratio, cpuRatio float64) {
	a.Ratio = append(a.Ratio, ratio)
	a.CPURatio = append(a.CPURatio, cpuRatio)
	a.RxPPS = append(a.RxPPS, d.RxPPS())
	a.TxPPS = append(a.TxPPS, d.TxPPS())
	a.NsPerPacket = append(a.NsPerPacket, d.NsPerPacket())
}
