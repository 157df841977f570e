package e2e

import (
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// seqstream is scripts/seqstream.py: a sequence-numbered UDP stream whose
// receiver counts lost and duplicated sequence numbers.
const seqstream = "../../scripts/seqstream.py"

// streamResult is what the receiver reports.
type streamResult = testutil.StreamResult

// stream sends count sequence-numbered datagrams from s to d:port at rate
// packets per second and runs during (if not nil) while they flow; it
// returns the receiver's count (testutil.Stream).
func stream(t *testing.T, e *env, port, count, rate int, during func()) streamResult {
	t.Helper()
	return testutil.Stream(t, seqstream, e.NS("s"), e.NS("d"), "fc00:4d::d", port, count, rate, during)
}
