package agents

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// interruptAt starts segchain VERB on the lab, sends it SIGINT after
// delay (and a second one right after the first when twice), and returns
// its exit status and stderr.
func (e *env) interruptAt(verb string, delay time.Duration, twice bool) (int, string) {
	return e.signalAt(verb, delay, syscall.SIGINT, twice)
}

// signalAt is interruptAt with signal sig.
func (e *env) signalAt(verb string, delay time.Duration, sig syscall.Signal, twice bool) (int, string) {
	e.T.Helper()
	c := exec.Command(segchainBin, verb, "--lab", e.Name)
	var stderr syncBuffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		e.T.Fatal(err)
	}
	time.Sleep(delay)
	_ = c.Process.Signal(sig)
	if twice {
		// The second once the first was seen (its message), so that it
		// is the second interrupt and not one lost with the first.
		for i := 0; i < 200 && !strings.Contains(stderr.String(), "SIGINT:"); i++ {
			time.Sleep(time.Millisecond)
		}
		_ = c.Process.Signal(syscall.SIGINT)
	}
	err := c.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		e.T.Fatal(err)
	}
	if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return killedBy(ws.Signal()), stderr.String()
	}
	return c.ProcessState.ExitCode(), stderr.String()
}

// killedBy is signalAt's status for a command the signal killed: one that
// came before segchain installed its handler, at process start (a loaded
// machine can take longer to start it than the shortest delay).
func killedBy(sig syscall.Signal) int { return -int(sig) }

// syncBuffer is a bytes.Buffer written by exec's copying goroutine while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var rolledBack = regexp.MustCompile(`interrupted: rolled back (\d+) change\(s\)`)

// An apply (destroy) interrupted by SIGINT at moments spread over its
// run, in-process and through agents: every time either the command had
// finished (exit 0, the new state) or it exits 130 saying what it rolled
// back, and the previous state is intact — the same kernel state and
// pins, the same plan, no journal left. A minimum of the interrupts must
// land mid-way (the command rolled back changes it had made). Then a
// double SIGINT: the command exits at once, the journal stays, and the
// next apply undoes it first and converges.
func TestPrivilegedInterruptApply(t *testing.T) {
	for _, agents := range []bool{false, true} {
		name := "in-process"
		if agents {
			name = "agents"
		}
		t.Run(name, func(t *testing.T) { testInterrupt(t, agents) })
	}
}

