package apply

import (
	"math/rand/v2"
	"os/exec"
	"sort"
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
	e.T.Helper()
	nodes := e.Lab.NodeNames()
	sort.Strings(nodes)
	return testutil.KernelSnapshot(e.T, nodes, e.NS, nsKey, pinRoot(e.T))
}

// killAt starts segchain VERB on the lab and SIGKILLs it after delay;
// it reports whether the kill came before the command ended.
func (e *env) killAt(verb string, delay time.Duration) bool {
	e.T.Helper()
	return testutil.KillAfter(e.T, exec.Command(segchainBin, verb, "-f", domainFile, "--lab", e.Name), delay)
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
	e.Must("apply", "-f", domainFile, "--lab", e.Name)
	applied := e.snapshot()
	// A warm destroy and apply, as in the runs: each killed verb's delays
	// spread over its own duration (a destroy is much shorter than an
	// apply; spread over the apply's, most kills came after it ended or
	// before it changed anything).
	start := time.Now()
	e.Must("destroy", "-f", domainFile, "--lab", e.Name)
	took := map[string]time.Duration{"destroy": time.Since(start)}
	start = time.Now()
	e.Must("apply", "-f", domainFile, "--lab", e.Name)
	took["apply"] = time.Since(start)
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
	// done is the state each verb leaves when it completes.
	done := map[string]string{"apply": applied, "destroy": clean}
	for _, ph := range phases {
		// A kill is mid-run when it leaves a state that is neither where the
		// killed command started nor where it would have ended: only those
		// exercise recovery. Each phase needs at least minMidRun of them
		// (more runs, up to three times as many, until it has them).
		const minMidRun = 1
		killed, midRun, recovered := 0, 0, 0
		for i := 0; i < 3*ph.runs && (i < ph.runs || midRun < minMidRun); i++ {
			e.Must(ph.prepare, "-f", domainFile, "--lab", e.Name)
			delay := time.Duration(rng.Int64N(int64(took[ph.killed]) + 1))
			mid := false
			if e.killAt(ph.killed, delay) {
				killed++
				if s := e.snapshot(); s != done[ph.killed] && s != done[ph.prepare] {
					mid = true
					midRun++
				}
			}
			out := e.Must(ph.verb, "-f", domainFile, "--lab", e.Name)
			if d := cmp.Diff(*ph.want, e.snapshot()); d != "" {
				t.Errorf("%s killed after %v (run %d), then %s: state differs from a clean %s (-want +got):\n%s\n%s",
					ph.killed, delay, i, ph.verb, ph.verb, d, out)
			} else if mid {
				recovered++
			}
		}
		t.Logf("kill %s, then %s: %d runs killed, %d mid-run (a partial state), %d of those recovered (delays up to %v)",
			ph.killed, ph.verb, killed, midRun, recovered, took[ph.killed])
		if midRun < minMidRun || recovered < minMidRun {
			t.Errorf("kill %s, then %s: %d mid-run kills, %d recovered: want at least %d of each (the test exercised no recovery)",
				ph.killed, ph.verb, midRun, recovered, minMidRun)
		}
	}
}

// nsKey names a namespace's pin and state directories.
func nsKey(ns string) (string, error) {
	k, _, err := bpfpin.Namespace(ns)
	return k, err
}
