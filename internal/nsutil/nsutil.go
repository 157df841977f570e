package nsutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// Path returns the bind-mount path of a namespace name as `ip netns` uses
// it, or name itself when it is already a path.
func Path(name string) string {
	if strings.ContainsRune(name, '/') {
		return name
	}
	return filepath.Join("/run/netns", name)
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
	if err := netns.DeleteNamed(name); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}
