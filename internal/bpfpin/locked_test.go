package bpfpin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A verb on a namespace without state neither runs nor creates any; with
// state it runs under With and Read passes the result and error on.
func TestLockedDoRead(t *testing.T) {
	var with []string
	has := map[string]bool{"a": true}
	l := Locked[string]{
		Installed: func(ns string) bool { return has[ns] },
		With: func(ns string, fn func(string) error) error {
			with = append(with, ns)
			return fn("state of " + ns)
		},
	}
	got, err := Read(l, "b", func(n string) (int, error) { t.Errorf("ran on %s, which has no state", n); return 1, nil })
	if got != 0 || err != nil || len(with) != 0 {
		t.Errorf("Read on a namespace without state = %d, %v (With called for %v)", got, err, with)
	}
	boom := errors.New("boom")
	got, err = Read(l, "a", func(n string) (int, error) {
		if n != "state of a" {
			t.Errorf("fn got %q", n)
		}
		return 7, boom
	})
	if got != 7 || !errors.Is(err, boom) || len(with) != 1 {
		t.Errorf("Read = %d, %v (With called for %v), want 7, boom, once", got, err, with)
	}
	if err := l.Do("b", func(string) error { return boom }); err != nil {
		t.Errorf("Do on a namespace without state = %v", err)
	}
}

// LockFile creates its directory and holds an exclusive lock until the
// file is closed.
func TestLockFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "ns-1-1.lock")
	f, err := LockFile(path, "test state")
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("a second lock while LockFile's is held: %v, want EWOULDBLOCK", err)
	}
	f.Close()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Errorf("a second lock after LockFile's file is closed: %v", err)
	}
}
