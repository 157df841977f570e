package agents

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/testutil"
)

// snapshot is the lab's state that apply and destroy manage, per node
// (testutil.KernelSnapshot), and the journal files each agent keeps.
func (e *env) snapshot() string {
	e.T.Helper()
	return e.snapshotOf(e.Lab.NodeNames())
}

// snapshotOf is snapshot for some of the lab's nodes.
func (e *env) snapshotOf(nodes []string) string {
	e.T.Helper()
	var b strings.Builder
	b.WriteString(testutil.KernelSnapshot(e.T, nodes, e.NS, nsKey, pinRoot(e.T)))
	for _, n := range nodes {
		// The agent's journal files (its journal directory itself stays).
		js, _ := filepath.Glob(filepath.Join("/run/segchain/labs", e.Name+".agents", "state", n, "journal", "*", "*"))
		for _, j := range js {
			fmt.Fprintf(&b, "journal %s\n", strings.TrimPrefix(j, "/run/segchain/labs/"+e.Name))
		}
	}
	return b.String()
}

// killAt starts segchain VERB on the lab and SIGKILLs it after delay; it
// reports whether the kill came before the command ended.
func (e *env) killAt(verb string, delay time.Duration) bool {
	e.T.Helper()
	return testutil.KillAfter(e.T, exec.Command(segchainBin, verb, "--lab", e.Name), delay)
}

// The controller is SIGKILLed at 20 random moments of an apply or destroy
// through agents: the journals stay on the agents, the leases end with
// the dead controller's connections, and the next apply (destroy)
// converges to exactly a clean apply's state (a clean lab's), leaving no
// journal behind.
func TestPrivilegedKill9ControllerAgents(t *testing.T) {
	e := newEnv(t, true)
	clean := e.snapshot()
	e.Must("apply", "--lab", e.Name)
	applied := e.snapshot()
	e.Must("destroy", "--lab", e.Name)
	start := time.Now()
	e.Must("apply", "--lab", e.Name)
	took := time.Since(start)
	if clean == applied {
		t.Fatal("apply changed nothing the snapshot sees")
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))
	phases := []struct {
		killed, prepare, verb string
		runs                  int
		want                  *string
	}{
		{"apply", "destroy", "apply", 10, &applied},
		{"destroy", "apply", "destroy", 5, &clean},
		{"apply", "destroy", "destroy", 5, &clean},
	}
	// done is the state each verb leaves when it completes.
	done := map[string]string{"apply": applied, "destroy": clean}
	journals := 0
	for _, ph := range phases {
		// A kill is mid-run when it leaves a state that is neither where the
		// killed command started nor where it would have ended (journal
		// files count): only those exercise recovery. Each phase needs at
		// least minMidRun of them (more runs, up to three times as many,
		// until it has them).
		const minMidRun = 1
		killed, midRun, recovered := 0, 0, 0
		for i := 0; i < 3*ph.runs && (i < ph.runs || midRun < minMidRun); i++ {
			e.Must(ph.prepare, "--lab", e.Name)
			// Not a timing assertion: delays spread over one apply to
			// hit different steps.
			delay := time.Duration(rng.Int64N(int64(took) + 1))
			mid, journal := false, false
			if e.killAt(ph.killed, delay) {
				killed++
				if s := e.snapshot(); s != done[ph.killed] && s != done[ph.prepare] {
					mid, journal = true, strings.Contains(s, "\njournal ")
					midRun++
				}
			}
			out := e.Must(ph.verb, "--lab", e.Name)
			if journal {
				// An unfinished journal left on an agent is undone, and says so.
				journals++
				if !strings.Contains(out, "recovery:") {
					t.Errorf("%s killed after %v (run %d) left a journal; %s did not report its recovery:\n%s", ph.killed, delay, i, ph.verb, out)
				}
			}
			if d := cmp.Diff(*ph.want, e.snapshot()); d != "" {
				t.Errorf("%s killed after %v (run %d), then %s: state differs from a clean %s (-want +got):\n%s\n%s",
					ph.killed, delay, i, ph.verb, ph.verb, d, out)
			} else if mid {
				recovered++
			}
		}
		t.Logf("kill %s, then %s: %d runs killed, %d mid-run (a partial state), %d of those recovered (delays up to %v)",
			ph.killed, ph.verb, killed, midRun, recovered, took)
		if midRun < minMidRun || recovered < minMidRun {
			t.Errorf("kill %s, then %s: %d mid-run kills, %d recovered: want at least %d of each (the test exercised no recovery)",
				ph.killed, ph.verb, midRun, recovered, minMidRun)
		}
	}
	t.Logf("%d mid-run kills left an unfinished journal on an agent, each undone by the next command", journals)
}

func pinRoot(t testing.TB) string {
	t.Helper()
	root, err := bpfpin.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// nsKey names a namespace's pin and state directories.
func nsKey(ns string) (string, error) {
	k, _, err := bpfpin.Namespace(ns)
	return k, err
}
