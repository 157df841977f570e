// Package agents runs domains through real `segchain agent` processes
// (lab up --agents): the same results as in-process, restarts under
// traffic, leases, unreachable agents, and a real Prometheus scraping an
// agent.
package agents

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

const domainFile = "../../examples/default.yaml"

type env struct {
	t      *testing.T
	lab    string
	l      *lab.Lab
	agents bool
}

// newEnv brings up the default domain's lab under a unique name
// (h18-...), with agents or without, destroyed and taken down at the end
// even when the test fails; it checks that no agent process outlives lab
// down.
func newEnv(t *testing.T, agents bool) *env {
	t.Helper()
	return newEnvPrefix(t, agents, "h18-")
}

// newEnvPrefix is newEnv with the lab's name starting with prefix.
func newEnvPrefix(t *testing.T, agents bool, prefix string) *env {
	t.Helper()
	return newEnvFile(t, agents, prefix, domainFile)
}

// newEnvFile is newEnvPrefix with the lab brought up from file.
func newEnvFile(t *testing.T, agents bool, prefix, file string) *env {
	t.Helper()
	testutil.RequirePrivileged(t)
	if segchainBin == "" {
		t.Skip("segchain binary not built")
	}
	e := &env{t: t, lab: testutil.UniqueName(prefix), agents: agents}
	args := []string{"lab", "up", "-f", file, "--lab", e.lab}
	if agents {
		args = append(args, "--agents")
	}
	t.Cleanup(func() {
		var pids []int
		if l, err := lab.Get(e.lab); err == nil {
			for _, a := range l.Agents {
				pids = append(pids, a.PID)
			}
		}
		_, _ = e.run("destroy", "--lab", e.lab)
		if out, err := e.run("lab", "down", "--lab", e.lab); err != nil {
			t.Errorf("lab down: %v\n%s", err, out)
		}
		for _, p := range pids {
			if testutil.Alive(p) {
				t.Errorf("agent pid %d outlived lab down", p)
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	e.must(args...)
	l, err := lab.Get(e.lab)
	if err != nil {
		t.Fatal(err)
	}
	e.l = l
	if agents && len(l.Agents) != len(l.Nodes) {
		t.Fatalf("lab has %d agents for %d nodes", len(l.Agents), len(l.Nodes))
	}
	return e
}

func (e *env) run(args ...string) (string, error) { return testutil.Segchain(segchainBin, args...) }

func (e *env) must(args ...string) string {
	e.t.Helper()
	return testutil.MustSegchain(e.t, segchainBin, args...)
}

func (e *env) ns(node string) string {
	e.t.Helper()
	return testutil.LabNetns(e.t, e.l, node)
}

// status is `segchain status -o json` as generic JSON.
func (e *env) status() map[string]any {
	e.t.Helper()
	var st map[string]any
	if err := json.Unmarshal([]byte(e.must("status", "--lab", e.lab, "-o", "json")), &st); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// owned lists what segchain installed in every node, as iproute2 and
// bpffs show it: routes and rules of protocol nodestate.Proto, seg6 HMAC keys aside.
func (e *env) owned() string {
	e.t.Helper()
	var b strings.Builder
	for _, n := range e.l.NodeNames() {
		p := fmt.Sprint(nodestate.Proto)
		for _, c := range [][]string{{"-6", "route", "show", "table", "all", "proto", p}, {"-4", "route", "show", "table", "all", "proto", p},
			{"-6", "rule", "show", "proto", p}, {"-4", "rule", "show", "proto", p}} {
			out, err := exec.Command("ip", append([]string{"-N", "-n", e.ns(n)}, c...)...).CombinedOutput()
			if err != nil {
				e.t.Fatalf("ip %v: %v\n%s", c, err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				// `ip rule show proto N` lists every rule on some iproute2
				// versions: keep segchain's.
				if line = strings.TrimSpace(line); line != "" && (c[1] == "route" || strings.Contains(line, "proto "+p)) {
					fmt.Fprintf(&b, "%s: %s\n", n, line)
				}
			}
		}
	}
	return b.String()
}

// seqstream is scripts/seqstream.py (sequence-numbered UDP stream).
const seqstream = "../../scripts/seqstream.py"

// stream sends count datagrams s → d:port at rate/s, running during
// meanwhile, and returns the receiver's counts.
func (e *env) stream(port, count, rate int, during func()) testutil.StreamResult {
	e.t.Helper()
	return testutil.Stream(e.t, seqstream, e.ns("s"), e.ns("d"), "fc00:4d::d", port, count, rate, during)
}
