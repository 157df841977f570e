package bpfpin

import (
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// A kept namespace is named without entering it, with the name entering
// it gives; a namespace deleted and made again under the same path is a
// new namespace with a new name, never the kept one's.
func TestKeptNamespace(t *testing.T) {
	ns := testutil.NewNetns(t, "keep")
	want, wantIno, err := Namespace(ns)
	if err != nil {
		t.Fatal(err)
	}
	release, err := Keep(ns)
	if err != nil {
		t.Fatal(err)
	}
	hits := KeptHits()
	for i := 0; i < 2; i++ {
		if name, ino, err := Namespace(ns); err != nil || name != want || ino != wantIno {
			t.Fatalf("kept: %s %d %v, want %s %d", name, ino, err, want, wantIno)
		}
	}
	if KeptHits() != hits+2 {
		t.Fatalf("kept: %d of 2 answered without entering the namespace", KeptHits()-hits)
	}
	// Deleted and made again: the kept one is still open (so its inode
	// is not reused), and the path leads to the new one.
	if err := nsutil.Delete(ns); err != nil {
		t.Fatal(err)
	}
	if err := nsutil.Create(ns); err != nil {
		t.Fatal(err)
	}
	name, _, err := Namespace(ns)
	if err != nil {
		t.Fatal(err)
	}
	if name == want {
		t.Fatalf("namespace %s made again: named %s, the deleted one's", ns, name)
	}
	release()
	if again, _, err := Namespace(ns); err != nil || again != name {
		t.Fatalf("released: %s %v, want %s", again, err, name)
	}
}

// A process that bounds its sweeps scans for defunct directories once per
// interval and program; by default every call scans.
func TestSweepAtMost(t *testing.T) {
	t.Cleanup(func() { SweepAtMost(0) })
	scans := func() int {
		sweeps.mu.Lock()
		defer sweeps.mu.Unlock()
		return sweeps.scans
	}
	s0 := scans()
	Defunct("sweep-test-a", "")
	Defunct("sweep-test-a", "")
	Defunct("sweep-test-b", "")
	if n := scans() - s0; n != 3 {
		t.Fatalf("by default: %d scan(s) for 3 calls, want 3", n)
	}
	SweepAtMost(time.Hour)
	s0 = scans()
	Defunct("sweep-test-a", "")
	Defunct("sweep-test-b", "")
	Defunct("sweep-test-a", "")
	Defunct("sweep-test-b", "")
	if n := scans() - s0; n != 0 {
		t.Fatalf("at most hourly, both just scanned: %d scan(s), want 0", n)
	}
	sweeps.mu.Lock()
	sweeps.last["sweep-test-a"] = time.Now().Add(-2 * time.Hour)
	sweeps.mu.Unlock()
	Defunct("sweep-test-a", "")
	Defunct("sweep-test-b", "")
	if n := scans() - s0; n != 1 {
		t.Fatalf("at most hourly, a's last scan 2 h ago: %d scan(s), want 1 (a's)", n)
	}
}
