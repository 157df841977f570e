package bpfpin

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Two cleanups of one dead namespace's pins (an apply's Defunct sweep and
// a lab down) may run at once: each succeeds, whichever removes a pin
// first.
func TestDetachAllConcurrent(t *testing.T) {
	for round := 0; round < 50; round++ {
		dir := t.TempDir()
		for i := 0; i < 64; i++ {
			// Not links: LoadPinnedLink fails on them as on a defunct link's pin.
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("tcx-%d", i)), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- DetachAll(dir) }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
