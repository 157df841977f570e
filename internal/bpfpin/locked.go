package bpfpin

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Locked is a program's state in a namespace as its package's verbs
// reach it (the firewall's, End.AN.NF's): Installed says, without creating
// anything, whether netns has state; With runs fn on it under the
// program's lock, one writer at a time.
type Locked[N any] struct {
	Installed func(netns string) bool
	With      func(netns string, fn func(N) error) error
}

// Do runs fn on netns' state when it has some, and does nothing when it
// has none: listing, removing, clearing and attaching must not create
// state.
func (l Locked[N]) Do(netns string, fn func(N) error) error {
	if !l.Installed(netns) {
		return nil
	}
	return l.With(netns, fn)
}

// Read is Do for a verb with a result: T's zero value when netns has no
// state.
func Read[N, T any](l Locked[N], netns string, fn func(N) (T, error)) (T, error) {
	var out T
	err := l.Do(netns, func(n N) (err error) {
		out, err = fn(n)
		return err
	})
	return out, err
}

// LockFile takes an exclusive flock(2) on path, creating the file and its
// directory; what names the state in errors. Closing the file releases
// the lock, and so does the death of the process.
func LockFile(path, what string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", what, err)
	}
	return f, nil
}
