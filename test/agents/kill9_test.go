package agents

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/testutil"
)

var objectIDs = regexp.MustCompile(`\b(prog_id|link_id|id) \d+`)

// snapshot is the lab's state that apply and destroy manage, per node:
// routes and rules of every table, HMAC keys, tunsrc, TCX attachments
// (ids masked), segchain's pins and state files, and the journal each
// agent keeps.
func (e *env) snapshot() string {
	e.t.Helper()
	var b strings.Builder
	for _, n := range e.l.NodeNames() {
		ns := e.ns(n)
		fmt.Fprintf(&b, "=== %s\n", n)
		for _, args := range [][]string{
			// -N: protocol numbers, whatever rt_protos names them.
			{"ip", "-N", "-4", "route", "show", "table", "all"}, {"ip", "-N", "-6", "route", "show", "table", "all"},
			{"ip", "-N", "-4", "rule"}, {"ip", "-N", "-6", "rule"}, {"ip", "sr", "hmac", "show"}, {"ip", "sr", "tunsrc", "show"},
			{"bpftool", "net", "show"},
		} {
			out, _ := testutil.ExecErr(ns, args...)
			b.WriteString(objectIDs.ReplaceAllString(out, "$1 N"))
		}
		name, _, err := bpfpin.Namespace(ns)
		if err != nil {
			e.t.Fatal(err)
		}
		// The agent's journal files (its journal directory itself stays).
		js, _ := filepath.Glob(filepath.Join("/run/segchain/labs", e.lab+".agents", "state", n, "journal", "*", "*"))
		for _, j := range js {
			fmt.Fprintf(&b, "journal %s\n", strings.TrimPrefix(j, "/run/segchain/labs/"+e.lab))
		}
		for _, dir := range []string{filepath.Join("/sys/fs/bpf/segchain", name), filepath.Join("/run/segchain/fw", name),
			filepath.Join("/run/segchain/nodes", ns+".json")} {
			_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
				if err == nil {
					fmt.Fprintf(&b, "%s %v\n", strings.Replace(p, name, "NS", 1), fi.Mode().IsDir())
				}
				return nil
			})
		}
	}
	return b.String()
}

// killAt starts segchain VERB on the lab and SIGKILLs it after delay; it
// reports whether the kill came before the command ended.
func (e *env) killAt(verb string, delay time.Duration) bool {
	e.t.Helper()
	c := exec.Command(segchainBin, verb, "--lab", e.lab)
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	time.Sleep(delay)
	_ = c.Process.Signal(syscall.SIGKILL)
	_ = c.Wait()
	ws, ok := c.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// The controller is SIGKILLed at 20 random moments of an apply or destroy
// through agents: the journals stay on the agents, the leases end with
// the dead controller's connections, and the next apply (destroy)
// converges to exactly a clean apply's state (a clean lab's), leaving no
// journal behind.
func TestPrivilegedKill9ControllerAgents(t *testing.T) {
	e := newEnv(t, true)
	clean := e.snapshot()
	e.must("apply", "--lab", e.lab)
	applied := e.snapshot()
	e.must("destroy", "--lab", e.lab)
	start := time.Now()
	e.must("apply", "--lab", e.lab)
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
	recovered := 0
	for _, ph := range phases {
		killed := 0
		for i := range ph.runs {
			e.must(ph.prepare, "--lab", e.lab)
			// Not a timing assertion: delays spread over one apply to
			// hit different steps.
			delay := time.Duration(rng.Int64N(int64(took) + 1))
			if e.killAt(ph.killed, delay) {
				killed++
			}
			out := e.must(ph.verb, "--lab", e.lab)
			if strings.Contains(out, "recovery:") {
				recovered++
			}
			if d := cmp.Diff(*ph.want, e.snapshot()); d != "" {
				t.Errorf("%s killed after %v (run %d), then %s: state differs from a clean %s (-want +got):\n%s\n%s",
					ph.killed, delay, i, ph.verb, ph.verb, d, out)
			}
		}
		t.Logf("kill %s, then %s: %d of %d runs killed mid-way (delays up to %v)", ph.killed, ph.verb, killed, ph.runs, took)
	}
	t.Logf("%d runs found an unfinished journal on an agent and undid it", recovered)
}
