package oam

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
