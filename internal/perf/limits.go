package perf

import "time"

// MeasureLimits is `segchain perf limit`: the testbed's own ceilings
// (MeasureCeiling) repeat times, with the size-byte plain IPv6 frame of
// base (the baseline recipe) loaded into the generator; no SUT behaviour.
// Each figure is the median of slices of window after a 300 ms warm-up.
func MeasureLimits(drv *NetnsDriver, base Recipe, size, repeat int, window time.Duration) ([]Ceiling, error) {
	env := drv.Env()
	if err := PrepareSUT(env); err != nil {
		return nil, err
	}
	frame, err := base.Setup(env, 1, Params{Size: size})
	if err != nil {
		return nil, err
	}
	if err := drv.Generator().Load(0, frame); err != nil {
		return nil, err
	}
	var cs []Ceiling
	for i := 1; i <= repeat; i++ {
		c, err := MeasureCeiling(drv, i, size, 300*time.Millisecond, window, nil)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}
