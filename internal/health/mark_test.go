package health

import (
	"testing"

	"github.com/segchain/segchain/internal/pool/datapath"
)

// Probes carry the mark the selector lets pass.
func TestProbeMark(t *testing.T) {
	if ProbeMark != datapath.ProbeMark {
		t.Errorf("health marks probes %#x, the selector passes %#x", ProbeMark, datapath.ProbeMark)
	}
}
