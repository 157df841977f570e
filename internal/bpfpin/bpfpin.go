package bpfpin

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
)

// soNetnsCookie is SO_NETNS_COOKIE (Linux >= 5.14, asm-generic value).
const soNetnsCookie = 71

// Namespace names netns ("" = the calling thread's) as ns-<inode>-<cookie>
// and returns its inode too. The inode names the namespace for humans; the
// netns cookie (never reused, unlike inodes) tells it from a deleted
// namespace whose inode it inherited.
func Namespace(netns string) (name string, ino uint64, err error) {
	if n, i, ok := heldName(netns); ok {
		return n, i, nil // held for one observation (hold.go)
	}
	if n, i, ok := keptName(netns); ok {
		return n, i, nil // kept by a long-lived process (keep.go)
	}
	var cookie uint64
	err = nsutil.Do(netns, func() error {
		fi, err := os.Stat("/proc/thread-self/ns/net")
		if err != nil {
			return err
		}
		ino = fi.Sys().(*syscall.Stat_t).Ino
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, soNetnsCookie)
		return err
	})
	if err != nil {
		return "", 0, fmt.Errorf("identify netns %q: %w", netns, err)
	}
	return fmt.Sprintf("ns-%d-%d", ino, cookie), ino, nil
}

// Stale lists program's directories left under the same inode by deleted
// namespaces (every ns-<ino>-* but name).
func Stale(name string, ino uint64, program string) []string {
	root, err := Root()
	if err != nil {
		return nil
	}
	dirs, _ := filepath.Glob(filepath.Join(root, fmt.Sprintf("ns-%d-*", ino), program))
	var out []string
	for _, d := range dirs {
		if filepath.Base(filepath.Dir(d)) != name {
			out = append(out, d)
		}
	}
	return out
}

// Defunct lists program's directories, other than keep's, whose TCX links
// all lost their interface: deleting a namespace deletes its interfaces,
// while its pins in bpffs would keep the maps alive. A directory that was
// never attached cannot be judged and is not listed.
//
// A process that set SweepAtMost scans at most that often per program
// (nil in between).
func Defunct(program, keep string) []string {
	if !sweepDue(program) {
		return nil
	}
	root, err := Root()
	if err != nil {
		return nil
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "ns-*", program))
	var out []string
	for _, d := range dirs {
		if filepath.Base(filepath.Dir(d)) == keep {
			continue
		}
		pins, _ := filepath.Glob(filepath.Join(d, "tcx-*"))
		if len(pins) == 0 {
			continue
		}
		live := false
		for _, p := range pins {
			lk, err := link.LoadPinnedLink(p, nil)
			if err != nil {
				continue
			}
			if info, err := lk.Info(); err == nil {
				if tcx := info.TCX(); tcx != nil && tcx.Ifindex != 0 {
					live = true
				}
			}
			lk.Close()
		}
		if !live {
			out = append(out, d)
		}
	}
	return out
}

// AttachAll attaches a program at at (TCX ingress or egress) of every
// interface of netns but loopback that has no link pinned in dir yet,
// pinning each link as dir/tcx-<ifindex>. prog is called only when an interface needs it, so a
// caller can defer loading (verifying) the program. An unsupported TCX is
// returned wrapping ebpf.ErrNotSupported.
func AttachAll(netns, dir string, at ebpf.AttachType, prog func() (*ebpf.Program, error)) error {
	return AttachAllExcept(netns, dir, at, nil, prog)
}

// AttachAllExcept is AttachAll leaving out the interfaces whose name skip
// reports (nil: none), e.g. a device only the program's own redirects
// feed, where running it would cost a hook per packet for nothing.
func AttachAllExcept(netns, dir string, at ebpf.AttachType, skip func(name string) bool, prog func() (*ebpf.Program, error)) error {
	return nsutil.Do(netns, func() error {
		l, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, i := range l {
			if i.Flags&net.FlagLoopback != 0 || (skip != nil && skip(i.Name)) {
				continue
			}
			pin := filepath.Join(dir, fmt.Sprintf("tcx-%d", i.Index))
			if _, err := os.Stat(pin); err == nil {
				continue
			}
			p, err := prog()
			if err != nil {
				return err
			}
			lk, err := link.AttachTCX(link.TCXOptions{Interface: i.Index, Program: p, Attach: at})
			if err != nil {
				return fmt.Errorf("attach to %s: tcx: %w", i.Name, err)
			}
			if err := lk.Pin(pin); err != nil {
				lk.Close()
				return fmt.Errorf("pin link on %s: %w", i.Name, err)
			}
			lk.Close()
		}
		return nil
	})
}

// LiveTCX reports whether the TCX link pinned at p is attached to an
// interface (a link detached by hand, bpftool link detach, keeps its pin).
func LiveTCX(p string) bool {
	lk, err := link.LoadPinnedLink(p, nil)
	if err != nil {
		return false
	}
	defer lk.Close()
	info, err := lk.Info()
	if err != nil {
		return false
	}
	tcx := info.TCX()
	return tcx != nil && tcx.Ifindex != 0
}

// DetachAll removes every TCX link pinned in dir, so the program leaves
// every interface it was attached to.
func DetachAll(dir string) error {
	pins, _ := filepath.Glob(filepath.Join(dir, "tcx-*"))
	var errs []error
	// A pin that is already gone was removed by another cleanup of the
	// same dead namespace's state (Defunct, run by an apply elsewhere,
	// races a lab down): what is wanted has happened.
	gone := func(err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, p := range pins {
		lk, err := link.LoadPinnedLink(p, nil)
		if err != nil {
			// The interface is gone: the link is defunct, drop the pin.
			errs = append(errs, gone(os.Remove(p)))
			continue
		}
		errs = append(errs, gone(lk.Unpin()), lk.Close())
	}
	return errors.Join(errs...)
}

// Remove detaches dir's links and removes it, and its namespace directory
// if no other program uses it any more.
func Remove(dir string) error {
	if err := DetachAll(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	_ = os.Remove(filepath.Dir(dir))
	return nil
}
