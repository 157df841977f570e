package pools

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/health"
	"github.com/segchain/segchain/internal/pool/datapath"
	"github.com/segchain/segchain/internal/testutil"
)

// hog starves the checker's process of CPU, as a loaded host does: the
// test process gets one P (GOMAXPROCS 1, so the hog costs the shared host
// at most one core) and n goroutines spin on it, so a goroutine woken by a
// timer or an answer waits for the spinners' time slices (the runtime
// preempts every ~10 ms) — the checker runs late and its reader later.
// stop ends it (also at cleanup).
func hog(t *testing.T, n int) (stop func()) {
	prev := runtime.GOMAXPROCS(1)
	var quit atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(1)
			for !quit.Load() {
				for range 1 << 16 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			_ = x
		}()
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			quit.Store(true)
			wg.Wait()
			runtime.GOMAXPROCS(prev)
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestProbesUnderLoad: with the default health (in-band srv6, 10 ms
// interval, fall 2) and the checker's process starved of CPU, no healthy
// instance goes down (probes answered in time but read late, or checked
// by a checker that woke late, are not failures), and an SF that stops
// forwarding is still found — under the same load.
func TestProbesUnderLoad(t *testing.T) {
	e := setup(t, "failover")
	ns := e.NS("ingress")
	specs, err := datapath.Specs(ns)
	if err != nil {
		t.Fatal(err)
	}
	targets, _, err := health.Targets(ns, specs, nil)
	if err != nil || len(targets) != 3 {
		t.Fatalf("targets %v (%v), want fw1, fw2, fw3's", targets, err)
	}
	for i := range targets {
		targets[i].Spec = health.Spec{Kind: health.SRv6} // the defaults: 10 ms, fall 2, rise 3
	}
	// The checks and every answer warm up before the load (neighbours).
	c, logs := e.checker(targets, e.he)
	waitChecks(t, c, 20)
	if tr := transitions(c); tr != 0 {
		t.Fatalf("%d transitions before any load: %+v", tr, c.Status())
	}

	stop := hog(t, 4)
	base := checks(c)
	waitChecks(t, c, base+300) // 3 s of probes per instance under load
	if tr := transitions(c); tr != 0 {
		t.Fatalf("%d false transitions of healthy instances under load:\n%+v\n%s", tr, c.Status(), logs)
	}

	// A real failure under the same load is still found.
	testutil.Exec(t, e.NS("sf1"), "nft", "add table inet s10l; add chain inet s10l s10lfwd { type filter hook forward priority 0; policy drop; }")
	st := waitHealth(t, c, "fw1", false)
	stop()
	for _, s := range c.Status() {
		if s.Instance != "fw1" && s.Transitions != 0 {
			t.Errorf("%s: %d transitions while fw1 failed: %+v", s.Instance, s.Transitions, s)
		}
	}
	if live, _ := e.he.Live(0); live != 0b110 {
		t.Errorf("liveness word %03b after fw1 failed, want 110", live)
	}
	t.Logf("fw1 down under load: %s; %s", st.Last.Reason, summary(c))
}

func checks(c *health.Checker) uint64 {
	m := ^uint64(0)
	for _, s := range c.Status() {
		m = min(m, s.Checks)
	}
	return m
}

func transitions(c *health.Checker) (n uint64) {
	for _, s := range c.Status() {
		n += s.Transitions
	}
	return n
}

func summary(c *health.Checker) string {
	out := ""
	for _, s := range c.Status() {
		out += fmt.Sprintf("%s: %d checks %d failures %d transitions; ", s.Instance, s.Checks, s.Failures, s.Transitions)
	}
	return out
}

// waitChecks waits until every instance has been checked n times.
func waitChecks(t *testing.T, c *health.Checker, n uint64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for checks(c) < n {
		if time.Now().After(deadline) {
			t.Fatalf("checks never reached %d: %+v", n, c.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPoolEndAS: a pool whose SR-unaware instances sit behind End.AS
// (static proxies) spreads flows as the model says and delivers every one;
// the in-band probe crosses the static proxy and its SF; an SF that stops
// forwarding is found and only its flows move, every flow still arriving.
// A restarted checker (an agent restarted) keeps the liveness it finds.
func TestPoolEndAS(t *testing.T) {
	e := setupFile(t, "testdata/pooled-as.yaml", "failover")
	flows := ports(22000, 90)
	s0 := e.stats()
	sent := e.send(flows)
	if got, want := delta(s0, e.stats()), e.expect(sent, e.pool.AllLive(), nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("spread: instances got %v packets, model %v", got, want)
	}
	ns := e.NS("ingress")
	specs, err := datapath.Specs(ns)
	if err != nil {
		t.Fatal(err)
	}
	targets, _, err := health.Targets(ns, specs, nil)
	if err != nil || len(targets) != 3 {
		t.Fatalf("targets %v (%v)", targets, err)
	}
	c := health.New(targets, e.he, nil)
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := c.Start(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			wait()
		}
	}
	t.Cleanup(stop)
	waitChecks(t, c, 10)
	for _, s := range c.Status() {
		if !s.Up || s.Failures*2 > s.Checks {
			t.Fatalf("%s's in-band probes through End.AS: %+v", s.Instance, s)
		}
	}
	testutil.Exec(t, e.NS("sf2"), "nft", "add table inet s10a; add chain inet s10a s10afwd { type filter hook forward priority 0; policy drop; }")
	waitHealth(t, c, "fw2", false)
	s1 := e.stats()
	sent = e.send(flows)
	if got, want := delta(s1, e.stats()), e.expect(sent, 0b101, nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after fw2 failed: instances got %v packets, model %v", got, want)
	}

	// The checker restarts (an agent restarted): the new one starts from
	// the liveness in the pinned map — fw2 down, the others up, before
	// its first probe and with no transition — and brings fw2 back when
	// its SF forwards again.
	stop()
	c2, _ := e.checker(targets, e.he)
	for _, s := range c2.Status() {
		if s.Up != (s.Instance != "fw2") || s.Transitions != 0 {
			t.Errorf("restarted checker: %s up=%v transitions %d, want fw2 down, others up, none", s.Instance, s.Up, s.Transitions)
		}
	}
	if live, _ := e.he.Live(0); live != 0b101 {
		t.Errorf("liveness word %03b across the restart, want 101", live)
	}
	testutil.Exec(t, e.NS("sf2"), "nft", "delete", "table", "inet", "s10a")
	waitHealth(t, c2, "fw2", true)
	for _, s := range c2.Status() {
		if s.Instance != "fw2" && s.Transitions != 0 {
			t.Errorf("restarted checker: %s had %d transitions", s.Instance, s.Transitions)
		}
	}
}
