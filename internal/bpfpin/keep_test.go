package bpfpin

import (
	"testing"

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
