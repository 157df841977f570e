package srv6svc

import (
	"testing"

	"github.com/segchain/segchain/internal/bpfconst"
	"github.com/segchain/segchain/internal/service/userspace"
)

// TestIntentLimitsMatchProgram: the per-node bound config validates
// userspace services against is the steering program's SID map size.
func TestIntentLimitsMatchProgram(t *testing.T) {
	spec, err := loadSteerXDP()
	if err != nil {
		t.Fatal(err)
	}
	if err := bpfconst.CheckMapSize(spec, "svc_sids", userspace.MaxSIDs); err != nil {
		t.Errorf("userspace.MaxSIDs: %v", err)
	}
}
