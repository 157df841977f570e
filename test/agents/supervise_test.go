package agents

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
)

// lsAgent is an agent in `segchain lab ls -o json`.
type lsAgent struct {
	Addr     string `json:"addr"`
	Metrics  string `json:"metrics"`
	Log      string `json:"log"`
	PID      int    `json:"pid"`
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
	LastExit string `json:"last_exit"`
}

type lsLab struct {
	Name       string             `json:"name"`
	Agents     map[string]lsAgent `json:"agents"`
	Supervisor *struct {
		PID     int  `json:"pid"`
		Running bool `json:"running"`
	} `json:"supervisor"`
}

// labLs is `segchain lab ls --lab NAME -o json` for one lab.
func labLs(t testing.TB, name string) lsLab {
	t.Helper()
	out := testutil.MustSegchain(t, segchainBin, "lab", "ls", "--lab", name, "-o", "json")
	var labs []lsLab
	if err := json.Unmarshal([]byte(out), &labs); err != nil || len(labs) != 1 {
		t.Fatalf("lab ls -o json: %v (%d labs)\n%s", err, len(labs), out)
	}
	return labs[0]
}

// procsOf lists the live processes that belong to lab name: its
// supervisor and every process whose command line names one of its
// namespaces (sc-NAME-…) or that runs in one of them.
func procsOf(name string, nss []string) []string {
	inos := map[uint64]bool{}
	for _, ns := range nss {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/run/netns", ns), &st) == nil {
			inos[st.Ino] = true
		}
	}
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !testutil.Alive(pid) {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cl := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
		var st syscall.Stat_t
		inNs := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil && inos[st.Ino]
		if strings.Contains(cl, "sc-"+name+"-") || strings.Contains(cl, "supervise --lab "+name) || inNs {
			out = append(out, fmt.Sprintf("%d %s", pid, cl))
		}
	}
	return out
}

