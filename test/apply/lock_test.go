package apply

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/nodelock"
)

// variant writes a second domain for the same lab: the "web" chain gone
// and one firewall rule changed, so that its state differs from the
// default domain's on the ingress and on nfv2.
func variant(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(domainFile)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	web := "  web:\n    ingress: ingress\n    mode: encap\n    match: {src: \"fc00:1a::/64\", dst: \"fc00:4d::/64\"}\n    services: [nfv1-end, nfv2-end]\n    egress: {node: egress, behavior: End.DX6, nh6: \"fc00:4d::d\"}\n"
	if !strings.Contains(s, web) || !strings.Contains(s, "--dport 6666") {
		t.Fatal("examples/default.yaml changed: update variant()")
	}
	s = strings.Replace(s, web, "", 1)
	s = strings.Replace(s, "--dport 6666", "--dport 6667", 1)
	p := filepath.Join(t.TempDir(), "variant.yaml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// result is one finished command.
type result struct {
	args []string
	out  string
	err  error
	end  time.Time
}

// concurrently starts the commands stagger apart (so the later ones
// start while the first runs) and waits for all.
func concurrently(t *testing.T, stagger time.Duration, cmds ...[]string) []result {
	t.Helper()
	res := make([]result, len(cmds))
	var wg sync.WaitGroup
	for i, args := range cmds {
		if i > 0 {
			time.Sleep(stagger)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := exec.Command(segchainBin, args...)
			var b bytes.Buffer
			c.Stdout, c.Stderr = &b, &b
			err := c.Start()
			if err == nil {
				err = waitExit(t, c)
			}
			res[i] = result{args: args, out: b.String(), err: err, end: time.Now()}
		}()
	}
	wg.Wait()
	return res
}

// planClean reports whether plan of file finds nothing to change.
func (e *env) planClean(file string) bool {
	e.T.Helper()
	out, err := e.Run("plan", "-f", file, "--lab", e.Name)
	if err != nil {
		e.T.Fatalf("plan -f %s: %v\n%s", file, err, out)
	}
	return strings.Contains(out, "no changes: every node matches")
}

// TestConcurrentApplies runs two applies of different domain files on
// one lab at the same time, three times: both must succeed (the second
// waits for the first's locks) and the lab must end exactly as the one
// that finished last says. Without locks, both exited 0 and the result
// matched neither file.
func TestConcurrentApplies(t *testing.T) {
	e := newEnv(t)
	other := variant(t)
	for round := range 3 {
		res := concurrently(t, 0,
			[]string{"apply", "-f", domainFile, "--lab", e.Name},
			[]string{"apply", "-f", other, "--lab", e.Name})
		for _, r := range res {
			if r.err != nil {
				t.Fatalf("round %d: segchain %s: %v\n%s", round, strings.Join(r.args, " "), r.err, r.out)
			}
		}
		last, first := domainFile, other
		if res[1].end.After(res[0].end) {
			last, first = other, domainFile
		}
		if !e.planClean(last) {
			t.Errorf("round %d: the lab does not match %s, the apply that finished last", round, last)
		}
		if e.planClean(first) {
			t.Errorf("round %d: the lab still matches %s, applied first", round, first)
		}
	}
}

// TestApplyConcurrentWithDestroy starts apply and destroy together on a
// clean lab: whichever runs last decides, and the lab must be wholly in
// that state (applied: plan finds nothing; destroyed: destroy finds
// nothing, no pins left). Without locks, both exited 0 with half the
// domain applied and 29 pins left.
func TestApplyConcurrentWithDestroy(t *testing.T) {
	e := newEnv(t)
	for round := range 6 {
		// Destroy starts 0 to 250 ms into the apply: not a timing
		// assertion, a spread of overlaps.
		res := concurrently(t, time.Duration(round)*50*time.Millisecond,
			[]string{"apply", "-f", domainFile, "--lab", e.Name},
			[]string{"destroy", "-f", domainFile, "--lab", e.Name})
		for _, r := range res {
			if r.err != nil {
				t.Fatalf("round %d: segchain %s: %v\n%s", round, strings.Join(r.args, " "), r.err, r.out)
			}
		}
		if res[0].end.After(res[1].end) {
			if !e.planClean(domainFile) {
				t.Errorf("round %d: apply finished last but the lab does not match the domain", round)
			}
			continue
		}
		out, err := e.domain("destroy", "--dry-run")
		if err != nil || !strings.Contains(out, "0 change(s) would be made") {
			t.Errorf("round %d: destroy finished last but destroy --dry-run finds: %v\n%s", round, err, out)
		}
		for _, node := range []string{"nfv1", "nfv2"} {
			name, _, err := bpfpin.Namespace(e.NS(node))
			if err != nil {
				t.Fatal(err)
			}
			if pins, _ := filepath.Glob(filepath.Join(pinRoot(t), name, "*", "*")); len(pins) > 0 {
				t.Errorf("round %d: destroy finished last but %s has pins left: %v", round, node, pins)
			}
		}
	}
}

// TestNoWaitNamesHolder holds nfv2's lock from this test process: apply
// --no-wait fails at once naming this process; a plain apply says whom it
// waits for and finishes once the lock is released.
func TestNoWaitNamesHolder(t *testing.T) {
	e := newEnv(t)
	key, _, err := bpfpin.Namespace(e.NS("nfv2"))
	if err != nil {
		t.Fatal(err)
	}
	locks, err := nodelock.Acquire(context.Background(), []nodelock.Node{{Key: key, Name: "nfv2"}}, nodelock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Release()
	out, err := e.domain("apply", "--no-wait")
	if err == nil {
		t.Fatalf("apply --no-wait succeeded while nfv2 was locked:\n%s", out)
	}
	pid := fmt.Sprintf("pid %d", os.Getpid())
	if !strings.Contains(out, "nfv2") || !strings.Contains(out, pid) {
		t.Errorf("apply --no-wait does not name the node and the holder (%s):\n%s", pid, out)
	}
	if e.planClean(domainFile) {
		t.Errorf("apply --no-wait changed the lab")
	}
	c := exec.Command(segchainBin, "apply", "-f", domainFile, "--lab", e.Name)
	var b syncBuffer
	c.Stdout, c.Stderr = &b, &b
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var werr error
wait:
	for !strings.Contains(b.String(), "waiting for lock on node nfv2 held by "+pid) {
		select {
		case werr = <-done:
			done <- werr
			break wait
		case <-time.After(50 * time.Millisecond):
		}
	}
	locks.Release()
	if err := <-done; err != nil {
		t.Fatalf("waiting apply: %v\n%s", err, b.String())
	}
	if !strings.Contains(b.String(), "waiting for lock on node nfv2 held by "+pid) {
		t.Errorf("the waiting apply did not say whom it waited for:\n%s", b.String())
	}
	if !e.planClean(domainFile) {
		t.Errorf("the waiting apply did not apply the domain")
	}
}

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
