package nodelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// flock locks belong to open files, so a second Acquire in the same
// process contends like another process would.
func TestBusyNamesHolder(t *testing.T) {
	dir := t.TempDir()
	nodes := []Node{{Key: "ns-2-2", Name: "b"}, {Key: "ns-1-1", Name: "a"}}
	s, err := Acquire(context.Background(), nodes, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	h := ReadHolder(filepath.Join(dir, "ns-1-1.lock"))
	if h.PID != os.Getpid() || h.Node != "a" || h.Since.IsZero() {
		t.Errorf("holder = %+v, want this process on node a", h)
	}
	_, err = Acquire(context.Background(), nodes[:1], Options{Dir: dir, NoWait: true})
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), fmt.Sprintf("node b is locked by pid %d", os.Getpid())) {
		t.Errorf("second Acquire: %v, want ErrBusy naming node b and pid %d", err, os.Getpid())
	}
	var waited []string
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = Acquire(ctx, nodes, Options{Dir: dir, Waiting: func(n string, _ Holder) { waited = append(waited, n) }})
	if !errors.Is(err, context.DeadlineExceeded) || len(waited) != 1 || waited[0] != "a" {
		t.Errorf("waiting Acquire: %v, waited for %v; want a deadline after waiting for a (sorted first)", err, waited)
	}
	s.Release()
	s2, err := Acquire(context.Background(), nodes, Options{Dir: dir, NoWait: true})
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	s2.Release()
}

// TestReleaseRemovesFile: a released lock leaves no file behind, and the
// next Acquire works.
func TestReleaseRemovesFile(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		s, err := Acquire(context.Background(), []Node{{Key: "ns-1-1", Name: "a"}, {Key: "ns-2-2", Name: "b"}}, Options{Dir: dir, NoWait: true})
		if err != nil {
			t.Fatal(err)
		}
		s.Release()
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Fatalf("after Release, %d lock file(s) left in %s", len(left), dir)
		}
	}
}

// TestMutualExclusionWithRemoval: many lockers of one node, each with its
// own open file (flock locks belong to open files, as across processes),
// racing through acquire, a critical section and release (which removes
// the file): never two inside at once, and no file left at the end.
func TestMutualExclusionWithRemoval(t *testing.T) {
	dir := t.TempDir()
	const lockers, rounds = 8, 150
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, lockers)
	for g := 0; g < lockers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				s, err := Acquire(context.Background(), []Node{{Key: "ns-9-9", Name: "n"}}, Options{Dir: dir})
				if err != nil {
					errs <- err
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				runtime.Gosched() // let another locker try while we hold it
				inside.Add(-1)
				s.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("%d lockers held the node at once", m)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d lock file(s) left", len(left))
	}
}
