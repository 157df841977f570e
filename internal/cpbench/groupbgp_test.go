package cpbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

// groupLab brings fabric f up (lab up --agents=false: FRR on the routers,
// if any, no agent) and serves all its nodes from one `segchain agent group`
// process, as perf control-plane --agents-per-process does; it returns
// the lab, the domain file naming the group's agents, its YAML, and the
// group's pid. The group stops (after a destroy through it) before the
// lab goes down.
func groupLab(t *testing.T, f lab.Fabric, prefix string) (e *labenv.Env, file, y string, pid int) {
	t.Helper()
	y, err := f.YAML()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "fabric.yaml")
	if err := os.WriteFile(plain, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	e = labenv.New(t, labenv.Options{File: plain, Prefix: prefix, CLI: true, Binary: segchainBin, BGP: f.Topology != "line", NoAgents: true, Tools: []string{"ss", "ip"}})
	nodes := e.Lab.NodeNames()
	g, err := startGroups(context.Background(), segchainBin, e.Name, nodes, len(nodes), dir)
	if err != nil {
		if b, rerr := os.ReadFile(filepath.Join(dir, "group0.log")); rerr == nil {
			t.Logf("agent group log:\n%s", b)
		}
		t.Fatal(err)
	}
	if len(g.cmds) != 1 {
		t.Fatalf("%d agent group processes, want 1", len(g.cmds))
	}
	pid = g.cmds[0].Process.Pid
	if y, err = g.domain(y); err != nil {
		g.stop()
		t.Fatal(err)
	}
	file = filepath.Join(dir, "grouped.yaml")
	if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
		g.stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.Run("destroy", "-f", file, "--lab", e.Name)
		g.stop()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "group0.log")); err == nil {
				t.Logf("agent group log (last lines):\n%s", lastLines(string(b), 40))
			}
		}
	})
	return e, file, y, pid
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// socket is one line of `ss -Htnp`: its state, local and peer addresses
// and the pids that hold it.
type socket struct {
	state, local, peer string
	pids               []int
}

// sockets lists the TCP sockets of port 179 (BGP) in namespace ns ("" =
// the test's own) with iproute2's ss, an oracle segchain did not write.
func sockets(t *testing.T, ns string, listening bool) []socket {
	t.Helper()
	args := []string{"-Htnp"}
	if listening {
		args = []string{"-Htlnp"}
	}
	args = append(args, "( sport = :179 or dport = :179 )")
	if ns != "" {
		args = append([]string{"-N", ns}, args...)
	}
	out, err := exec.Command("ss", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ss %v: %v\n%s", args, err, out)
	}
	var ss []socket
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		s := socket{state: f[0], local: f[3], peer: f[4]}
		for _, part := range strings.Split(l, "pid=")[1:] {
			if p, err := strconv.Atoi(strings.FieldsFunc(part, func(r rune) bool { return r < '0' || r > '9' })[0]); err == nil {
				s.pids = append(s.pids, p)
			}
		}
		ss = append(ss, s)
	}
	return ss
}

func heldBy(s socket, pid int) bool {
	for _, p := range s.pids {
		if p == pid {
			return true
		}
	}
	return false
}

