package agents

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nodelock"
	"github.com/segchain/segchain/internal/testutil"
)

// sfFile is a chain through one SR proxy whose SF (sf1) has a route back
// to the proxy that segchain installs: `::/0 via fc00:27::2 dev eth-nfv1`.
const sfFile = "../e2e/testdata/mbb.yaml"

// streamProbe sends n sequence-numbered datagrams through the chain
// probe (UDP 7100, s -> ingress -> nfv1's proxy -> sf1 -> egress -> d).
func (e *env) streamProbe(n int) testutil.StreamResult {
	e.T.Helper()
	return testutil.Stream(e.T, "../../scripts/seqstream.py", e.NS("s"), e.NS("d"), "fc00:4d::d", 7100, n, 500, nil)
}

// An SF whose interface goes down and up loses the default route segchain
// installed (the kernel deletes routes through a device set down); the SF
// node's own agent, started with --reconcile, puts it back when the link
// comes up, with no controller and no apply: traffic through the chain
// passes again. The interval is an hour, so only the link event can have
// triggered it; a repair the node's lock held back is retried with
// backoff once the lock is free.
func TestPrivilegedSFLinkFlapRepairedByReconcile(t *testing.T) {
	testutil.RequireTool(t, "python3")
	e := newEnvFile(t, true, "h4f-", sfFile)
	e.Must("apply", "--lab", e.Name)
	if err := e.Lab.StopAgent("sf1", false); err != nil {
		t.Fatal(err)
	}
	if err := e.Lab.StartAgent(segchainBin, "sf1", "--reconcile", "--reconcile-interval", "1h"); err != nil {
		t.Fatal(err)
	}
	if r := e.streamProbe(200); r.Unique != 200 {
		t.Fatalf("before the flap: %d of 200 arrived", r.Unique)
	}
	back := ownedRoute{dst: "default"}
	if !e.hasRoute("sf1", back) {
		t.Fatalf("sf1 has no segchain default route: %v", e.ownedRoutes("sf1"))
	}
	ip := func(args ...string) {
		if out, err := exec.Command("ip", append([]string{"-n", e.NS("sf1")}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	for round := 1; round <= 3; round++ {
		ip("link", "set", "eth-nfv1", "down")
		if e.hasRoute("sf1", back) {
			t.Fatal("sf1: the default route survived eth-nfv1 down: nothing to repair")
		}
		ip("link", "set", "eth-nfv1", "up")
		// A bound on a hang, not a timing check: the condition is polled.
		if !waitFor(30*time.Second, func() bool { return e.hasRoute("sf1", back) }) {
			t.Fatalf("round %d: sf1's default route not back 30 s after eth-nfv1 came up", round)
		}
		if r := e.streamProbe(200); r.Unique != 200 {
			t.Errorf("round %d, after the flap: %d of 200 arrived", round, r.Unique)
		}
	}

	// The link comes up while a local segchain command holds sf1's lock:
	// the reconcile the link triggered is skipped, and retried (backoff)
	// until the lock is free — not left for the hour-long interval.
	key, err := nsKey(e.NS("sf1"))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := nodelock.Acquire(context.Background(), []nodelock.Node{{Key: key, Name: "sf1"}}, nodelock.Options{NoWait: true})
	if err != nil {
		t.Fatal(err)
	}
	skippedBefore := len(e.agentLog("sf1", "reconcile: skipped"))
	ip("link", "set", "eth-nfv1", "down")
	ip("link", "set", "eth-nfv1", "up")
	if !waitFor(30*time.Second, func() bool { return len(e.agentLog("sf1", "reconcile: skipped")) > skippedBefore }) {
		lock.Release()
		t.Fatal("sf1's agent logged no skipped reconcile while its lock was held")
	}
	if e.hasRoute("sf1", back) {
		t.Error("sf1's route came back while its lock was held")
	}
	lock.Release()
	if !waitFor(60*time.Second, func() bool { return e.hasRoute("sf1", back) }) {
		t.Fatal("sf1's default route not back 60 s after its lock was released (reconcile not retried)")
	}
	if r := e.streamProbe(200); r.Unique != 200 {
		t.Errorf("after the retried repair: %d of 200 arrived", r.Unique)
	}
	if code, out := e.statusCheck(); code != 0 {
		t.Errorf("status --check after the repairs: exit %d\n%s", code, out)
	}
	var linkTriggered int
	for _, m := range e.agentLog("sf1", "reconcile: re-applied the intent") {
		if tr, _ := m["trigger"].(string); strings.Contains(tr, "link up: ") && strings.Contains(tr, "eth-nfv1") {
			linkTriggered++
		}
	}
	if linkTriggered < 3 {
		t.Errorf("sf1's agent log has %d re-applies triggered by eth-nfv1 coming up, want 3", linkTriggered)
	}
}
