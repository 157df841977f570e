// Package inheritfd keeps descriptors a segchain process inherited from
// its caller out of the processes it starts.
//
// segchain starts daemons that outlive the command (lab agents, FRR,
// userspace services). A descriptor the command inherited without
// close-on-exec, such as the lock of `flock LOCK segchain lab up`, or the
// write end of a caller's pipe, would pass to every one of them: the lock
// stays held and the pipe never reaches end of file until the last daemon
// exits. Go opens its own descriptors close-on-exec; only inherited ones
// lack the flag, so setting it on every descriptor above stderr at start
// changes nothing else. A child that must get a descriptor gets it through
// exec.Cmd.ExtraFiles, which clears the flag in the child.
package inheritfd

import (
	"errors"
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseOnExec marks every descriptor above stderr close-on-exec.
func CloseOnExec() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil || !(errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL)) {
		return err
	}
	// Before Linux 5.11: one fcntl per open descriptor.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		unix.CloseOnExec(fd) // the directory's own descriptor is gone by now: EBADF, harmless
	}
	return nil
}