// BGP in the lighter mode (docs/scale.md): a small Clos fabric under
// routing: bgp with real FRR on its spines and every node's agent in
// one `segchain agent group` process, each leaf's GoBGP speaker in that
// process:
//   - it converges: every leaf reaches every other leaf's locator (its
//     own or the pod's aggregate) over both spines (bgpconv.go's check,
//     reading each leaf's table in its own namespace);
//   - each leaf's BGP listener and its established sessions (one per
//     spine, the spine's address as peer) are sockets of the group's
//     process inside that leaf's namespace (ss -N), and the group holds
//     no BGP socket in its own (the host's) namespace;
//   - the routes are in the leaf's namespace (ip -n: protocol 199, next
//     hops over the leaf's own spine links), none in the host's.
//
// Fails when the speaker's loop runs on any thread (the listener is then
// the host's: no session comes up, no leaf converges, ss finds no
// listener in a leaf's namespace).
func TestPrivilegedBGPAgentGroup(t *testing.T) {
	f := lab.Fabric{Topology: "clos2", Nodes: 8, Spines: 2, Routing: "bgp", Summaries: true}
	e, file, y, pid := groupLab(t, f, "s17b")
	d, err := config.Parse([]byte(y), ".")
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchBGP(context.Background(), e.Name, y, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if out := e.Must("apply", "-f", file, "--lab", e.Name); !strings.Contains(out, "applied") {
		t.Fatalf("apply: %s", out)
	}
	figs, _, err := w.wait()
	if err != nil {
		t.Fatal(err)
	}
	if figs.BGPLeaves != 4 {
		t.Fatalf("%d leaves watched, want 4", figs.BGPLeaves)
	}

	// Each leaf's neighbours (the spines' addresses on its links) and
	// its devices towards them, as the plan has them.
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	peers := map[string]map[string]bool{}    // leaf → spine addresses
	leafDevs := map[string]map[string]bool{} // leaf → its devices to spines
	for name, n := range p.Nodes {
		if n.BGP == nil {
			continue
		}
		peers[name], leafDevs[name] = map[string]bool{}, map[string]bool{}
		for _, nb := range n.BGP.Neighbors {
			peers[name][nb.Addr.String()], leafDevs[name][nb.Dev] = true, true
		}
	}
	if len(peers) != 4 {
		t.Fatalf("%d leaves with spine links, want 4", len(peers))
	}
	for leaf, want := range peers {
		ns := lab.NetnsName(e.Name, leaf)
		lis := sockets(t, ns, true)
		if len(lis) != 1 || !heldBy(lis[0], pid) || !strings.HasSuffix(lis[0].local, ":179") {
			t.Errorf("%s: BGP listeners in its namespace %+v, want one on :179 held by the group (pid %d)", leaf, lis, pid)
		}
		got := map[string]bool{}
		for _, s := range sockets(t, ns, false) {
			if s.state != "ESTAB" {
				continue
			}
			if !heldBy(s, pid) {
				t.Errorf("%s: established BGP socket %+v not held by the group (pid %d)", leaf, s, pid)
			}
			host, _, _ := strings.Cut(strings.TrimPrefix(s.peer, "["), "]")
			got[host] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: established BGP sessions with %v, want one with each spine %v", leaf, got, want)
		}
		// Its BGP routes are in its namespace, over its own links.
		out, err := exec.Command("ip", "-6", "-j", "-n", ns, "route", "show", "proto", "199").Output()
		if err != nil {
			t.Fatalf("ip route (%s): %v", leaf, err)
		}
		var rs []struct {
			Dst      string `json:"dst"`
			Dev      string `json:"dev"`
			Nexthops []struct {
				Dev string `json:"dev"`
			} `json:"nexthops"`
		}
		if err := json.Unmarshal(out, &rs); err != nil {
			t.Fatalf("ip -j route: %v\n%s", err, out)
		}
		if len(rs) == 0 {
			t.Errorf("%s: no BGP route in its namespace", leaf)
		}
		for _, r := range rs {
			devs := []string{r.Dev}
			if len(r.Nexthops) > 0 {
				devs = nil
				for _, h := range r.Nexthops {
					devs = append(devs, h.Dev)
				}
			}
			for _, dev := range devs {
				if !leafDevs[leaf][dev] {
					t.Errorf("%s: BGP route %s over %s, not one of its spine links", leaf, r.Dst, dev)
				}
			}
		}
	}
	// Nothing of it in the group's own (the host's) namespace.
	for _, s := range append(sockets(t, "", true), sockets(t, "", false)...) {
		if heldBy(s, pid) {
			t.Errorf("the group holds a BGP socket in its own namespace: %+v", s)
		}
	}
	out, err := exec.Command("ip", "-6", "-j", "route", "show", "proto", "199").Output()
	if err != nil {
		t.Fatal(err)
	}
	var host []struct {
		Dst string `json:"dst"`
	}
	if err := json.Unmarshal(out, &host); err != nil {
		t.Fatal(err)
	}
	for _, r := range host {
		if p, err := netip.ParsePrefix(r.Dst); err == nil && netip.MustParsePrefix("fc00::/16").Overlaps(p) {
			t.Errorf("a BGP route of the fabric in the host's namespace: %s", r.Dst)
		}
	}
}

// BGP between agents in a group (a line: every SR node's neighbours are
// other nodes' GoBGP speakers) is refused by apply's preflight with the
// reason, before anything changes: a speaker sharing its process can
// only wait for its neighbours to dial.
func TestPrivilegedBGPAgentGroupLineRefused(t *testing.T) {
	e, file, _, _ := groupLab(t, lab.Fabric{Topology: "line", Nodes: 5, Routing: "bgp"}, "s17b")
	out, err := e.Run("apply", "-f", file, "--lab", e.Name)
	if err == nil {
		t.Fatalf("apply of a line under bgp through an agent group went through:\n%s", out)
	}
	for _, want := range []string{"shares its process with other nodes", "never dials", "run GoBGP", "agent process of its own"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply's refusal lacks %q:\n%s", want, out)
		}
	}
	t.Logf("refused, as it should be:\n%s", out)
	// Refused before anything changed: no BGP speaker's listener.
	for _, n := range e.Lab.NodeNames() {
		if lis := sockets(t, lab.NetnsName(e.Name, n), true); len(lis) != 0 {
			t.Errorf("%s: a BGP listener after the refused apply: %+v", n, lis)
		}
	}
}

// The benchmark refuses the line under bgp with groups before any lab.
func TestOptionsRefuseLineBGPGroups(t *testing.T) {
	_, err := RunOptions(context.Background(), "/nonexistent/segchain", "x", []int{5}, Options{Fabric: lab.Fabric{Topology: "line", Routing: "bgp"}, PerProcess: 5}, nil)
	if err == nil || !strings.Contains(err.Error(), "cannot dial") {
		t.Fatalf("line under bgp with groups: %v, want the refusal", err)
	}
	for _, o := range []Options{
		{Fabric: lab.Fabric{Topology: "clos", Routing: "bgp"}, PerProcess: 5},
		{Fabric: lab.Fabric{Topology: "line", Routing: "bgp"}},
		{Fabric: lab.Fabric{Topology: "line"}, PerProcess: 5},
	} {
		if err := o.check(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}
