package nodelock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Dir holds the lock files, one per node: <Dir>/<key>.lock.
const Dir = "/run/segchain/locks"

// Node is one node to lock: Key identifies the node's kernel state (the
// network namespace, bpfpin.Namespace's name, so `--netns NS`, `ip netns
// exec NS` and a lab node share one lock), Name is how messages call it.
type Node struct {
	Key  string
	Name string
}

// Holder names who acts on a node: what a lock file says about the
// process holding it, and the first line of an undo journal
// (internal/journal) about the command that wrote it.
type Holder struct {
	PID     int       `json:"pid"` // 0: a remote controller an agent acts for (Command names it)
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
	Node    string    `json:"node"`
}

// Self is this process, holding since now.
func Self() Holder {
	return Holder{PID: os.Getpid(), Command: strings.Join(os.Args, " "), Since: time.Now()}
}

func (h Holder) String() string {
	switch {
	case h.PID != 0:
		return fmt.Sprintf("pid %d (%s) since %s", h.PID, h.Command, h.Since.UTC().Format(time.RFC3339))
	case h.Command != "":
		return fmt.Sprintf("%s, since %s", h.Command, h.Since.UTC().Format(time.RFC3339))
	}
	return "another process"
}

// UnmarshalJSON also reads "started", the time's name in the journals of
// segchain versions before journal and nodelock shared Holder, so that a
// journal such a version left still names when its command started.
func (h *Holder) UnmarshalJSON(b []byte) error {
	type plain Holder
	var v struct {
		plain
		Started time.Time `json:"started"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*h = Holder(v.plain)
	if h.Since.IsZero() {
		h.Since = v.Started
	}
	return nil
}

// ErrBusy is returned (wrapped, with the holder named) when NoWait is set
// and a node is locked by another process.
var ErrBusy = errors.New("node is locked")

// Options say how to wait.
type Options struct {
	// Dir overrides the lock directory (tests); "" means Dir.
	Dir string
	// NoWait fails at once with ErrBusy instead of waiting.
	NoWait bool
	// Waiting is called once per busy node before waiting for it (the
	// CLI prints "waiting for lock on node X held by ...").
	Waiting func(node string, h Holder)
}

// Set is the locks a command holds.
type Set struct {
	files []*os.File
}

// Acquire locks every node, in the order of their keys (duplicates, e.g.
// two nodes in one namespace, are locked once). It waits for a busy node
// until ctx ends unless opts.NoWait. On failure nothing stays locked.
func Acquire(ctx context.Context, nodes []Node, opts Options) (*Set, error) {
	dir := opts.Dir
	if dir == "" {
		dir = Dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	byKey := map[string][]string{}
	for _, n := range nodes {
		byKey[n.Key] = append(byKey[n.Key], n.Name)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	me := Self()
	s := &Set{}
	for _, k := range keys {
		name := strings.Join(byKey[k], ",")
		f, err := lockOne(ctx, filepath.Join(dir, k+".lock"), name, opts)
		if err != nil {
			s.Release()
			return nil, err
		}
		me.Node = name
		b, _ := json.Marshal(me)
		// Holder info for waiters; the lock itself is the flock.
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt(append(b, '\n'), 0)
		}
		s.files = append(s.files, f)
	}
	return s, nil
}

func lockOne(ctx context.Context, path, name string, opts Options) (*os.File, error) {
	told := false
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("lock node %s: %w", name, err)
		}
		locked, err := waitLock(ctx, f, path, name, opts, &told)
		if err != nil {
			return nil, err
		}
		if locked {
			return f, nil
		}
		// The holder removed the file as it released it: the lock we got
		// is on a file nobody else will open again. Lock the one now at
		// path (created anew if need be).
		f.Close()
	}
}

// waitLock flocks f (opened at path) and reports whether f is still the
// file at path: false when a holder released and removed it while we
// waited (see Release).
func waitLock(ctx context.Context, f *os.File, path, name string, opts Options, told *bool) (bool, error) {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return samePath(f, path), nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return false, fmt.Errorf("lock node %s: %w", name, err)
		}
		h := ReadHolder(path)
		if opts.NoWait {
			f.Close()
			return false, fmt.Errorf("node %s is locked by %s: %w", name, h, ErrBusy)
		}
		if !*told && opts.Waiting != nil {
			opts.Waiting(name, h)
			*told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return false, fmt.Errorf("waiting for lock on node %s held by %s: %w", name, h, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// samePath reports whether the open file f is the file now at path (same
// device and inode).
func samePath(f *os.File, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// ReadHolder reads the holder a lock file names (zero if unreadable).
func ReadHolder(path string) Holder {
	var h Holder
	b, err := os.ReadFile(path)
	if err == nil {
		_ = json.Unmarshal(b, &h)
	}
	return h
}

// Release unlocks every node and removes its lock file, so that lock
// files do not pile up (one per namespace ever locked). The file is
// removed while still locked, then closed: a process that opened it
// before and gets the lock next finds it is no longer the file at its
// path (samePath) and locks the file there instead, so two processes never
// both hold a node. (A segchain from before this protocol, which does not
// check, could; do not mix versions on one host while commands run.)
func (s *Set) Release() {
	if s == nil {
		return
	}
	for i := len(s.files) - 1; i >= 0; i-- {
		f := s.files[i]
		if samePath(f, f.Name()) {
			_ = os.Remove(f.Name())
		}
		f.Close()
	}
	s.files = nil
}