func testInterrupt(t *testing.T, agents bool) {
	e := newEnvPrefix(t, agents, "h5i-")
	clean := e.snapshot()
	cleanPlan := e.Must("plan", "--lab", e.Name)
	e.Must("apply", "--lab", e.Name)
	applied := e.snapshot()
	start := time.Now()
	e.Must("destroy", "--lab", e.Name)
	tookDestroy := time.Since(start)
	start = time.Now()
	e.Must("apply", "--lab", e.Name)
	took := time.Since(start)
	if clean == applied {
		t.Fatal("apply changed nothing the snapshot sees")
	}
	// Through agents each node's part of a phase is one Execute: a
	// destroy (two phases of deletes) can only be cut between them, a
	// window too narrow to demand a hit in it.
	destroyMid := 1
	if agents {
		destroyMid = 0
	}
	phases := []struct {
		verb, prepare   string
		before, after   *string
		took            time.Duration
		runs, minMidWay int
	}{
		{"apply", "destroy", &clean, &applied, took, 12, 3},
		{"destroy", "apply", &applied, &clean, tookDestroy, 6, destroyMid},
	}
	for _, ph := range phases {
		midWay := 0
		for i := range ph.runs {
			e.Must(ph.prepare, "--lab", e.Name)
			// Not a timing assertion: the delays spread over one apply
			// (and a little past it) to land at different steps.
			delay := ph.took * time.Duration(2*i+1) / time.Duration(2*ph.runs-2)
			code, stderr := e.interruptAt(ph.verb, delay, false)
			got := e.snapshot()
			switch code {
			case 0: // the signal came after the command finished
				if d := cmp.Diff(*ph.after, got); d != "" {
					t.Errorf("%s interrupted after %v exited 0 but the state is not the %s one (-want +got):\n%s\n%s", ph.verb, delay, ph.verb, d, stderr)
				}
				continue
			case killedBy(syscall.SIGINT):
				// Killed before the handler was installed: before the
				// command could change anything.
				if d := cmp.Diff(*ph.before, got); d != "" {
					t.Errorf("%s killed by SIGINT at start (after %v) but the state changed (-want +got):\n%s\n%s", ph.verb, delay, d, stderr)
				}
				continue
			case 130:
			default:
				t.Errorf("%s interrupted after %v: exit status %d, want 130 (or 0 when it had finished)\n%s", ph.verb, delay, code, stderr)
			}
			if m := rolledBack.FindStringSubmatch(stderr); m != nil {
				if n, _ := strconv.Atoi(m[1]); n > 0 {
					midWay++
				}
			} else if !strings.Contains(stderr, "interrupted before it changed anything") {
				t.Errorf("%s interrupted after %v: stderr does not say what was done:\n%s", ph.verb, delay, stderr)
			}
			if d := cmp.Diff(*ph.before, got); d != "" {
				t.Errorf("%s interrupted after %v: previous state not intact (-want +got):\n%s\n%s", ph.verb, delay, d, stderr)
			}
			if ph.verb == "apply" {
				if p := e.Must("plan", "--lab", e.Name); p != cleanPlan {
					t.Errorf("apply interrupted after %v: plan differs from before:\n%s\nwant:\n%s", delay, p, cleanPlan)
				}
			}
		}
		t.Logf("%s: %d of %d interrupts landed mid-way (delays up to %v)", ph.verb, midWay, ph.runs, ph.took)
		if midWay < ph.minMidWay {
			t.Errorf("%s: only %d of %d interrupts landed mid-way, want ≥ %d: the test did not exercise the rollback", ph.verb, midWay, ph.runs, ph.minMidWay)
		}
	}

	// SIGTERM (a service manager stopping it) is handled as SIGINT, with
	// exit status 143.
	e.Must("destroy", "--lab", e.Name)
	if code, stderr := e.signalAt("apply", took/2, syscall.SIGTERM, false); code != 0 {
		if code != 143 || !strings.Contains(stderr, "SIGTERM: apply stops") {
			t.Errorf("apply after SIGTERM: exit status %d, want 143 and the message\n%s", code, stderr)
		}
		if d := cmp.Diff(clean, e.snapshot()); d != "" {
			t.Errorf("apply after SIGTERM: previous state not intact (-want +got):\n%s\n%s", d, stderr)
		}
	}

	// watch: Ctrl-C between applies ends it cleanly, with a message.
	e.Must("destroy", "--lab", e.Name)
	w := exec.Command(segchainBin, "watch", "--lab", e.Name)
	var wout, werr syncBuffer
	w.Stdout, w.Stderr = &wout, &werr
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitFor(60*time.Second, func() bool { return strings.Contains(wout.String(), "applied ") }) {
		w.Process.Kill()
		w.Wait()
		t.Fatalf("watch's initial apply did not finish:\n%s\n%s", wout.String(), werr.String())
	}
	_ = w.Process.Signal(syscall.SIGINT)
	_ = w.Wait()
	if code := w.ProcessState.ExitCode(); code != 0 || !strings.Contains(werr.String(), "watch stopped by SIGINT between applies") {
		t.Errorf("watch after SIGINT: exit status %d, want 0 and a message saying it stopped:\n%s", code, werr.String())
	}
	if d := cmp.Diff(applied, e.snapshot()); d != "" {
		t.Errorf("after watch: state differs from a clean apply (-want +got):\n%s", d)
	}

	// Double SIGINT mid-apply: exit at once, the journal stays; the next
	// apply recovers it.
	left := false
	for i := 0; i < 10 && !left; i++ {
		e.Must("destroy", "--lab", e.Name)
		delay := took * time.Duration(3+i%5) / 10
		code, stderr := e.interruptAt("apply", delay, true)
		if code != 130 {
			t.Fatalf("apply interrupted twice after %v: exit status %d, want 130\n%s", delay, code, stderr)
		}
		if !strings.Contains(stderr, "SIGINT again: exiting now") {
			continue // it had finished its rollback before the second
		}
		if !strings.Contains(e.snapshot(), "journal") {
			continue // the second came before any change
		}
		left = true
		out := e.Must("apply", "--lab", e.Name)
		if !strings.Contains(out, "recovery:") {
			t.Errorf("apply after a double interrupt found no journal to recover:\n%s", out)
		}
		if d := cmp.Diff(applied, e.snapshot()); d != "" {
			t.Errorf("apply after a double interrupt: state differs from a clean apply (-want +got):\n%s\n%s", d, out)
		}
	}
	if !left {
		t.Error("no double interrupt left a journal in 10 tries")
	}
}
