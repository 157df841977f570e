package nsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// RunDir is where named namespaces are bind-mounted, as `ip netns` does.
const RunDir = "/run/netns"

// Path returns the bind-mount path of a namespace name as `ip netns` uses
// it, or name itself when it is already a path.
func Path(name string) string {
	if strings.ContainsRune(name, '/') {
		return name
	}
	return filepath.Join(RunDir, name)
}

// Exists reports whether the named namespace exists.
func Exists(name string) bool {
	_, err := os.Stat(Path(name))
	return err == nil
}

// Do runs fn with the calling goroutine's OS thread inside namespace name.
// An empty name runs fn in the current namespace. If the original namespace
// cannot be restored, the thread is left locked so the runtime discards it
// instead of reusing it in the wrong namespace.
func Do(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	target, err := netns.GetFromPath(Path(name))
	if err != nil {
		return fmt.Errorf("open netns %s: %w", name, err)
	}
	defer target.Close()

	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("get current netns: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter netns %s: %w", name, err)
	}
	fnErr := fn()
	if err := netns.Set(orig); err != nil {
		// Keep the thread locked: the goroutine exit will terminate it.
		return fmt.Errorf("restore netns after %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	return fnErr
}

// Pin runs fn on a goroutine of its own whose OS thread enters namespace
// name and stays there, locked to that goroutine, for as long as fn runs
// (goroutines fn starts run on other threads: they are not in the
// namespace). It is for work that must stay inside a namespace and
// creates sockets there as it goes, such as a GoBGP server's loop, which
// opens its listener on its own goroutine (internal/bgp). When fn
// returns, the thread goes back to the caller's namespace and is
// unlocked; if it cannot, the goroutine exits locked and the runtime
// discards the thread (as Create explains, a thread exited that way may
// be the main one, which the runtime parks instead: restoring first
// keeps it from holding the namespace). Pin returns once the thread is in
// the namespace, or why it could not enter it (fn then does not run).
func Pin(name string, fn func()) error {
	if name == "" {
		return errors.New("pin to a namespace: no namespace named")
	}
	entered := make(chan error, 1)
	go func() {
		// Do's thread is in the namespace while its fn runs, and goes
		// back (or stays locked and is discarded) when it returns.
		err := Do(name, func() error {
			entered <- nil
			fn()
			return nil
		})
		select {
		case entered <- err: // could not enter: fn did not run
		default: // entered: the caller was told, fn ran
		}
	}()
	return <-entered
}

// Create makes a new named namespace (like `ip netns add`) without
// switching the caller's namespace.
//
// Creating it moves the creating thread into it, so the thread returns to
// its original namespace before it is unlocked. Leaving it there and
// letting the runtime discard it is not enough: when the goroutine happens
// to run on the main thread, the runtime parks that thread instead of
// terminating it, and a thread parked in the namespace keeps it alive —
// with its interfaces and everything attached to them — after Delete.
func Create(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := shareRunDir(); err != nil {
		return fmt.Errorf("create netns %s: %w", name, err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- fmt.Errorf("create netns %s: get current netns: %w", name, err)
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if err == nil {
			h.Close()
		} else {
			err = fmt.Errorf("create netns %s: %w", name, err)
		}
		if rerr := netns.Set(orig); rerr != nil {
			// Still locked: the goroutine's exit discards the thread.
			errc <- errors.Join(err, fmt.Errorf("restore netns after creating %s: %w", name, rerr))
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// Delete removes a named namespace created by Create or `ip netns add`.
func Delete(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := netns.DeleteNamed(name); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// checkName refuses names that are not one entry of RunDir: netns.DeleteNamed
// of "" would detach RunDir itself, and every namespace mounted on it.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("invalid namespace name %q", name)
	}
	return nil
}

// shareRunDir makes RunDir a mount point with shared propagation before a
// namespace is mounted in it, the way `ip netns add` does (same lock, same
// steps). Otherwise the first `ip netns add` run by anyone afterwards
// bind-mounts RunDir over itself, and the namespaces segchain mounted
// beneath can no longer be deleted: their files stay mount points in the
// hidden layer and unlink fails with EBUSY.
func shareRunDir() error {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return err
	}
	dir, err := os.Open(RunDir)
	if err != nil {
		return err
	}
	defer dir.Close()
	// iproute2 takes this lock too: two bind mounts stacked by concurrent
	// creators are what it guards against.
	_ = unix.Flock(int(dir.Fd()), unix.LOCK_EX)
	defer unix.Flock(int(dir.Fd()), unix.LOCK_UN)
	for made := false; ; made = true {
		err := unix.Mount("", RunDir, "none", unix.MS_SHARED|unix.MS_REC, "")
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINVAL) || made {
			return fmt.Errorf("make %s a shared mount: %w", RunDir, err)
		}
		// EINVAL: not a mount point yet.
		if err := unix.Mount(RunDir, RunDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mount %s on itself: %w", RunDir, err)
		}
	}
}
