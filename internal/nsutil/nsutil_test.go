package nsutil

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestCreateLeavesNoThreadInside: after Create, no thread of this process
// is in the new namespace (one left there — the main thread, which the Go
// runtime parks rather than terminates — would keep the namespace and its
// interfaces alive after Delete). 200 creations give the main thread its
// chances to run the creating goroutine.
func TestCreateLeavesNoThreadInside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("privileged test: needs root")
	}
	b := make([]byte, 4)
	rand.Read(b)
	for i := range 200 {
		name := "sct-nsu-" + hex.EncodeToString(b) + "-" + strconv.Itoa(i)
		if err := Create(name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = Delete(name) })
		target, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		var mine string
		if err := Do(name, func() error {
			var err error
			mine, err = os.Readlink("/proc/thread-self/ns/net")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
		for _, tk := range tasks {
			if l, _ := os.Readlink(tk); l == mine && l != target {
				t.Fatalf("after Create(%s): thread %s is still in it (%s)", name, tk, l)
			}
		}
	}
}
