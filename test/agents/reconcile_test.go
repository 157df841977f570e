package agents

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/reconcile"
	"github.com/segchain/segchain/internal/nodelock"
	"github.com/segchain/segchain/internal/nodestate"
)

// statusCheck is `segchain status --lab L --check`'s exit status (0 every
// node as the domain, 2 drift), and its output.
func (e *env) statusCheck() (int, string) {
	e.T.Helper()
	out, err := e.Run("status", "--lab", e.Name, "--check")
	if err == nil {
		return 0, out
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		e.T.Fatalf("status --check: %v\n%s", err, out)
	}
	return ee.ExitCode(), out
}

// ownedRoute is one IPv6 route segchain installed on node: its
// destination and table as `ip route del` takes them.
type ownedRoute struct{ dst, table string }

func (r ownedRoute) args() []string {
	a := []string{r.dst, "proto", fmt.Sprint(nodestate.Proto)}
	if r.table != "" {
		a = append(a, "table", r.table)
	}
	return a
}

// ownedRoutes lists node's IPv6 routes of protocol nodestate.Proto (iproute2's JSON).
func (e *env) ownedRoutes(node string) []ownedRoute {
	e.T.Helper()
	out, err := exec.Command("ip", "-n", e.NS(node), "-6", "-j", "route", "show", "table", "all", "proto", fmt.Sprint(nodestate.Proto)).Output()
	if err != nil {
		e.T.Fatalf("ip route show: %v", err)
	}
	var rs []struct {
		Dst   string `json:"dst"`
		Table string `json:"table"`
	}
	if err := json.Unmarshal(out, &rs); err != nil {
		e.T.Fatalf("ip -j route: %v\n%s", err, out)
	}
	var got []ownedRoute
	for _, r := range rs {
		if r.Table == "main" {
			r.Table = ""
		}
		got = append(got, ownedRoute{r.Dst, r.Table})
	}
	return got
}

// delRoute deletes node's route r by hand, behind segchain's back.
func (e *env) delRoute(node string, r ownedRoute) {
	e.T.Helper()
	args := append([]string{"-n", e.NS(node), "-6", "route", "del"}, r.args()...)
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		e.T.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (e *env) hasRoute(node string, r ownedRoute) bool {
	e.T.Helper()
	args := append([]string{"-n", e.NS(node), "-6", "route", "show"}, r.args()...)
	out, err := exec.Command("ip", args...).CombinedOutput()
	return err == nil && strings.TrimSpace(string(out)) != ""
}

// waitFor polls cond every 100 ms until it holds or limit passes.
func waitFor(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// agentLog returns the records of node's agent log (JSON lines) whose
// message is msg, or starts with it when msg ends with a colon.
func (e *env) agentLog(node, msg string) []map[string]any {
	e.T.Helper()
	f, err := os.Open(e.Lab.Agents[node].Log)
	if err != nil {
		e.T.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			if got, _ := m["msg"].(string); got == msg || strings.HasSuffix(msg, ":") && strings.HasPrefix(got, msg) {
				out = append(out, m)
			}
		}
	}
	return out
}

// scrape reads node's agent /metrics.
func (e *env) scrape(node string) string {
	e.T.Helper()
	resp, err := http.Get("http://" + e.Lab.Agents[node].Metrics + "/metrics")
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		e.T.Fatalf("scrape %s: %s\n%s", node, resp.Status, b)
	}
	return string(b)
}

// metric reads one sample of node's agent /metrics (the full series
// name with its labels, as exposed).
func (e *env) metric(node, series string) float64 {
	e.T.Helper()
	for _, l := range strings.Split(e.scrape(node), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				e.T.Fatalf("metric %s: %q", series, l)
			}
			return f
		}
	}
	return 0
}

