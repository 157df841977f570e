package nodelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
