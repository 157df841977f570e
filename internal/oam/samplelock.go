package oam

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/dataplane"
)

// Boundary marking's state outlives the process that set it: the
// selectors are in the filter's pinned map and the O-flagged tables and
// rules in the kernel. A process that samples a headend holds the
// namespace's sampling lock (flock: the kernel drops it when the process
// dies) and its file exists while that state may: so a sampler that was
// killed leaves a file nobody holds, which ClearStaleSampling (an agent's
// start) and the next sampler clean up. Left alone, the stale O-flagged
// table kept sending 1 in N of the chain's packets by the SIDs it had
// when the sampler died, whatever apply changed since.

// sampleLockDir holds one lock file per sampled namespace.
const sampleLockDir = "/run/segchain/sample"

// errSampledElsewhere: another process samples this headend.
var errSampledElsewhere = errors.New("another process samples this headend's boundary filter")

func sampleLockPath(ns string) (string, error) {
	_, ino, err := bpfpin.Namespace(ns)
	if err != nil {
		return "", err
	}
	return filepath.Join(sampleLockDir, fmt.Sprintf("netns-%d.lock", ino)), nil
}

// sampleLock is a held sampling lock.
type sampleLock struct {
	path string
	f    *os.File
}

// sweepOnce: the first sampler of a process removes the stale lock files
// (SweepSampleLocks).
var sweepOnce sync.Once

// lockSampling takes ns's sampling lock without waiting
// (errSampledElsewhere when another open of it holds it, in this process
// or another).
func lockSampling(ns string) (*sampleLock, error) {
	p, err := sampleLockPath(ns)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(sampleLockDir, 0o755); err != nil {
		return nil, err
	}
	sweepOnce.Do(func() { _, _ = SweepSampleLocks() })
	for {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("sampling lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, errSampledElsewhere
			}
			return nil, fmt.Errorf("sampling lock %s: %w", p, err)
		}
		// A sampler that was closing may have removed the file after
		// this open: the lock is then on a name nobody else finds.
		held, err1 := f.Stat()
		named, err2 := os.Stat(p)
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return &sampleLock{path: p, f: f}, nil
		}
		f.Close()
	}
}

// unlock says nothing is left: the file goes, then the lock.
func (l *sampleLock) unlock() {
	os.Remove(l.path)
	l.f.Close()
}

// ClearStaleSampling removes the boundary-marking state a sampling
// process that died left on the headend in ns (its selectors, O-flagged
// tables and rules); a live sampler's, in this process or another, stays.
// Nothing was left: one stat.
func ClearStaleSampling(ns string) error {
	p, err := sampleLockPath(ns)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	l, err := lockSampling(ns)
	if errors.Is(err, errSampledElsewhere) {
		return nil
	}
	if err != nil {
		return err
	}
	defer l.unlock()
	return clearSampleState(ns)
}

// clearSampleState empties ns's sampling selectors and deletes every
// ProtoSample rule and route (the caller holds the sampling lock).
func clearSampleState(ns string) error {
	var errs []error
	if samp, _, err := boundary.OpenSampling(ns); err == nil {
		errs = append(errs, samp.Set(nil))
		samp.Close()
	} else if !errors.Is(err, boundary.ErrNoSampling) {
		errs = append(errs, err)
	}
	h, err := dataplane.Open(ns)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer h.Close()
	return errors.Join(append(errs, h.DeleteProto(ProtoSample))...)
}

// A lock file outlives its namespace when its sampler was killed and the
// namespace then deleted (a lab taken down after a SIGKILL): nothing can
// enter that namespace again, so nobody would ever clear it, and the
// file stayed in /run/segchain/sample for good.

