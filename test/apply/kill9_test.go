package apply

import (
	"math/rand/v2"
	"os/exec"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/testutil"
)

// snapshot is the lab's kernel state that apply and destroy manage, per
// node (testutil.KernelSnapshot; scripts/soak-kill9.sh takes a fuller
// one).
func (e *env) snapshot() string {
	e.t.Helper()
	nodes := e.l.NodeNames()
	sort.Strings(nodes)
	return testutil.KernelSnapshot(e.t, nodes, e.ns, nsKey, pinRoot(e.t))
}

// killAt starts segchain VERB on the lab and SIGKILLs it after delay;
// it reports whether the kill came before the command ended.
func (e *env) killAt(verb string, delay time.Duration) bool {
	e.t.Helper()
	c := exec.Command(segchainBin, verb, "-f", domainFile, "--lab", e.lab)
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	time.Sleep(delay)
	_ = c.Process.Signal(syscall.SIGKILL)
	_ = c.Wait()
	ws, ok := c.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// TestKill9 is the short version of scripts/soak-kill9.sh: apply or
// destroy SIGKILLed at random moments (10 runs); the next apply (destroy)
// must leave exactly the state of a clean apply (a clean lab), with
// nothing of the killed command left behind. Before the on-disk journal and complete
// observation, a killed apply could leave programs detached that the next
// apply did not see, and destroy left pinned maps.
func TestKill9(t *testing.T) {
	e := newEnv(t)
	clean := e.snapshot()
	e.must("apply", "-f", domainFile, "--lab", e.lab)
	applied := e.snapshot()
	e.must("destroy", "-f", domainFile, "--lab", e.lab)
	start := time.Now() // a warm apply, as in the runs
	e.must("apply", "-f", domainFile, "--lab", e.lab)
	took := time.Since(start)
	if clean == applied {
		t.Fatal("apply changed nothing the snapshot sees")
	}
	// The delays spread over one clean apply's duration: not a timing
	// assertion, a way to hit different steps.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 12))
	phases := []struct {
		killed, prepare, verb string
		runs                  int
		want                  *string
	}{
		{"apply", "destroy", "apply", 4, &applied},
		{"destroy", "apply", "destroy", 3, &clean},
		{"apply", "destroy", "destroy", 3, &clean},
	}
	for _, ph := range phases {
		killed := 0
		for i := range ph.runs {
			e.must(ph.prepare, "-f", domainFile, "--lab", e.lab)
			delay := time.Duration(rng.Int64N(int64(took)*3/4 + 1))
			if e.killAt(ph.killed, delay) {
				killed++
			}
			out := e.must(ph.verb, "-f", domainFile, "--lab", e.lab)
			if d := cmp.Diff(*ph.want, e.snapshot()); d != "" {
				t.Errorf("%s killed after %v (run %d), then %s: state differs from a clean %s (-want +got):\n%s\n%s",
					ph.killed, delay, i, ph.verb, ph.verb, d, out)
			}
		}
		t.Logf("kill %s, then %s: %d of %d runs killed mid-way (delays up to %v)", ph.killed, ph.verb, killed, ph.runs, took)
	}
}

// nsKey names a namespace's pin and state directories.
func nsKey(ns string) (string, error) {
	k, _, err := bpfpin.Namespace(ns)
	return k, err
}
