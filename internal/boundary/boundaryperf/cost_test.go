package boundaryperf

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/perf/perftest"
	"github.com/segchain/segchain/internal/testutil"
)

// TestBoundaryCost measures the boundary filter's cost (docs/security.md).
// It reports figures and asserts nothing about them (timings are not
// assertions on a shared machine). Opt-in: SEGCHAIN_BOUNDARY_COST=ROUNDS.
func TestBoundaryCost(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SEGCHAIN_BOUNDARY_COST"))
	if rounds <= 0 {
		t.Skip("set SEGCHAIN_BOUNDARY_COST=ROUNDS to measure the boundary filter's cost")
	}
	testutil.RequireTool(t, "ethtool")
	d := perftest.Testbed(t, "h13bc")
	// SEGCHAIN_BOUNDARY_BASELINE=FILE adds an arm with that object's
	// programs (e.g. `git show REV:internal/boundary/boundarytc_bpfel.o`).
	res, err := MeasureBaseline(d, rounds, 100*time.Millisecond, os.Getenv("SEGCHAIN_BOUNDARY_BASELINE"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reference IPv6 (no filter): %.1f ns/packet (median of %d)", res.RefNsPerPkt.Median, res.RefNsPerPkt.Runs)
	for _, a := range res.Arms {
		t.Logf("%-18s R_cpu median %.4f CI95 [%.4f, %.4f] (n=%d)  throughput ratio median %.4f CI95 [%.4f, %.4f] (n=%d)  %.1f ns/packet",
			a.Name, a.CPURatio.Median, a.CPURatio.CI95[0], a.CPURatio.CI95[1], a.CPURatio.Runs,
			a.Throughput.Median, a.Throughput.CI95[0], a.Throughput.CI95[1], a.Throughput.Runs, a.NsPerPkt.Median)
	}
}