// SweepSampleLocks removes the sampling lock files that nobody holds and
// whose namespace nothing reaches any more (netnsReachable), and returns
// their paths. A file held (a sampler lives) or whose namespace can
// still be entered stays: a killed sampler's state there is
// ClearStaleSampling's to clear, which needs the file. The first sampler
// of every process and `segchain lab down` run it.
func SweepSampleLocks() ([]string, error) {
	ents, err := os.ReadDir(sampleLockDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var gone []string
	var errs []error
	for _, e := range ents {
		var ino uint64
		if n, err := fmt.Sscanf(e.Name(), "netns-%d.lock", &ino); err != nil || n != 1 || e.Name() != fmt.Sprintf("netns-%d.lock", ino) {
			continue
		}
		p := filepath.Join(sampleLockDir, e.Name())
		removed, err := sweepLock(p, ino)
		if err != nil {
			errs = append(errs, err)
		}
		if removed {
			gone = append(gone, p)
		}
	}
	return gone, errors.Join(errs...)
}

// sweepLock removes p, the lock file of the namespace with nsfs inode
// ino, if it can take its lock without waiting and nothing reaches the
// namespace. It decides holding the lock: no sampler can start on that
// namespace meanwhile (one would fall back to the TCX marker).
func sweepLock(p string, ino uint64) (bool, error) {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil // a sampler lives
		}
		return false, fmt.Errorf("sampling lock %s: %w", p, err)
	}
	// Another sweeper or a closing sampler removed it after the open.
	held, err1 := f.Stat()
	named, err2 := os.Stat(p)
	if err1 != nil || err2 != nil || !os.SameFile(held, named) {
		return false, nil
	}
	if netnsReachable(ino) {
		return false, nil
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// netnsReachable reports whether anything can still enter the network
// namespace whose nsfs inode is ino: a thread in it (/proc/PID/task/TID/
// ns/net: one locked thread of a Go process may be), an open file of it
// (/proc/PID/fd: a runtime holding it by a descriptor), or a bind mount
// of it anywhere, in any mount namespace (/proc/PID/mountinfo, one per
// mount namespace: `ip netns add`'s /run/netns/NAME, a container
// runtime's own directory). Not seen: a namespace only a socket still
// references (SIOCGSKNS would enter it; nothing segchain runs does). When
// /proc cannot be read, it says reachable: a file too many is kept, none
// is removed in doubt.
func netnsReachable(ino uint64) bool {
	var self unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return true
	}
	pids, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	link := "net:[" + strconv.FormatUint(ino, 10) + "]"
	root := []byte(" " + link + " ")
	mnts := map[uint64]bool{}
	for _, pe := range pids {
		if _, err := strconv.Atoi(pe.Name()); err != nil {
			continue
		}
		dir := filepath.Join("/proc", pe.Name())
		tasks, _ := os.ReadDir(filepath.Join(dir, "task"))
		for _, te := range tasks {
			var st unix.Stat_t
			if unix.Stat(filepath.Join(dir, "task", te.Name(), "ns", "net"), &st) == nil && st.Ino == ino && st.Dev == self.Dev {
				return true
			}
		}
		fds, _ := os.ReadDir(filepath.Join(dir, "fd"))
		for _, fe := range fds {
			fd := filepath.Join(dir, "fd", fe.Name())
			// A descriptor opened by a path names the path (a bind
			// mount's, deleted or not), not "net:[INO]": its inode says.
			l, err := os.Readlink(fd)
			if err != nil || strings.HasPrefix(l, "socket:") || strings.HasPrefix(l, "pipe:") || strings.HasPrefix(l, "anon_inode:") {
				continue
			}
			var st unix.Stat_t
			if l == link || unix.Stat(fd, &st) == nil && st.Ino == ino && st.Dev == self.Dev {
				return true
			}
		}
		var mnt unix.Stat_t
		if unix.Stat(filepath.Join(dir, "ns", "mnt"), &mnt) != nil || mnts[mnt.Ino] {
			continue
		}
		mnts[mnt.Ino] = true
		b, err := os.ReadFile(filepath.Join(dir, "mountinfo"))
		if err != nil {
			continue
		}
		// "ID PARENT MAJ:MIN ROOT MOUNTPOINT ...": an nsfs bind mount's
		// root is the namespace, "net:[INO]".
		for _, l := range bytes.Split(b, []byte("\n")) {
			if bytes.Contains(l, root) && strings.Contains(string(l), " - nsfs ") {
				return true
			}
		}
	}
	return false
}
