package server

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
	"github.com/segchain/segchain/internal/journal"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/pki"
)

type memIntents struct {
	mu   sync.Mutex
	want *nodestate.Node
	by   string
}

func (m *memIntents) SetIntent(want *nodestate.Node, by string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.want, m.by = want, by
	return nil
}

// selfFake records whether its Execute came from the agent itself.
type selfFake struct {
	*agenttest.Agent
	mu       sync.Mutex
	fromSelf []bool
}

func (f *selfFake) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	f.mu.Lock()
	f.fromSelf = append(f.fromSelf, FromSelf(ctx))
	f.mu.Unlock()
	return f.Agent.Execute(ctx, ops)
}

// serveIntents is serve with the server kept (intents st, may be nil)
// and a journal.
func serveIntents(t *testing.T, st IntentStore) (*env, *Server, *selfFake) {
	t.Helper()
	dir, tc := newPKI(t)
	e := &env{dir: dir, fake: newFake(), log: &bytes.Buffer{}}
	sf := &selfFake{Agent: e.fake}
	jr := journal.New(t.TempDir(), map[string]string{"nfv1": "node-nfv1"})
	srv := NewServer(sf, nil, Build{}, jr, Hooks{})
	if st != nil {
		srv.KeepIntents(st)
	}
	e.addr = listen(t, srv, tc, nil)
	return e, srv, sf
}

// SetIntent needs the lease and the node's own intent; the store is told
// who handed it. An agent that keeps none is not an error for the
// controller.
func TestSetIntent(t *testing.T) {
	st := &memIntents{}
	e, srv, _ := serveIntents(t, st)
	c := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
	ctx := context.Background()
	want := &nodestate.Node{Name: "nfv1", TunSrc: "fc00:2::1"}
	if err := c.SetIntent(ctx, want); err == nil || !strings.Contains(err.Error(), "no lease held") {
		t.Fatalf("SetIntent without the lease: %v", err)
	}
	if err := c.AcquireLease(ctx, "pid 1 (segchain apply) on host a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.SetIntent(ctx, &nodestate.Node{Name: "nfv2"}); err == nil || !strings.Contains(err.Error(), `intent of node "nfv2"`) {
		t.Fatalf("another node's intent: %v", err)
	}
	if _, err := srv.SetIntent(ctx, &pb.SetIntentRequest{LeaseId: srv.leaseID(), IntentJson: []byte("{")}); err == nil {
		t.Fatal("malformed intent accepted")
	}
	if st.want != nil {
		t.Fatalf("a refused intent was stored: %+v", st.want)
	}
	if err := c.SetIntent(ctx, want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, st.want); diff != "" || st.by != "pid 1 (segchain apply) on host a" {
		t.Errorf("stored by %q (-want +got):\n%s", st.by, diff)
	}

	none, _, _ := serveIntents(t, nil)
	c2 := none.client(t, pki.DirFiles(none.dir, pki.RoleController, "ctl"), "nfv1")
	if err := c2.AcquireLease(ctx, "ctl", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c2.SetIntent(ctx, want); err != nil {
		t.Errorf("an agent keeping no intent: %v, want nil", err)
	}
}

// The agent's own lease (Self): refused while a controller holds the
// lease; while held, controllers are refused, naming it; its Execute goes
// through the server (journaled) and reaches the implementation marked
// as the agent's own.
func TestSelf(t *testing.T) {
	e, srv, sf := serveIntents(t, nil)
	c := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
	ctx := context.Background()
	if err := c.AcquireLease(ctx, "pid 1 (segchain apply) on host a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AcquireSelf(ctx, "segchain agent --reconcile of node nfv1", time.Minute); !errors.Is(err, ErrLeased) ||
		!strings.Contains(err.Error(), "pid 1 (segchain apply) on host a") {
		t.Fatalf("AcquireSelf under a controller's lease: %v", err)
	}
	if _, err := c.Execute(ctx, []agent.Op{addOp}); err != nil {
		t.Fatal(err)
	}
	if err := c.ReleaseLease(ctx); err != nil {
		t.Fatal(err)
	}
	self, err := srv.AcquireSelf(ctx, "segchain agent --reconcile of node nfv1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AcquireLease(ctx, "pid 2 (segchain apply) on host b", time.Minute); err == nil ||
		!strings.Contains(err.Error(), "domain is being applied by segchain agent --reconcile of node nfv1") {
		t.Fatalf("a controller while the agent holds its own lease: %v", err)
	}
	if n, err := self.Execute(ctx, []agent.Op{addOp.Inverse()}); n != 1 || err != nil {
		t.Fatalf("Self.Execute: %d, %v", n, err)
	}
	if diff := cmp.Diff([]bool{false, true}, sf.fromSelf); diff != "" {
		t.Errorf("FromSelf of the controller's and the agent's Execute (-want +got):\n%s", diff)
	}
	ops, who, err := srv.journal.Unfinished("nfv1")
	if err != nil || len(ops) != 1 || !strings.HasPrefix(who, "segchain agent --reconcile of node nfv1") {
		t.Errorf("journal after Self.Execute: %v %q %v", ops, who, err)
	}
	self.Release()
	if err := c.AcquireLease(ctx, "pid 2 (segchain apply) on host b", time.Minute); err != nil {
		t.Fatalf("after the agent released its lease: %v", err)
	}
}

// leaseID is the lease held now.
func (s *Server) leaseID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lease
}

// keptIntents is memIntents that says which intent it keeps.
type keptIntents struct{ memIntents }

func (k *keptIntents) Kept() *nodestate.Node {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.want
}

// The intent's digest is computed when the intent is handed, once: the
// no-op applies after it (ObserveDigest) compute none.
func TestIntentDigestAtSetIntent(t *testing.T) {
	st := &keptIntents{}
	e, srv, _ := serveIntents(t, st)
	c := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
	ctx := context.Background()
	want := &nodestate.Node{Name: "nfv1", TunSrc: "fc00:2::1"}
	if err := c.AcquireLease(ctx, "ctl", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.SetIntent(ctx, want); err != nil {
		t.Fatal(err)
	}
	count := func() int { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.intentDigests }
	if n := count(); n != 1 {
		t.Fatalf("%d intent digests computed by SetIntent, want 1", n)
	}
	for i := 0; i < 3; i++ {
		d, err := c.ObserveDigest(ctx, want, "", false)
		if err != nil {
			t.Fatal(err)
		}
		if d.Intent != nodestate.Digest(want, want) {
			t.Fatalf("intent digest %q, want %q", d.Intent, nodestate.Digest(want, want))
		}
	}
	if n := count(); n != 1 {
		t.Errorf("%d intent digests after three ObserveDigest, want 1 (the one SetIntent computed)", n)
	}
}
