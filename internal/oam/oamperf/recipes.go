// Package oamperf is O-flag sampling's recipe for `segchain perf`
// (docs/oam.md, docs/benchmarks.md "#30"): T.Encaps whose chain the
// headend's marker samples 1 in 1000, against T.Encaps in the same run.
package oamperf

import (
	"errors"
	"fmt"

	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/perf"
)

// Rate is the arm's sampling rate: 1 in Rate (the 1:1000).
const Rate = 1000

// Recipes: T.Encaps.oam.
//
//	T.Encaps.oam  encap seg6 mode encap segs far1,far2 (as T.Encaps),
//	              and segchain's O-flag marker for that chain at 1:1000,
//	              first in the TCX egress chain of the SUT's output port,
//	              its marks read by a reader of this process. The marker is
//	              on the port every arm leaves by, so the run's other arms
//	              (T.Encaps) cross it too, with an SRH that is not its
//	              chain's: T.Encaps.oam over T.Encaps is the cost of
//	              sampling a chain (count, mark 1 in 1000, report the
//	              mark) over that of a chain not sampled on a headend
//	              where the marker runs (the marker's compare, ~30 ns of
//	              program work: go test -bench Marker ./internal/oam).
func Recipes() []perf.Recipe {
	return []perf.Recipe{
		perf.NewRecipe("T.Encaps.oam", fmt.Sprintf("headend: encap seg6 mode encap, 2 SIDs, the chain O-flag sampled 1 in %d by segchain's marker", Rate), setup),
	}
}

// tEncaps is the native T.Encaps recipe: the arm's route and frame are
// built by the same code as its control's.
func tEncaps() perf.Recipe {
	for _, r := range perf.NativeRecipes() {
		if r.Name() == "T.Encaps" {
			return r
		}
	}
	panic("perf has no T.Encaps recipe")
}

func setup(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("T.Encaps.oam needs the SUT's namespace here: %w", perf.ErrNotSupported)
	}
	frame, err := tEncaps().Setup(env, k, p)
	if err != nil {
		return nil, err
	}
	// T.Encaps's SID list: far1, far2 of arm k.
	key := oam.ChainKey{First: perf.Addr("far", k, 1).As16(), Last: perf.Addr("far", k, 2).As16()}
	var m *oam.Marker
	err = env.Do(func() error {
		var err error
		m, err = oam.AttachMarker(env.Out, key, Rate)
		return err
	})
	if err != nil {
		return nil, err
	}
	if env.Cleanup != nil {
		env.Cleanup(func() error {
			c, _ := m.Counts()
			err := m.Close()
			if c.Seen > 0 && c.Marked == 0 {
				err = errors.Join(err, fmt.Errorf("T.Encaps.oam: the marker counted %d packets of its chain and marked none", c.Seen))
			}
			return err
		})
	}
	return frame, nil
}
