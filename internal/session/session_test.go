package session

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/nodestate"
)

// syncedNode is an agent whose node is always as planned (Observe returns
// what is wanted), that counts its preflights and reports link-ups the
// test sends.
type syncedNode struct {
	name       string
	mu         sync.Mutex
	preflights int
	refuse     error
	executed   int
	ups        chan string
	bare       bool // holds nothing: every planned object is to add
}

func (a *syncedNode) Node() string { return a.name }
func (a *syncedNode) Observe(_ context.Context, want *nodestate.Node) (*nodestate.Node, error) {
	if a.bare {
		return &nodestate.Node{Name: a.name}, nil
	}
	return want, nil
}
func (a *syncedNode) Execute(_ context.Context, ops []agent.Op) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.executed += len(ops)
	return len(ops), nil
}
func (a *syncedNode) Counters(context.Context) ([]agent.SIDCounters, error) { return nil, nil }
func (a *syncedNode) Forget(context.Context) error                          { return nil }
func (a *syncedNode) Originals(context.Context) (map[string]string, error)  { return nil, nil }
func (a *syncedNode) Preflight(context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.preflights++
	return a.refuse
}
func (a *syncedNode) LinkUps(context.Context) (<-chan string, error) { return a.ups, nil }
func (a *syncedNode) Caps() agent.Caps                               { return agent.Caps{Preflight: a, Links: a} }

func (a *syncedNode) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.preflights
}

// openFakes opens a session of the built-in default domain over one
// syncedNode per node.
func openFakes(t *testing.T, dry bool) (*Session, map[string]*syncedNode) {
	t.Helper()
	d, err := LoadDomain("")
	if err != nil {
		t.Fatal(err)
	}
	fakes := map[string]*syncedNode{}
	agents := map[string]agent.Agent{}
	for _, n := range d.NodeNames() {
		fakes[n] = &syncedNode{name: n, ups: make(chan string, 1)}
		agents[n] = fakes[n]
	}
	s, err := Open(Options{Domain: d, Agents: agents, DryRun: dry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, fakes
}

// Every apply of watch, the first and each re-apply after a link came
// up, preflights each remote agent exactly once (the CLI used to
// preflight each of watch's applies twice: in its lock, then in
// controller.Apply).
func TestWatchPreflightsOncePerApply(t *testing.T) {
	s, fakes := openFakes(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	applied := make(chan error)
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(ctx, func(_ []string, _ *controller.Result, err error) { applied <- err })
	}()
	const applies = 4 // the first and three re-applies
	for i := 0; i < applies; i++ {
		if i > 0 {
			fakes["nfv1"].ups <- "eth-r1"
		}
		select {
		case err := <-applied:
			if err != nil {
				t.Fatalf("apply %d: %v", i+1, err)
			}
		case <-time.After(time.Minute): // a hung watch, not a timing assertion
			t.Fatalf("apply %d did not come", i+1)
		}
		for n, f := range fakes {
			if got := f.count(); got != i+1 {
				t.Fatalf("after apply %d, node %s was preflighted %d times, want %d (once per apply)", i+1, n, got, i+1)
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// apply and plan preflight once; destroy too.
func TestVerbsPreflightOnce(t *testing.T) {
	for _, dry := range []bool{false, true} {
		s, fakes := openFakes(t, dry)
		for i, verb := range []func(context.Context) (*controller.Result, error){s.Apply, s.Destroy} {
			if _, err := verb(context.Background()); err != nil {
				t.Fatalf("dry %v, verb %d: %v", dry, i, err)
			}
			for n, f := range fakes {
				if got := f.count(); got != i+1 {
					t.Errorf("dry %v, verb %d: node %s preflighted %d times in all, want %d", dry, i, n, got, i+1)
				}
			}
		}
	}
}

// One refused preflight fails apply with every node's error before any
// op runs on any node.
func TestPreflightFailureChangesNothing(t *testing.T) {
	s, fakes := openFakes(t, false)
	for _, f := range fakes {
		f.bare = true // everything to add
	}
	fakes["nfv1"].refuse = errors.New("node nfv1: agent 192.0.2.2:7070: version: connection refused (unreachable)")
	fakes["r2"].refuse = errors.New("node r2: agent speaks protocol 9")
	_, err := s.Apply(context.Background())
	if err == nil {
		t.Fatal("apply succeeded with unreachable agents")
	}
	for _, want := range []string{"preflight failed, nothing changed on any node", "node nfv1: agent 192.0.2.2:7070", "protocol 9"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	for n, f := range fakes {
		if f.executed != 0 {
			t.Errorf("node %s ran %d ops despite a failed preflight", n, f.executed)
		}
	}
}
