package e2e

import (
	"testing"

	"github.com/segchain/segchain/internal/fw"
	"github.com/segchain/segchain/internal/proxy"
	"github.com/segchain/segchain/internal/testutil"
)

// TestSameNodeServicePairs runs every ordered pair of service kinds back to
// back on one node (native End, End.AN.FW, End.AD) and a chain of four,
// each chain on its own UDP port (testdata/samenode.yaml). Before the
// service loop every chain whose second SID is served by a tc program lost
// every packet: the node routed the SID after processing the first one and
// found no route (issue 12, finding 5).
func TestSameNodeServicePairs(t *testing.T) {
	testutil.RequireTool(t, "python3")
	e := setup(t, "testdata/samenode.yaml")
	nfv1 := e.ns("nfv1")
	t.Cleanup(func() { _ = proxy.Remove(nfv1); _ = fw.Flush(nfv1) })
	e.apply()
	for _, c := range []struct {
		chain string
		port  int
	}{
		{"End -> End.AN.FW", 7001},
		{"End -> End.AD", 7002},
		{"End.AD -> End", 7003},
		{"End.AN.FW -> End", 7004},
		{"End.AN.FW -> End.AD", 7005},
		{"End.AD -> End.AN.FW", 7006},
		{"End.AD -> End.AD", 7007},
		{"End -> End.AN.FW -> End.AD -> End.AD", 7008},
	} {
		t.Run(c.chain, func(t *testing.T) {
			const n = 200
			r := stream(t, e, c.port, n, 500, nil)
			if r.Unique != n || r.Duplicates != 0 {
				t.Errorf("%d sent: %d arrived, %d duplicated", n, r.Unique, r.Duplicates)
			}
		})
	}
	t.Run("destroy removes the service loop", func(t *testing.T) {
		if _, err := e.ctl.Destroy(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		if out, err := testutil.ExecErr(nfv1, "ip", "link", "show", "sc-svcloop"); err == nil {
			t.Errorf("service loop left after destroy:\n%s", out)
		}
	})
}
