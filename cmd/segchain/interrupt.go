package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/segchain/segchain/internal/controller"
)

// Interrupts (SIGINT, SIGTERM) of the commands that change nodes (apply,
// destroy, watch). The first one ends the command's context: the
// controller starts no new op, lets the ops running finish, undoes every
// op this command ran on every node (with a context of its own, which the
// interrupt does not end) and clears the journals; the command says what
// it undid and exits 128+signal (130 for SIGINT, 143 for SIGTERM). A
// second one exits at once with the same status, leaving each node's
// journal for the next apply or destroy, which undoes it first
// (docs/apply.md).

// interrupt is a command's interrupt handling (onInterrupt).
type interrupt struct {
	mu  sync.Mutex
	sig os.Signal // the first signal, nil until one came
	ch  chan os.Signal
	ew  io.Writer
}

// errSignal is the cause of the context an interrupt ends.
type errSignal struct{ sig os.Signal }

func (e errSignal) Error() string { return "received " + sigName(e.sig) }

func sigName(s os.Signal) string {
	if s == syscall.SIGINT {
		return "SIGINT"
	}
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return s.String()
}

// sigCode is the conventional exit status of a command ended by s.
func sigCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return exitError
}

// onInterrupt catches SIGINT and SIGTERM for a command that changes
// nodes: the context it returns ends on the first; what tells the user
// what happens now ("apply stops starting changes and undoes …"). Call
// stop when the command is done: interrupts after it are caught and
// dropped, so the command exits with its own status.
func onInterrupt(ctx context.Context, ew io.Writer, what string) (context.Context, *interrupt, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	in := &interrupt{ch: make(chan os.Signal, 2), ew: ew}
	signal.Notify(in.ch, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		var s os.Signal
		select {
		case s = <-in.ch:
		case <-done:
			return
		}
		in.mu.Lock()
		in.sig = s
		in.mu.Unlock()
		fmt.Fprintf(ew, "segchain: %s: %s (interrupt again to exit at once, leaving the journals for the next apply)\n", sigName(s), what)
		cancel(errSignal{s})
		select {
		case s2 := <-in.ch:
			fmt.Fprintf(ew, "segchain: %s again: exiting now; the journals left on the nodes are undone by the next apply or destroy\n", sigName(s2))
			os.Exit(sigCode(s))
		case <-done:
		}
	}()
	return ctx, in, func() {
		// Not signal.Stop: an interrupt from now until the process exits
		// (closing the agents' connections) would take the default action
		// and kill the process after its changes were kept, and the
		// caller would read "killed by SIGINT" for an apply that was
		// complete. The channel stays registered; with no reader, the
		// signal package drops what it cannot buffer.
		close(done)
		cancel(nil)
	}
}

// signal is the first signal received, nil if none.
func (in *interrupt) signal() os.Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sig
}

// verdict is how an interrupted apply or destroy (verb) ends: it says on
// stderr what was done and returns the exit status. err and res are the
// controller's; a command that completed anyway (err nil: the interrupt
// came after its last change) keeps its result and exits as usual.
func (in *interrupt) verdict(verb string, res *controller.Result, err error) error {
	s := in.signal()
	if s == nil {
		return err
	}
	if err == nil {
		fmt.Fprintf(in.ew, "segchain: %s came after the %s was complete: it is kept\n", sigName(s), verb)
		return nil
	}
	code := &exitStatus{code: sigCode(s)}
	switch {
	case res != nil && res.Interrupted && res.RolledBack:
		fmt.Fprintf(in.ew, "segchain: %s interrupted: rolled back %d change(s) it had made; every node is as it was before\n",
			verb, res.Undone)
		return code
	case res != nil && (res.Interrupted || res.RolledBack || res.Applied):
		// An undo failed (the error says which; the journals stay for
		// the next apply), or the command failed on its own.
		return err
	}
	// The interrupt came before any op ran (locks, recovery of old
	// journals, observation): nothing of this command's was changed.
	why := ""
	if !errors.Is(err, controller.ErrInterrupted) && !errors.Is(err, context.Canceled) {
		why = " (" + err.Error() + ")"
	}
	fmt.Fprintf(in.ew, "segchain: %s interrupted before it changed anything%s: no node was changed\n", verb, why)
	return code
}
