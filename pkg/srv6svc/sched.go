package srv6svc

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// realtimePriority is the SCHED_FIFO priority of the workers with
// Config.Realtime: the lowest, enough to run ahead of every normal task
// (threaded NAPI and ksoftirqd are normal tasks) and behind every other
// real-time one.
const realtimePriority = 1

// setRealtime makes the calling thread SCHED_FIFO. The caller must hold
// it locked (runtime.LockOSThread) and end with it locked, so that the
// runtime discards the thread rather than run other goroutines on it.
func setRealtime() error {
	attr := unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: realtimePriority}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		return fmt.Errorf("worker SCHED_FIFO: %w", err)
	}
	return nil
}

// probeRealtime tells whether this process may make a thread SCHED_FIFO
// (CAP_SYS_NICE, and real-time time in its cgroup), on a thread of its own
// that the runtime discards afterwards.
func probeRealtime() error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		errc <- setRealtime()
	}()
	return <-errc
}
