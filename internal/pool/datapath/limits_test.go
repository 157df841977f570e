package datapath

import (
	"testing"

	"github.com/segchain/segchain/internal/pool"
)

// The pure package's limits are the program's.
func TestLimitsMatchProgram(t *testing.T) {
	var c poolTCPoolConf
	var st poolTCPoolStats
	spec, err := loadPoolTC()
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][2]int{
		"instances": {pool.MaxInstances, len(c.Inst)},
		"counters":  {pool.MaxInstances, len(st.Inst)},
		"slots":     {pool.MaxSlots, len(c.Slot)},
		"pools":     {pool.MaxPools, int(spec.Maps["pool_confs"].MaxEntries)},
	} {
		if got[0] != got[1] {
			t.Errorf("%s: internal/pool says %d, the program %d", name, got[0], got[1])
		}
	}
}