// An agent killed with kill -9 comes back by itself (the lab's
// supervisor), lab ls shows its state, pid, address, metrics and log,
// and apply works through it. Killed again while its supervisor is dead,
// it stays down: apply's error names the node and how to bring it back,
// and lab restart-agents does.
func TestPrivilegedAgentRestartedAfterKill9(t *testing.T) {
	e := newEnvPrefix(t, true, "h5s-")
	const x = "nfv1"
	before := labLs(t, e.Name)
	a := before.Agents[x]
	if a.State != "running" || a.PID <= 0 || a.Addr == "" || a.Metrics == "" || a.Log == "" {
		t.Fatalf("lab ls: agent %s = %+v, want running with pid, address, metrics and log", x, a)
	}
	if before.Supervisor == nil || !before.Supervisor.Running {
		t.Fatalf("lab ls: supervisor %+v, want running", before.Supervisor)
	}
	if err := syscall.Kill(a.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var now lsAgent
	if !waitFor(30*time.Second, func() bool {
		now = labLs(t, e.Name).Agents[x]
		return now.State == "running" && now.PID > 0 && now.PID != a.PID
	}) {
		t.Fatalf("agent %s not restarted after kill -9: %+v", x, now)
	}
	if now.Restarts < 1 || !strings.Contains(now.LastExit, "killed") {
		t.Errorf("restarted agent: restarts %d, last exit %q; want ≥ 1 and the kill", now.Restarts, now.LastExit)
	}
	if testutil.Alive(a.PID) {
		t.Errorf("the killed agent pid %d is still alive", a.PID)
	}
	e.Must("apply", "--lab", e.Name)
	if code, o := e.statusCheck(); code != 0 {
		t.Errorf("status --check after apply through the restarted agent: exit %d\n%s", code, o)
	}

	// No supervisor: the agent stays dead and the error says what to do.
	if err := syscall.Kill(before.Supervisor.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(10*time.Second, func() bool { return !testutil.Alive(before.Supervisor.PID) })
	if err := syscall.Kill(now.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(10*time.Second, func() bool { return !testutil.Alive(now.PID) })
	out, err := e.Run("plan", "--lab", e.Name)
	hint := "segchain lab restart-agents --lab " + e.Name + " " + x
	if err == nil || !strings.Contains(out, "node "+x) || !strings.Contains(out, "unreachable") || !strings.Contains(out, hint) {
		t.Fatalf("plan with %s's agent and supervisor dead: %v; want the node, \"unreachable\" and %q:\n%s", x, err, hint, out)
	}
	if got := labLs(t, e.Name); got.Supervisor.Running || got.Agents[x].State != "dead" {
		t.Errorf("lab ls with the supervisor killed: supervisor running=%v, %s %q; want false, dead", got.Supervisor.Running, x, got.Agents[x].State)
	}
	e.Must("lab", "restart-agents", "--lab", e.Name, x)
	if got := labLs(t, e.Name); !got.Supervisor.Running || got.Agents[x].State != "running" {
		t.Errorf("after lab restart-agents: supervisor running=%v, %s %q", got.Supervisor.Running, x, got.Agents[x].State)
	}
	e.Must("apply", "--lab", e.Name)
}

// The supervisor's records against the processes, under repeated kill -9
// while lab ls reads them (run with -count=3): every read parses, and
// once an agent is back the recorded pid is the one live agent of its
// node. Then an agent killed right before lab down (the supervisor about
// to restart it), and one started by hand: lab down leaves no process of
// the lab behind — supervisor, agents, or anything in its namespaces.
func TestPrivilegedSupervisorRaceAndLabDown(t *testing.T) {
	testutil.RequirePrivileged(t)
	if segchainBin == "" {
		t.Skip("segchain binary not built")
	}
	name := testutil.UniqueName("h5d-")
	down := false
	var nss []string
	t.Cleanup(func() {
		if !down {
			testutil.Segchain(segchainBin, "lab", "down", "--lab", name)
		}
		for _, p := range procsOf(name, nss) {
			pid, _ := strconv.Atoi(strings.Fields(p)[0])
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	testutil.MustSegchain(t, segchainBin, "lab", "up", "-f", domainFile, "--lab", name, "--agents")
	ls := labLs(t, name)
	var nodes []string
	for n := range ls.Agents {
		nodes = append(nodes, n, n) // each twice: restarts in a row
		nss = append(nss, "sc-"+name+"-"+n)
	}

	// Readers of lab ls during the kills.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	var mu sync.Mutex
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				out, err := testutil.Segchain(segchainBin, "lab", "ls", "--lab", name, "-o", "json")
				var labs []lsLab
				if err == nil {
					err = json.Unmarshal([]byte(out), &labs)
				}
				if err != nil {
					mu.Lock()
					readErr = fmt.Errorf("%v\n%s", err, out)
					mu.Unlock()
				}
			}
		}()
	}
	for i, n := range nodes[:6] {
		old := labLs(t, name).Agents[n]
		if err := syscall.Kill(old.PID, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: agent %s pid %d: %v", i, n, old.PID, err)
		}
		var now lsAgent
		if !waitFor(30*time.Second, func() bool {
			now = labLs(t, name).Agents[n]
			return now.State == "running" && now.PID != old.PID && now.PID > 0
		}) {
			t.Fatalf("kill %d: agent %s not back: %+v", i, n, now)
		}
		// The recorded pid is the node's only agent, alive.
		var agents []string
		for _, p := range procsOf(name, nil) {
			if strings.Contains(p, " agent --node "+n+" ") {
				agents = append(agents, p)
			}
		}
		if len(agents) != 1 || !strings.HasPrefix(agents[0], strconv.Itoa(now.PID)+" ") {
			t.Errorf("kill %d: node %s: recorded pid %d, agent processes %q", i, n, now.PID, agents)
		}
	}
	close(stop)
	wg.Wait()
	if readErr != nil {
		t.Errorf("lab ls -o json during the restarts: %v", readErr)
	}

	// One agent started by hand (another port), one killed just before
	// lab down.
	ls = labLs(t, name)
	hand := ls.Agents["nfv2"]
	addr := strings.Replace(hand.Addr, "]:7070", "]:7071", 1)
	hc := exec.Command(segchainBin, "agent", "--node", "nfv2", "--netns", "sc-"+name+"-nfv2", "--listen", addr,
		"--pki", filepath.Join("/run/segchain/labs", name+".agents", "pki"), "--state-dir", t.TempDir(), "--metrics", "[::1]:0")
	hc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := hc.Start(); err != nil {
		t.Fatal(err)
	}
	go hc.Wait()
	if !waitFor(10*time.Second, func() bool { return testutil.Alive(hc.Process.Pid) }) {
		t.Fatal("the hand-started agent did not start")
	}
	if err := syscall.Kill(ls.Agents["r1"].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !waitFor(30*time.Second, func() bool { return len(procsOf(name, nss)) > 0 }) {
		t.Fatal("no process of the lab to look for")
	}
	testutil.MustSegchain(t, segchainBin, "lab", "down", "--lab", name)
	down = true
	if left := procsOf(name, nss); len(left) > 0 {
		t.Errorf("processes of lab %s outlived lab down:\n%s", name, strings.Join(left, "\n"))
	}
	if testutil.Alive(ls.Supervisor.PID) {
		t.Errorf("supervisor pid %d outlived lab down", ls.Supervisor.PID)
	}
	if testutil.Alive(hc.Process.Pid) {
		t.Errorf("the agent started by hand (pid %d) outlived lab down", hc.Process.Pid)
	}
}
