package oam

import (
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// clockReads is how many times ClockOffset reads the clocks: it keeps the
// read whose monotonic window is narrowest (a preemption inside a window
// moves its midpoint by up to half of it).
const clockReads = 8

// ClockOffset is CLOCK_REALTIME minus CLOCK_MONOTONIC (bpf_ktime_get_ns's
// clock) now: a tap's timestamp plus it is wall time, comparable between
// machines as far as their clocks are synchronised. It is an estimate
// (the realtime read is placed at the midpoint of two monotonic reads):
// timestamps of one kernel are ordered exactly only with one offset for
// all of them (Timeline).
func ClockOffset() time.Duration {
	var best, off int64
	for i := 0; i < clockReads; i++ {
		var m1, r, m2 unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &m1)
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &r)
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &m2)
		if w := m2.Nano() - m1.Nano(); i == 0 || w < best {
			best = w
			off = r.Nano() - (m1.Nano()+m2.Nano())/2
		}
	}
	return time.Duration(off)
}

var (
	bootOnce sync.Once
	bootID   string
)

// BootID is this kernel's boot id (/proc/sys/kernel/random/boot_id; ""
// when unreadable): nodes whose agents report the same one run on this
// kernel and share its monotonic clock.
func BootID() string {
	bootOnce.Do(func() {
		b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if err == nil {
			bootID = strings.TrimSpace(string(b))
		}
	})
	return bootID
}

// Timeline puts the kernel timestamps of several nodes on one wall-clock
// line: a node's offset is the one measured first for its kernel (boot
// id), this process's own for its own kernel. Nodes of one kernel (a lab's
// namespaces, its agents) then keep their exact order; separately measured
// offsets differ by up to a preemption (0.2 ms seen on an idle shared
// machine, 1.4 ms under load: more than a hop takes).
type Timeline struct {
	mu  sync.Mutex
	off map[string]time.Duration
}

// NewTimeline starts a time line with this process's kernel.
func NewTimeline() *Timeline {
	tl := &Timeline{off: map[string]time.Duration{}}
	if b := BootID(); b != "" {
		tl.off[b] = ClockOffset()
	}
	return tl
}

// Local is the offset of this process's kernel.
func (tl *Timeline) Local() time.Duration {
	b := BootID()
	if b == "" {
		return ClockOffset()
	}
	return tl.Offset(b, ClockOffset())
}

// Offset is the offset to add to the timestamps of a node whose kernel
// has boot id boot and whose offset was measured there as measured. With
// no boot id (an agent that does not report it) the measured one is all
// there is. A nil Timeline: measured.
func (tl *Timeline) Offset(boot string, measured time.Duration) time.Duration {
	if tl == nil || boot == "" {
		return measured
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if o, ok := tl.off[boot]; ok {
		return o
	}
	tl.off[boot] = measured
	return measured
}