// An agent started with --reconcile puts back, within a bound, what was
// changed behind segchain's back — a route deleted by hand, the routes a
// link took with it when it went down — from the intent the last apply
// handed the agent (kept across the agent's restart); an agent without
// --reconcile leaves the drift for status --check to report.
func TestPrivilegedAgentReconcile(t *testing.T) {
	e := newEnvPrefix(t, true, "h18r-")
	e.Must("apply", "--lab", e.Name)
	// nfv1's agent again, now with --reconcile: the intent was handed to
	// the process before (kept in its state directory).
	if err := e.Lab.StopAgent("nfv1", false); err != nil {
		t.Fatal(err)
	}
	if err := e.Lab.StartAgent(segchainBin, "nfv1", "--reconcile", "--reconcile-interval", "1s"); err != nil {
		t.Fatal(err)
	}
	if code, out := e.statusCheck(); code != 0 {
		t.Fatalf("status --check after apply: exit %d\n%s", code, out)
	}

	// nfv1: a route deleted by hand comes back.
	rs := e.ownedRoutes("nfv1")
	if len(rs) == 0 {
		t.Fatal("nfv1 has no segchain route")
	}
	victim := rs[0]
	e.delRoute("nfv1", victim)
	if !waitFor(15*time.Second, func() bool { return e.hasRoute("nfv1", victim) }) {
		t.Fatalf("nfv1: route %v not re-applied within 15 s (agent --reconcile-interval 1s)", victim)
	}
	if code, out := e.statusCheck(); code != 0 {
		t.Errorf("status --check after the reconcile: exit %d, want 0\n%s", code, out)
	}
	drift := e.agentLog("nfv1", "reconcile: drift")
	reapplied := e.agentLog("nfv1", "reconcile: re-applied the intent")
	if len(drift) == 0 || len(reapplied) == 0 {
		t.Fatalf("nfv1's agent log has %d drift and %d re-applied lines", len(drift), len(reapplied))
	}
	for _, m := range []map[string]any{drift[0], reapplied[0]} {
		b, _ := json.Marshal(m)
		t.Logf("nfv1's agent: %s", b)
	}
	dst := victim.dst
	if !strings.Contains(dst, "/") {
		dst += "/128" // iproute2 prints a host route without its length
	}
	if s, _ := json.Marshal(drift[0]["drift"]); !strings.Contains(string(s), "+ route "+dst+" ") {
		t.Errorf("drift logged: %s, want the deleted route %s", s, dst)
	}
	if n := e.metric("nfv1", `segchain_agent_reconciles_total{result="applied"}`); n < 1 {
		t.Errorf(`segchain_agent_reconciles_total{result="applied"} = %v, want ≥ 1`, n)
	}

	// nfv2 runs without --reconcile: the drift stays, and is reported.
	rs2 := e.ownedRoutes("nfv2")
	if len(rs2) == 0 {
		t.Fatal("nfv2 has no segchain route")
	}
	e.delRoute("nfv2", rs2[0])
	// Nothing on nfv2 can put it back: its agent never started a
	// reconciler (it would have logged "reconcile: on"). No wait needed.
	if len(e.agentLog("nfv1", "reconcile: on")) == 0 {
		t.Fatal(`nfv1's agent (--reconcile) did not log "reconcile: on": the absence on nfv2 would prove nothing`)
	}
	if on := e.agentLog("nfv2", "reconcile: on"); len(on) != 0 {
		t.Fatalf("nfv2's agent (no --reconcile) runs a reconciler: %v", on)
	}
	if e.hasRoute("nfv2", rs2[0]) {
		t.Errorf("nfv2 (no --reconcile): route %v came back by itself", rs2[0])
	}
	code, out := e.statusCheck()
	if code != 2 || !strings.Contains(out, "node nfv2") {
		t.Errorf("status --check with nfv2 drifted: exit %d, want 2 naming nfv2\n%s", code, out)
	}
	if strings.Contains(out, "node nfv1 has") {
		t.Errorf("nfv1 reported drifted:\n%s", out)
	}
	if n := len(e.agentLog("nfv2", "reconcile:")); n != 0 {
		t.Errorf("nfv2's agent (no --reconcile) logged %d reconcile lines", n)
	}
	e.Must("apply", "--lab", e.Name)
	if code, out := e.statusCheck(); code != 0 {
		t.Fatalf("status --check after apply: exit %d\n%s", code, out)
	}

	// A link that goes down takes its routes with it; when it comes up
	// the reconcile is triggered at once (the interval is an hour).
	if err := e.Lab.StopAgent("nfv1", false); err != nil {
		t.Fatal(err)
	}
	if err := e.Lab.StartAgent(segchainBin, "nfv1", "--reconcile", "--reconcile-interval", "1h"); err != nil {
		t.Fatal(err)
	}
	before := len(e.ownedRoutes("nfv1"))
	ip := func(args ...string) {
		if out, err := exec.Command("ip", append([]string{"-n", e.NS("nfv1")}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	ip("link", "set", "eth-r2", "down")
	if after := len(e.ownedRoutes("nfv1")); after >= before {
		t.Fatalf("nfv1: eth-r2 down left %d of %d segchain routes: no route through it to lose", after, before)
	}
	if code, _ := e.statusCheck(); code != 2 {
		t.Errorf("status --check with eth-r2 down: exit %d, want 2", code)
	}
	ip("link", "set", "eth-r2", "up")
	if !waitFor(10*time.Second, func() bool { code, _ := e.statusCheck(); return code == 0 }) {
		code, out := e.statusCheck()
		t.Fatalf("nfv1: eth-r2 up, not reconciled within 10 s: status --check exit %d\n%s", code, out)
	}
	var linkTriggered bool
	for _, m := range e.agentLog("nfv1", "reconcile: re-applied the intent") {
		tr, _ := m["trigger"].(string)
		linkTriggered = linkTriggered || strings.Contains(tr, "link up: ") && strings.Contains(tr, "eth-r2")
	}
	if !linkTriggered {
		t.Errorf("no re-apply triggered by eth-r2 coming up in nfv1's agent log")
	}

	// A controller that changes the node and hands no intent (an apply
	// running, or one that failed) suspends the reconcile, durably: it
	// must not undo that controller's work, not even after a restart.
	ctx := context.Background()
	ctl := controller(t, e.Lab, "nfv1")
	if err := ctl.AcquireLease(ctx, "pid 4242 (segchain apply) on host ops1", time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := ctl.Observe(ctx, &nodestate.Node{Name: "nfv1"})
	if err != nil || len(got.Routes) == 0 {
		t.Fatalf("observe nfv1: %v", err)
	}
	same := got.Routes[0]
	if _, err := ctl.Execute(ctx, []agent.Op{{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &same, OldRoute: &same}}); err != nil {
		t.Fatal(err)
	}
	if err := ctl.ReleaseLease(ctx); err != nil {
		t.Fatal(err)
	}
	if in := e.intent("nfv1"); in.Superseded == "" {
		t.Fatalf("nfv1's intent not suspended by a controller's Execute: %+v", in)
	}
	if err := e.Lab.StopAgent("nfv1", false); err != nil {
		t.Fatal(err)
	}
	if err := e.Lab.StartAgent(segchainBin, "nfv1", "--reconcile", "--reconcile-interval", "1s"); err != nil {
		t.Fatal(err)
	}
	victim = e.ownedRoutes("nfv1")[0]
	e.delRoute("nfv1", victim)
	// Two checks after the deletion (the interval is 1 s) decided idle:
	// the agent looked and, its intent suspended, left the node alone.
	idleChecks := `segchain_agent_reconcile_checks_total{decision="idle"}`
	for from, deadline := e.metric("nfv1", idleChecks), time.Now().Add(30*time.Second); e.metric("nfv1", idleChecks) < from+2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nfv1's agent ran no two reconcile checks in 30 s (%s)", idleChecks)
		}
	}
	if e.hasRoute("nfv1", victim) {
		t.Errorf("nfv1: route %v put back under a suspended intent", victim)
	}
	var idle bool
	for _, m := range e.agentLog("nfv1", "reconcile: idle") {
		r, _ := m["reason"].(string)
		idle = idle || strings.Contains(r, "intent suspended")
	}
	if !idle {
		t.Errorf("nfv1's agent did not log that its intent is suspended")
	}
	// The next apply hands the intent again: reconcile resumes.
	e.Must("apply", "--lab", e.Name)
	if in := e.intent("nfv1"); in.Superseded != "" {
		t.Errorf("nfv1's intent still suspended after an apply: %+v", in)
	}
	victim = e.ownedRoutes("nfv1")[0]
	e.delRoute("nfv1", victim)
	if !waitFor(15*time.Second, func() bool { return e.hasRoute("nfv1", victim) }) {
		t.Errorf("nfv1: route %v not re-applied after the intent was handed again", victim)
	}
}

// intent reads the intent node's agent keeps.
func (e *env) intent(node string) reconcile.Intent {
	e.T.Helper()
	b, err := os.ReadFile(filepath.Join("/run/segchain/labs", e.Name+".agents", "state", node, reconcile.File))
	if err != nil {
		e.T.Fatal(err)
	}
	var in reconcile.Intent
	if err := json.Unmarshal(b, &in); err != nil {
		e.T.Fatal(err)
	}
	return in
}

// An agent that dies in the middle of an apply: the apply fails naming
// the node, every other node is rolled back to exactly its state before
// the apply; once the agent is back, the next apply converges (undoing
// the journal the dead agent left) and destroy leaves nothing.
//
// Deterministic: the test holds the headend's node lock (the one its
// agent takes around each Execute), so that the agent, once every
// endpoint has changed (make-before-break: headends come last), blocks
// inside its Execute; the op it journals before running it says when
// that is. Then the agent is SIGKILLed.
func TestPrivilegedAgentDiesMidApply(t *testing.T) {
	e := newEnvPrefix(t, true, "h18r-")
	const x = "ingress" // the domain's headend: its adds run in the last phase
	var others []string
	for _, n := range e.Lab.NodeNames() {
		if n != x {
			others = append(others, n)
		}
	}
	clean := e.snapshot()
	cleanOthers := withoutSaved(e.snapshotOf(others))

	key, err := nsKey(e.NS(x))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := nodelock.Acquire(context.Background(), []nodelock.Node{{Key: key, Name: x}}, nodelock.Options{NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()

	apply := exec.Command(segchainBin, "apply", "--lab", e.Name)
	var out strings.Builder
	apply.Stdout, apply.Stderr = &out, &out
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- apply.Wait() }()
	defer apply.Process.Kill()

	journal := filepath.Join("/run/segchain/labs", e.Name+".agents", "state", x, "journal", "*", "journal")
	inExecute := waitFor(60*time.Second, func() bool {
		js, _ := filepath.Glob(journal)
		for _, j := range js {
			if b, _ := os.ReadFile(j); strings.Count(string(b), "\n") >= 2 { // the header and one op
				return true
			}
		}
		return false
	})
	if !inExecute {
		t.Fatalf("%s's agent never started an Execute; apply:\n%s", x, out.String())
	}
	if mid := withoutSaved(e.snapshotOf(others)); mid == cleanOthers {
		t.Fatal("no other node changed before the headend's phase: nothing to roll back")
	}
	if err := e.Lab.StopAgent(x, true); err != nil { // SIGKILL
		t.Fatal(err)
	}
	select {
	case err = <-ended:
	case <-time.After(2 * time.Minute):
		t.Fatalf("apply still running 2 min after %s's agent died:\n%s", x, out.String())
	}
	if err == nil {
		t.Fatalf("apply succeeded with %s's agent killed:\n%s", x, out.String())
	}
	msg := out.String()
	if i := strings.LastIndex(msg, "segchain: "); i >= 0 {
		t.Logf("apply's report: %s", msg[i:])
	}
	if !strings.Contains(msg, "node "+x+":") || !strings.Contains(msg, "every node rolled back to its previous state") {
		t.Errorf("apply's report does not name node %s and the rollback:\n%s", x, msg)
	}
	lock.Release()
	if got := withoutSaved(e.snapshotOf(others)); got != cleanOthers {
		t.Errorf("the other nodes are not as before the apply (-before +after):\n%s", lineDiff(cleanOthers, got))
	}
	// The dead agent's node: its kernel state untouched; its journal
	// holds the op it was about to run.
	if js, _ := filepath.Glob(journal); len(js) != 1 {
		t.Errorf("%s's journal: %v, want the dead agent's", x, js)
	}

	if err := e.Lab.StartAgent(segchainBin, x); err != nil {
		t.Fatal(err)
	}
	if o := e.Must("apply", "--lab", e.Name); !strings.Contains(o, "recovery: node "+x) {
		t.Errorf("the next apply did not recover %s's journal:\n%s", x, o)
	}
	if code, o := e.statusCheck(); code != 0 {
		t.Errorf("status --check after the next apply: exit %d\n%s", code, o)
	}
	e.Must("destroy", "--lab", e.Name)
	if got := e.snapshot(); got != clean {
		t.Errorf("destroy left residue (-clean +after):\n%s", lineDiff(clean, got))
	}
}

// withoutSaved drops the files where agents keep the sysctl values a
// node had before segchain first changed them (the local agent's Originals):
// the agent's memory, kept until destroy by design, not kernel state.
func withoutSaved(snap string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(snap, "\n") {
		if !strings.HasPrefix(l, "/run/segchain/nodes/") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// lineDiff lists the lines only in a (-) or only in b (+).
func lineDiff(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out strings.Builder
	for l, n := range count {
		for ; n > 0; n-- {
			out.WriteString("- " + l + "\n")
		}
		for ; n < 0; n++ {
			out.WriteString("+ " + l + "\n")
		}
	}
	return out.String()
}
