package boundary

import (
	"testing"

	"github.com/segchain/segchain/internal/bpfconst"
	"github.com/segchain/segchain/internal/nodestate"
)

// TestLimitsMatchProgram: the sizes plan checks a boundary against
// (nodestate.Boundary.Fits) are the program's map sizes.
func TestLimitsMatchProgram(t *testing.T) {
	spec, err := loadBoundaryTC()
	if err != nil {
		t.Fatal(err)
	}
	for m, want := range map[string]uint32{
		"bnd_lpm":       nodestate.BoundaryPrefixesMax,
		"bnd_hmac_sids": nodestate.BoundaryHMACSIDsMax,
		"bnd_hmac_keys": nodestate.BoundaryHMACKeysMax,
	} {
		if err := bpfconst.CheckMapSize(spec, m, want); err != nil {
			t.Error(err)
		}
	}
}
