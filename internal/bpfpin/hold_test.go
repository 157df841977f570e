package bpfpin

import (
	"testing"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// While an observation holds them, the pin root is resolved once and the
// namespace named once, whatever the number of calls; after release each
// call resolves again (a namespace made again under the same path gets
// its new name).
func TestHold(t *testing.T) {
	ns := testutil.NewNetns(t, "hold")
	want, err := Root()
	if err != nil {
		t.Skipf("no bpffs: %v", err)
	}
	name, _, err := Namespace(ns)
	if err != nil {
		t.Fatal(err)
	}
	lookups, hits := HoldStats()
	release := Hold(ns)
	for i := 0; i < 5; i++ {
		if r, err := Root(); err != nil || r != want {
			t.Fatalf("held: root %q %v, want %q", r, err, want)
		}
		if n, _, err := Namespace(ns); err != nil || n != name {
			t.Fatalf("held: namespace %q %v, want %q", n, err, name)
		}
	}
	l, h := HoldStats()
	if l-lookups != 1 || h-hits != 10 {
		t.Fatalf("held: %d resolution(s) of the root (want 1), %d answer(s) from the hold (want 10)", l-lookups, h-hits)
	}
	// Another node's observation overlapping: it resolves the root
	// afresh too, and releasing it leaves ns held.
	other := Hold("")
	other()
	if n, _, _ := Namespace(ns); n != name {
		t.Fatalf("after an overlapping hold's release: %q, want %q", n, name)
	}
	release()
	release() // twice: no harm
	l0, _ := HoldStats()
	if _, err := Root(); err != nil {
		t.Fatal(err)
	}
	if l, _ := HoldStats(); l != l0+1 {
		t.Fatalf("released: the root was not resolved again")
	}
	if err := nsutil.Delete(ns); err != nil {
		t.Fatal(err)
	}
	if err := nsutil.Create(ns); err != nil {
		t.Fatal(err)
	}
	if n, _, err := Namespace(ns); err != nil || n == name {
		t.Fatalf("made again after the hold: %q %v, want a new name", n, err)
	}
}
