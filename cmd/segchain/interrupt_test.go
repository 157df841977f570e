package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// An interrupt that comes after the command's work (stop called: the
// apply was kept, the agents' connections are closing) must not kill the
// process by the signal: its caller would read an apply that completed as
// one killed before it changed anything. The test binary re-runs this test
// as the child that signals itself after stop.
func TestInterruptAfterStopIsDropped(t *testing.T) {
	if os.Getenv("SEGCHAIN_INTERRUPT_CHILD") == "1" {
		_, _, stop := onInterrupt(context.Background(), io.Discard, "test")
		stop()
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		// Long enough for the kernel to deliver it (it is delivered on
		// return from the kill system call when this thread takes it).
		time.Sleep(500 * time.Millisecond)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestInterruptAfterStopIsDropped$")
	cmd.Env = append(os.Environ(), "SEGCHAIN_INTERRUPT_CHILD=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("a SIGINT after the command's work killed it (%v): its caller sees a kept apply as one killed at start\n%s", ws.Signal(), out)
		}
	}
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
