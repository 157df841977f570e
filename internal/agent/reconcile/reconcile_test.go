package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/nodestate"
)

func route(dst string) nodestate.Route {
	return nodestate.Route{Dst: netip.MustParsePrefix(dst), Dev: "lo", Metric: 1024,
		Seg6Local: &nodestate.Seg6Local{Action: "End", Count: true}}
}

func want() *nodestate.Node {
	return &nodestate.Node{Name: "nfv1", Routes: []nodestate.Route{route("fc00:2::100/128"), route("fc00:2::101/128")}}
}

// batch is the leased agent Begin hands out: it journals each op, as
// server.Self does through the server.
type batch struct {
	*agenttest.Agent
	j *agenttest.Journal
}

func (b batch) Caps() agent.Caps { return agent.Caps{JournalsEachOp: true} }
func (b batch) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	for _, op := range ops {
		b.j.Record("nfv1", op)
	}
	return b.Agent.Execute(ctx, ops)
}

// newNode is node nfv1 holding rs.
func newNode(rs ...nodestate.Route) *agenttest.Agent {
	a := agenttest.New("nfv1")
	a.State.Routes = rs
	a.State.Sort()
	return a
}

// newJournal is a journal whose commands are this node's reconcile.
func newJournal() *agenttest.Journal {
	j := agenttest.NewJournal()
	j.Who = WhoPrefix + " of node nfv1 (pid 1 on host h), started now"
	return j
}

type rig struct {
	r      *Reconciler
	node   *agenttest.Agent
	j      *agenttest.Journal
	begins int
	ended  int
	counts map[string]int
}

// newRig: a reconciler of node nfv1 whose intent is want() (unless
// intent is false), the node holding rs; beginErr refuses the lease.
func newRig(t *testing.T, intent bool, beginErr error, rs ...nodestate.Route) *rig {
	t.Helper()
	st, err := Open(t.TempDir(), "nfv1")
	if err != nil {
		t.Fatal(err)
	}
	if intent {
		if err := st.SetIntent(want(), "pid 1 (segchain apply) on host ops"); err != nil {
			t.Fatal(err)
		}
	}
	g := &rig{node: newNode(rs...), j: newJournal(), counts: map[string]int{}}
	g.r = &Reconciler{Node: "nfv1", Store: st, Agent: g.node, Journal: g.j,
		Log:   slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Count: func(r string) { g.counts[r]++ },
		Begin: func(context.Context) (agent.Agent, func(), error) {
			g.begins++
			if beginErr != nil {
				return nil, nil, beginErr
			}
			return batch{g.node, g.j}, func() { g.ended++ }, nil
		}}
	return g
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func TestDecide(t *testing.T) {
	fresh := &Intent{Node: "nfv1", Want: want()}
	drift := &controller.Diff{Node: "nfv1", Adds: []agent.Op{{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &want().Routes[0]}}}
	for _, tc := range []struct {
		name    string
		in      *Intent
		d       *controller.Diff
		journal string
		want    Action
		why     string
	}{
		{"no intent", nil, drift, "", Idle, "no intent"},
		{"suspended", &Intent{Node: "nfv1", Want: want(), Superseded: "ops executed by pid 9"}, drift, "", Idle, "ops executed by pid 9"},
		{"in sync", fresh, &controller.Diff{Node: "nfv1"}, "", InSync, "as its intent"},
		{"drift", fresh, drift, "", Repair, "1 change(s)"},
		{"drift, own unfinished journal", fresh, drift, WhoPrefix + " of node nfv1 (pid 3), started t", Repair, "1 change(s)"},
		{"drift, a controller's unfinished journal", fresh, drift, "pid 4242 (segchain apply) on host ops1, started t", Skip, "pid 4242"},
		{"conflict", fresh, &controller.Diff{Node: "nfv1", Adds: drift.Adds, Conflicts: []string{"SID fc00:2::100 is hand-made"}}, "", Skip, "hand-made"},
		{"unsupported", fresh, &controller.Diff{Node: "nfv1", Adds: drift.Adds, Unsupported: []string{"no VRF"}}, "", Skip, "no VRF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := Decide(tc.in, tc.d, tc.journal)
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("Decide = %v (%s), want %v (…%s…)", got, why, tc.want, tc.why)
			}
		})
	}
}

func TestOnceRepairsDrift(t *testing.T) {
	w := want()
	g := newRig(t, true, nil, w.Routes[0]) // the second route was deleted by hand
	if got := g.r.Once(context.Background(), "interval"); got != Repair {
		t.Fatalf("Once = %v, want repair", got)
	}
	if diff := cmp.Diff([]string{"+ route " + w.Routes[1].String()}, g.node.Log); diff != "" {
		t.Errorf("re-applied (-want +got):\n%s", diff)
	}
	if g.begins != 1 || g.ended != 1 || g.counts["applied"] != 1 {
		t.Errorf("begins %d ended %d counts %v", g.begins, g.ended, g.counts)
	}
	if ops, who, _ := g.j.Unfinished("nfv1"); ops != nil || who != "" || len(g.j.Cleared()) == 0 {
		t.Errorf("journal left: %v %q (cleared %v)", ops, who, g.j.Cleared())
	}
	// Now in sync: no lease taken.
	if got := g.r.Once(context.Background(), "interval"); got != InSync || g.begins != 1 {
		t.Errorf("second Once = %v, begins %d", got, g.begins)
	}
}

