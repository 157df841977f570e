// Package bgp runs routing: bgp domains in labs: GoBGP speakers in the
// segchain agents, FRR on the routers, chains over BGP-learned routes,
// failover when a link loses carrier, and bad input.
package bgp

import (
	"encoding/json"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/testutil"
)

var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

const domainFile = "../../examples/redundant.yaml"

type env struct {
	t   *testing.T
	lab string
	l   *lab.Lab
}

// newEnv brings up file's lab under a unique name (h19-...): lab up
// starts an agent per node and FRR on the routers. At the end, even when
// the test fails, it destroys and takes the lab down and checks that no
// agent and no FRR daemon outlives it.
func newEnv(t *testing.T, file string) *env {
	t.Helper()
	return newEnvArgs(t, file, true)
}

// newEnvArgs is newEnv; bgp says the file is a bgp domain (FRR expected
// when it has routers), otherwise the lab gets --agents explicitly.
func newEnvArgs(t *testing.T, file string, bgp bool) *env {
	t.Helper()
	return newEnvPrefix(t, file, bgp, "h19-")
}

// newEnvPrefix is newEnvArgs with the lab named prefix + a random suffix.
func newEnvPrefix(t *testing.T, file string, bgp bool, prefix string) *env {
	t.Helper()
	testutil.RequirePrivileged(t)
	if segchainBin == "" {
		t.Skip("segchain binary not built")
	}
	if err := frr.Installed(); err != nil {
		t.Fatalf("routers need FRR (make deps): %v", err)
	}
	e := &env{t: t, lab: testutil.UniqueName(prefix)}
	t.Cleanup(func() {
		var pids []int
		l, err := lab.Get(e.lab)
		if err != nil {
			return // the test took it down itself
		}
		for _, a := range l.Agents {
			pids = append(pids, a.PID)
		}
		for _, dir := range l.FRR {
			for _, p := range frr.PIDs(dir) {
				pids = append(pids, p)
			}
		}
		_, _ = e.run("destroy", "--lab", e.lab)
		if out, err := e.run("lab", "down", "--lab", e.lab); err != nil {
			t.Errorf("lab down: %v\n%s", err, out)
		}
		for _, p := range pids {
			if testutil.Alive(p) {
				t.Errorf("pid %d (agent or FRR daemon) outlived lab down", p)
				syscall.Kill(p, syscall.SIGKILL)
			}
		}
	})
	args := []string{"lab", "up", "-f", file, "--lab", e.lab}
	if !bgp {
		args = append(args, "--agents")
	}
	e.must(args...)
	l, err := lab.Get(e.lab)
	if err != nil {
		t.Fatal(err)
	}
	e.l = l
	if len(l.Agents) != len(l.Nodes) {
		t.Fatalf("routing: bgp lab has %d agents for %d nodes", len(l.Agents), len(l.Nodes))
	}
	if bgp && len(l.FRR) == 0 {
		t.Fatal("routing: bgp lab runs no FRR")
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

// hop is one next hop of a route as `ip -j route` prints it.
type hop struct {
	Gateway string `json:"gateway"`
	Dev     string `json:"dev"`
}

// bgpRoutes reads node's routes of protocol 199 (the speaker's) with
// iproute2, an oracle segchain did not write: destination → next-hop
// devices, sorted.
func (e *env) bgpRoutes(node string) map[string][]string {
	e.t.Helper()
	out, err := exec.Command("ip", "-6", "-j", "-n", e.ns(node), "route", "show", "proto", "199").Output()
	if err != nil {
		e.t.Fatalf("ip route (%s): %v", node, err)
	}
	var rs []struct {
		Dst string `json:"dst"`
		hop
		Nexthops []hop `json:"nexthops"`
	}
	if err := json.Unmarshal(out, &rs); err != nil {
		e.t.Fatalf("ip -j route: %v\n%s", err, out)
	}
	m := map[string][]string{}
	for _, r := range rs {
		hops := r.Nexthops
		if len(hops) == 0 {
			hops = []hop{r.hop}
		}
		for _, h := range hops {
			m[r.Dst] = append(m[r.Dst], h.Dev)
		}
		sort.Strings(m[r.Dst])
	}
	return m
}

// waitRoute waits until node routes dst over exactly devs (nil: no
// route) and returns how long it took.
func (e *env) waitRoute(node, dst string, devs []string, limit time.Duration) time.Duration {
	e.t.Helper()
	start := time.Now()
	want := strings.Join(devs, ",")
	var got string
	for time.Since(start) < limit {
		got = strings.Join(e.bgpRoutes(node)[dst], ",")
		if got == want {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("%s: route to %s over %q, want %q after %v\nstatus:\n%s", node, dst, got, want, limit, e.must("status", "--lab", e.lab))
	return 0
}

// vtyshRoutes is what FRR on router knows in IPv6 unicast (vtysh, through
// segchain lab exec): the destinations of `show bgp ipv6 unicast json`.
func (e *env) vtyshRoutes(router string) []string {
	e.t.Helper()
	out := e.must("lab", "exec", "--lab", e.lab, router, "--", "vtysh", "-c", "show bgp ipv6 unicast json")
	if i := strings.IndexByte(out, '{'); i > 0 {
		out = out[i:] // vtysh's own warnings
	}
	var v struct {
		Routes map[string]any `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		e.t.Fatalf("vtysh json: %v\n%s", err, out)
	}
	var dsts []string
	for d := range v.Routes {
		dsts = append(dsts, d)
	}
	sort.Strings(dsts)
	return dsts
}

// session is one BGP session in status -o json.
type session struct {
	Node     string `json:"node"`
	Peer     string `json:"peer"`
	ASN      uint32 `json:"asn"`
	State    string `json:"state"`
	Admin    string `json:"admin"`
	Received uint64 `json:"received"`
	Note     string `json:"note"`
}

// sessions is status -o json's BGP sessions per node.
func (e *env) sessions() map[string][]session {
	e.t.Helper()
	var st struct {
		Nodes []struct {
			Node  string    `json:"node"`
			BGP   []session `json:"bgp"`
			Error string    `json:"error"`
		} `json:"nodes"`
	}
	out := e.must("status", "--lab", e.lab, "-o", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		e.t.Fatalf("status json: %v\n%s", err, out)
	}
	m := map[string][]session{}
	for _, n := range st.Nodes {
		if n.Error != "" {
			e.t.Fatalf("status: node %s: %s", n.Node, n.Error)
		}
		m[n.Node] = n.BGP
	}
	return m
}

// waitEstablished waits until every session of every node (GoBGP and
// FRR) is established and has received prefixes (every neighbour
// announces at least its link prefixes).
func (e *env) waitEstablished(limit time.Duration) map[string][]session {
	e.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ss := e.sessions()
		ok := len(ss) > 0
		for _, l := range ss {
			for _, s := range l {
				ok = ok && s.State == "established" && s.Received > 0
			}
		}
		if ok {
			return ss
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("BGP sessions not all established after %v: %+v", limit, ss)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

const seqstream = "../../scripts/seqstream.py"
