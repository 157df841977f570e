package boundary

import (
	"testing"

	"github.com/segchain/segchain/internal/bpfconst"
)

// TestBPFConstMatchesProgram fails when a drop reason of the compiled
// program has no Go name.
func TestBPFConstMatchesProgram(t *testing.T) {
	spec, err := loadBoundaryTC()
	if err != nil {
		t.Fatal(err)
	}
	if err := bpfconst.CheckDropEnum(spec, "bnd_drop_reason", numDropReasons, func(r uint32) string { return DropReason(r).String() }); err != nil {
		t.Error(err)
	}
}