// Routes segchain owns that the intent does not name are drift too: a
// destroyed domain's intent is "nothing".
func TestOnceRemovesWhatIntentDoesNotName(t *testing.T) {
	w := want()
	g := newRig(t, false, nil, w.Routes...)
	if err := g.r.Store.SetIntent(&nodestate.Node{Name: "nfv1"}, "pid 1 (segchain destroy)"); err != nil {
		t.Fatal(err)
	}
	if got := g.r.Once(context.Background(), "interval"); got != Repair {
		t.Fatalf("Once = %v", got)
	}
	if left := g.node.Snapshot().Routes; len(left) != 0 {
		t.Errorf("left %v", left)
	}
}

func TestOnceLeavesAlone(t *testing.T) {
	w := want()
	t.Run("no intent", func(t *testing.T) {
		g := newRig(t, false, nil)
		if got := g.r.Once(context.Background(), "start"); got != Idle || g.node.Observed() != 0 || g.begins != 0 {
			t.Errorf("Once = %v, observed %d, begins %d", got, g.node.Observed(), g.begins)
		}
	})
	t.Run("suspended intent", func(t *testing.T) {
		g := newRig(t, true, nil)
		g.r.Store.Supersede("ops executed for pid 7 (segchain apply)")
		if got := g.r.Once(context.Background(), "interval"); got != Idle || g.node.Observed() != 0 || g.begins != 0 {
			t.Errorf("Once = %v, observed %d, begins %d", got, g.node.Observed(), g.begins)
		}
	})
	t.Run("a controller holds the lease", func(t *testing.T) {
		g := newRig(t, true, errors.New("the node's lease is held: domain is being applied by pid 4242"), w.Routes[0])
		if got := g.r.Once(context.Background(), "interval"); got != Skip || g.begins != 1 || len(g.node.Log) != 0 || g.counts["skipped"] != 1 {
			t.Errorf("Once = %v, begins %d, executed %v, counts %v", got, g.begins, g.node.Log, g.counts)
		}
	})
	t.Run("a controller's unfinished journal", func(t *testing.T) {
		g := newRig(t, true, nil, w.Routes[0])
		g.j.Leave("nfv1", "pid 4242 (segchain apply) on host ops1, started t", agent.Op{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &w.Routes[0]})
		if got := g.r.Once(context.Background(), "interval"); got != Skip || g.begins != 0 || len(g.node.Log) != 0 {
			t.Errorf("Once = %v, begins %d, executed %v", got, g.begins, g.node.Log)
		}
	})
	t.Run("the intent changed before the lease", func(t *testing.T) {
		g := newRig(t, true, nil, w.Routes[0])
		begin := g.r.Begin
		g.r.Begin = func(ctx context.Context) (agent.Agent, func(), error) {
			// A controller handed a new intent just before.
			g.r.Store.SetIntent(&nodestate.Node{Name: "nfv1", Routes: w.Routes[:1]}, "pid 8 (segchain apply)")
			return begin(ctx)
		}
		if got := g.r.Once(context.Background(), "interval"); got != Skip || len(g.node.Log) != 0 || g.ended != 1 {
			t.Errorf("Once = %v, executed %v, ended %d", got, g.node.Log, g.ended)
		}
	})
}

