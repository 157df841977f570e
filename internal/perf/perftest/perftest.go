// Package perftest brings segchain perf's netns testbed up for a test:
// the shared set-up of the benchmark packages' namespace tests.
package perftest

import (
	"testing"

	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/testutil"
)

// Testbed is a testbed (generator on CPU 0, the SUT's NAPI thread on CPU
// 1) whose namespaces are named from prefix, its SUT prepared; it is
// taken down when the test ends, and the test skipped where the machine
// cannot build one.
func Testbed(t *testing.T, prefix string) *perf.NetnsDriver {
	t.Helper()
	testutil.RequireRoot(t)
	d := perf.NewNetnsDriver(perf.NetnsOptions{GenCPU: 0, SUTCPU: 1, Prefix: prefix})
	if err := d.Up(); err != nil {
		if perf.IsNotSupported(err) {
			t.Skipf("testbed: %v", err)
		}
		t.Fatalf("testbed up: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Down(); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	if err := perf.PrepareSUT(d.Env()); err != nil {
		t.Fatal(err)
	}
	return d
}
