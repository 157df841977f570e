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
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

const domainFile = "../../examples/default.yaml"

// env is the default domain's lab (or another file's), its agents local
// or remote (labenv: cleaned up and checked for leftovers at the end).
type env struct{ *labenv.Env }

// newEnv brings up the default domain's lab under a unique name
// (h18-...), with agents or without.
func newEnv(t *testing.T, agents bool) *env { return newEnvFile(t, agents, "h18-", domainFile) }

// newEnvPrefix is newEnv with the lab's name starting with prefix.
func newEnvPrefix(t *testing.T, agents bool, prefix string) *env {
	return newEnvFile(t, agents, prefix, domainFile)
}

// newEnvFile is newEnvPrefix with the lab brought up from file.
func newEnvFile(t *testing.T, agents bool, prefix, file string) *env {
	return &env{labenv.New(t, labenv.Options{File: file, Prefix: prefix, CLI: true, Binary: segchainBin, Agents: agents})}
}

// status is `segchain status -o json` as generic JSON.
func (e *env) status() map[string]any {
	e.T.Helper()
	var st map[string]any
	if err := json.Unmarshal([]byte(e.Must("status", "--lab", e.Name, "-o", "json")), &st); err != nil {
		e.T.Fatal(err)
	}
	return st
}

// owned lists what segchain installed in every node, as iproute2 and
// bpffs show it: routes and rules of protocol nodestate.Proto, seg6 HMAC keys aside.
func (e *env) owned() string {
	e.T.Helper()
	var b strings.Builder
	for _, n := range e.Lab.NodeNames() {
		p := fmt.Sprint(nodestate.Proto)
		for _, c := range [][]string{{"-6", "route", "show", "table", "all", "proto", p}, {"-4", "route", "show", "table", "all", "proto", p},
			{"-6", "rule", "show", "proto", p}, {"-4", "rule", "show", "proto", p}} {
			out, err := exec.Command("ip", append([]string{"-N", "-n", e.NS(n)}, c...)...).CombinedOutput()
			if err != nil {
				e.T.Fatalf("ip %v: %v\n%s", c, err, out)
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
	e.T.Helper()
	return testutil.Stream(e.T, seqstream, e.NS("s"), e.NS("d"), "fc00:4d::d", port, count, rate, during)
}