// A link coming up triggers a check at once, long before the interval.
func TestRunChecksOnLinkUp(t *testing.T) {
	w := want()
	g := newRig(t, true, nil, w.Routes...)
	g.r.Interval = time.Hour
	links := make(chan string)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.r.Run(ctx, links); close(done) }()
	defer func() { cancel(); <-done }()
	// The check at start (in sync) has read the node before the link goes
	// down: a late start would otherwise repair the route itself and the
	// link-up path would go untested.
	for {
		n := g.node.Observed()
		if n > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.node.Drift(func(st *nodestate.Node) { // the link went down: its routes are gone
		st.Routes = slices.DeleteFunc(st.Routes, func(r nodestate.Route) bool { return r.Key() == w.Routes[1].Key() })
	})
	links <- "eth-r2"
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := len(g.node.Snapshot().Routes)
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the link-up did not trigger a reconcile")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStore(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, "nfv1")
	if err != nil || st.Get() != nil {
		t.Fatalf("Open empty: %v %v", st.Get(), err)
	}
	if err := st.SetIntent(want(), "pid 1 (segchain apply)"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	// The same intent again writes nothing.
	before := fi.ModTime()
	time.Sleep(10 * time.Millisecond)
	if err := st.SetIntent(want(), "pid 2 (segchain apply)"); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, File)); !fi.ModTime().Equal(before) || st.Get().By != "pid 1 (segchain apply)" {
		t.Errorf("a no-op SetIntent rewrote the file")
	}
	if err := st.Supersede("ops executed for pid 3"); err != nil {
		t.Fatal(err)
	}
	// A restarted agent reads it back, suspended.
	re, err := Open(dir, "nfv1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st.Get(), re.Get(), cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); diff != "" {
		t.Errorf("reopened (-want +got):\n%s", diff)
	}
	if re.Get().Superseded != "ops executed for pid 3" {
		t.Errorf("superseded lost: %+v", re.Get())
	}
	// A new intent ends the suspension.
	if err := re.SetIntent(want(), "pid 4 (segchain apply)"); err != nil {
		t.Fatal(err)
	}
	if re.Get().Superseded != "" {
		t.Errorf("still suspended")
	}
	// No temporary file is left behind.
	if left, _ := filepath.Glob(filepath.Join(dir, ".intent-*")); len(left) > 0 {
		t.Errorf("left %v", left)
	}
	// Another node's intent, or a torn file, is not used.
	if err := re.SetIntent(&nodestate.Node{Name: "nfv2"}, "x"); err == nil {
		t.Error("stored another node's intent")
	}
	if other, err := Open(dir, "nfv2"); err == nil || other.Get() != nil {
		t.Errorf("nfv2 opened nfv1's intent: %v", err)
	}
	os.WriteFile(filepath.Join(dir, File), []byte(`{"node":"nfv1","want":{`), 0o600)
	if torn, err := Open(dir, "nfv1"); err == nil || torn == nil || torn.Get() != nil {
		t.Errorf("torn file: %v", err)
	}
}

// A link-up whose reconcile finds the node's lock busy (a local segchain
// command) is retried with backoff until it gets through: the route comes
// back without another link event, long before the interval.
func TestRunRetriesWhileLockBusy(t *testing.T) {
	w := want()
	g := newRig(t, true, nil, w.Routes...)
	g.r.Interval = time.Hour
	var mu sync.Mutex
	busy := 3 // the next three Begins find the lock held
	begin := g.r.Begin
	g.r.Begin = func(ctx context.Context) (agent.Agent, func(), error) {
		mu.Lock()
		defer mu.Unlock()
		if busy > 0 {
			busy--
			return nil, nil, errors.New("node nfv1 is locked by pid 7 (segchain status)")
		}
		return begin(ctx)
	}
	links := make(chan string)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.r.Run(ctx, links); close(done) }()
	defer func() { cancel(); <-done }()
	g.node.Drift(func(st *nodestate.Node) { // the link went down: its routes are gone
		st.Routes = slices.DeleteFunc(st.Routes, func(r nodestate.Route) bool { return r.Key() == w.Routes[1].Key() })
	})
	links <- "eth-r2"
	deadline := time.Now().Add(30 * time.Second) // a bound on a hang, not a timing check
	for {
		n := len(g.node.Snapshot().Routes)
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reconcile was not retried after the lock was released")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if busy != 0 {
		t.Errorf("%d busy Begins left: repaired without getting through them", busy)
	}
}

// An intent's HMAC secrets (which have no JSON form of their own) are kept
// in its file, mode 0600, and read back: reconcile re-installs a key the
// node lost with its secret. A rotated secret is a new intent.
func TestStoreHMACSecrets(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir, "nfv1")
	if err != nil {
		t.Fatal(err)
	}
	want := &nodestate.Node{Name: "nfv1", HMACKeys: []nodestate.HMACKey{{ID: 1001, Alg: "sha256", Secret: []byte("0123456789abcdef0123456789abcdef")}}}
	if err := st.SetIntent(want, "pid 1 (segchain apply)"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Errorf("intent file mode %o, want 600", m)
	}
	again, err := Open(dir, "nfv1")
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Get().Want.HMACKeys; len(got) != 1 || string(got[0].Secret) != string(want.HMACKeys[0].Secret) {
		t.Fatalf("keys read back %v (secret %q), want the secret kept", got, got[0].Secret)
	}
	rotated := &nodestate.Node{Name: "nfv1", HMACKeys: []nodestate.HMACKey{{ID: 1001, Alg: "sha256", Secret: []byte("fedcba9876543210fedcba9876543210")}}}
	if err := again.SetIntent(rotated, "pid 2 (segchain apply)"); err != nil {
		t.Fatal(err)
	}
	third, _ := Open(dir, "nfv1")
	if got := third.Get().Want.HMACKeys[0].Secret; string(got) != "fedcba9876543210fedcba9876543210" {
		t.Errorf("rotated secret not stored: read back %q", got)
	}
}
