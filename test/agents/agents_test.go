package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/pki"
)

// traffic sends the same packets through the default domain's chains:
// native (web: ping), the SR-aware firewall (filtered: UDP 6000, and 6666
// which it drops) and the SR proxy (firewalled: TCP 8080 through sf1).
func (e *env) traffic() {
	e.T.Helper()
	exec.Command("ip", "netns", "exec", e.NS("s"), "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "fc00:4d::d").Run()
	py := `import socket,sys
for p in (6000, 6666):
    s=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    for i in range(5): s.sendto(b"x"*100, ("fc00:4d::d", p))
t=socket.socket(socket.AF_INET6, socket.SOCK_STREAM); t.settimeout(2)
try: t.connect(("fc00:4d::d", 8080))
except Exception: pass
`
	if out, err := exec.Command("ip", "netns", "exec", e.NS("s"), "python3", "-c", py).CombinedOutput(); err != nil {
		e.T.Fatalf("traffic: %v\n%s", err, out)
	}
	time.Sleep(500 * time.Millisecond) // the last packets reach their SIDs
}

// The same domain applied through agents and in-process: the same
// `status -o json` (chains, every SID with its counters after the same
// traffic, drift, faults), the same kernel state, and the same residue
// after destroy: none.
func TestPrivilegedAgentsMatchInProcess(t *testing.T) {
	results := map[bool]map[string]any{}
	kernel := map[bool]string{}
	for _, agents := range []bool{false, true} {
		e := newEnv(t, agents)
		out := e.Must("apply", "--lab", e.Name)
		if !strings.Contains(out, "applied") {
			t.Fatalf("apply: %s", out)
		}
		if out := e.Must("apply", "--lab", e.Name); !strings.Contains(out, "no changes") {
			t.Fatalf("second apply (agents %v) changed something:\n%s", agents, out)
		}
		e.traffic()
		results[agents] = e.status()
		kernel[agents] = strings.ReplaceAll(e.owned(), e.Name, "LAB")
		e.Must("destroy", "--lab", e.Name)
		if left := e.owned(); left != "" {
			t.Errorf("agents %v: destroy left:\n%s", agents, left)
		}
	}
	if diff := cmp.Diff(results[false], results[true]); diff != "" {
		t.Errorf("status -o json differs (-in-process +agents):\n%s", diff)
	}
	if diff := cmp.Diff(kernel[false], kernel[true]); diff != "" {
		t.Errorf("kernel state differs (-in-process +agents):\n%s", diff)
	}
	// The traffic reached the proxy and the firewall (a test that sent
	// nothing would compare equal too).
	var sawProxy, sawFW bool
	nodes, _ := results[true]["nodes"].([]any)
	for _, n := range nodes {
		sids, _ := n.(map[string]any)["sids"].([]any)
		for _, s := range sids {
			sm := s.(map[string]any)
			p, _ := sm["packets"].(float64)
			switch sm["behavior"] {
			case "End.AD":
				sawProxy = sawProxy || p > 0
			case "End.AN.FW":
				sawFW = sawFW || p >= 10
			}
		}
	}
	if !sawProxy || !sawFW {
		t.Errorf("traffic did not reach the proxy (%v) and the firewall (%v)", sawProxy, sawFW)
	}
}

// progIDs lists the eBPF links segchain pinned for ns and the program
// each runs, as bpftool reads them (an oracle segchain did not write): a
// reload would change the program ids.
func progIDs(t *testing.T, ns string) []string {
	key, _, err := bpfpin.Namespace(ns)
	if err != nil {
		t.Fatal(err)
	}
	pins, _ := filepath.Glob(filepath.Join("/sys/fs/bpf/segchain", key, "*", "tcx-*"))
	var ids []string
	for _, p := range pins {
		out, err := exec.Command("bpftool", "-j", "link", "show", "pinned", p).CombinedOutput()
		if err != nil {
			t.Fatalf("bpftool link show pinned %s: %v\n%s", p, err, out)
		}
		var l struct {
			ID     int `json:"id"`
			ProgID int `json:"prog_id"`
		}
		if err := json.Unmarshal(out, &l); err != nil {
			t.Fatalf("bpftool: %v\n%s", err, out)
		}
		ids = append(ids, fmt.Sprintf("%s: link %d prog %d", filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p), l.ID, l.ProgID))
	}
	sort.Strings(ids)
	return ids
}

