package config

import (
	"testing"

	"github.com/segchain/segchain/internal/pool"
)

// Validation's pool limits are the data path's (internal/pool, whose test
// checks them against the program).
func TestPoolLimits(t *testing.T) {
	if PoolMaxInstances != pool.MaxInstances || PoolMaxSlots != pool.MaxSlots || PoolMaxSegIndex != pool.MaxSegIndex {
		t.Errorf("config %d/%d/%d, pool %d/%d/%d", PoolMaxInstances, PoolMaxSlots, PoolMaxSegIndex, pool.MaxInstances, pool.MaxSlots, pool.MaxSegIndex)
	}
}