// Killing an agent with SIGKILL and starting it again under a steady
// stream through the firewall chain loses no packet, reloads no program,
// and the restarted agent serves its node as before (no changes pending).
func TestPrivilegedAgentRestartUnderStream(t *testing.T) {
	e := newEnv(t, true)
	e.Must("apply", "--lab", e.Name)
	before := map[string][]string{}
	for _, n := range []string{"nfv1", "nfv2"} {
		before[n] = progIDs(t, e.NS(n))
		if len(before[n]) == 0 {
			t.Fatalf("node %s: no eBPF program attached", n)
		}
	}
	r := e.stream(6000, 4000, 800, func() {
		for _, n := range []string{"nfv2", "nfv1"} {
			if err := e.Lab.StopAgent(n, true); err != nil {
				t.Error(err)
			}
			if err := e.Lab.StartAgent(segchainBin, n); err != nil {
				t.Error(err)
			}
		}
	})
	if r.Lost != 0 || r.Unique != r.Sent {
		t.Errorf("stream across agent restarts: %+v, want 0 lost", r)
	}
	for n, ids := range before {
		if diff := cmp.Diff(ids, progIDs(t, e.NS(n))); diff != "" {
			t.Errorf("node %s: programs changed across the agent restart (-before +after):\n%s", n, diff)
		}
	}
	if out := e.Must("plan", "--lab", e.Name); !strings.Contains(out, "no changes") {
		t.Errorf("plan after the restarts:\n%s", out)
	}
}

// controller is a client of node's lab agent with the lab's controller
// certificate.
func controller(t *testing.T, l *lab.Lab, node string) *client.Client {
	tc, err := pki.ClientTLS(pki.DirFiles(l.AgentPKI, pki.RoleController, lab.ControllerName), node)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(node, l.Agents[node].Addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A second controller while one holds the leases is refused, naming the
// holder; an unreachable agent fails preflight: in both cases nothing
// changes on any node.
func TestPrivilegedLeaseAndUnreachable(t *testing.T) {
	e := newEnv(t, true)
	other := controller(t, e.Lab, "nfv2")
	if err := other.AcquireLease(context.Background(), "pid 4242 (segchain apply) on host ops1", time.Minute); err != nil {
		t.Fatal(err)
	}
	out, err := e.Run("apply", "--lab", e.Name)
	if err == nil || !strings.Contains(out, "domain is being applied by pid 4242 (segchain apply) on host ops1") {
		t.Fatalf("apply while another controller holds nfv2's lease: %v\n%s", err, out)
	}
	if left := e.owned(); left != "" {
		t.Fatalf("a refused apply changed nodes:\n%s", left)
	}
	if err := other.ReleaseLease(context.Background()); err != nil {
		t.Fatal(err)
	}

	if err := e.Lab.StopAgent("r2", false); err != nil {
		t.Fatal(err)
	}
	out, err = e.Run("apply", "--lab", e.Name)
	if err == nil || !strings.Contains(out, "preflight failed, nothing changed on any node") || !strings.Contains(out, "node r2") {
		t.Fatalf("apply with r2's agent down: %v\n%s", err, out)
	}
	// The error says how to see the agent and bring it back.
	if hint := "segchain lab restart-agents --lab " + e.Name + " r2"; !strings.Contains(out, hint) || !strings.Contains(out, "segchain lab ls --lab "+e.Name) {
		t.Errorf("apply with r2's agent down does not say how to bring it back (%q):\n%s", hint, out)
	}
	if left := e.owned(); left != "" {
		t.Fatalf("a failed preflight changed nodes:\n%s", left)
	}
	if err := e.Lab.StartAgent(segchainBin, "r2"); err != nil {
		t.Fatal(err)
	}
	e.Must("apply", "--lab", e.Name)
}
