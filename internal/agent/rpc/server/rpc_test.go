package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/agent/rpc"
	pb "github.com/segchain/segchain/internal/agent/rpc/agentpb"
	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/journal"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/pki"
)

// newFake is node nfv1 in memory, with a tunnel source, a counted SID
// and a sysctl's original value.
func newFake() *agenttest.Agent {
	f := agenttest.New("nfv1")
	f.State.TunSrc = "fc00::1"
	f.SIDs = []agent.SIDCounters{{SID: netip.MustParsePrefix("fc00:2::f1/128"), Behavior: "End", Packets: 7}}
	f.Orig = map[string]string{"net.x": "0"}
	return f
}

type env struct {
	dir  string
	fake *agenttest.Agent
	addr string
	log  *bytes.Buffer
}

// serve starts an mTLS agent for node "nfv1" on a loopback port, with a
// PKI in a temp dir.
func serve(t *testing.T) *env {
	return serveAs(t, func(f *agenttest.Agent) agent.Agent { return f })
}

// serveAs is serve with the served agent made from the env's fake.
func serveAs(t *testing.T, served func(*agenttest.Agent) agent.Agent) *env {
	t.Helper()
	dir, tc := newPKI(t)
	return startAs(t, dir, tc, served)
}

// newPKI makes a PKI in a temp dir with node nfv1 and controller ctl,
// and returns it with nfv1's server TLS configuration.
func newPKI(t *testing.T) (string, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	if err := pki.Init(dir, "test"); err != nil {
		t.Fatal(err)
	}
	nf, err := pki.Issue(dir, pki.RoleNode, "nfv1", pki.IssueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Issue(dir, pki.RoleController, "ctl", pki.IssueOptions{}); err != nil {
		t.Fatal(err)
	}
	tc, err := pki.ServerTLS(nf)
	if err != nil {
		t.Fatal(err)
	}
	return dir, tc
}

// listen serves s over mTLS (tc) on a loopback port until the test ends
// and returns its address.
func listen(t *testing.T, s *Server, tc *tls.Config, log *slog.Logger) string {
	t.Helper()
	g := NewGRPCServer(s, tc, log)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

var lockedBuf sync.Mutex

type syncWriter struct{ b *bytes.Buffer }

func (w syncWriter) Write(p []byte) (int, error) {
	lockedBuf.Lock()
	defer lockedBuf.Unlock()
	return w.b.Write(p)
}

func (e *env) logged() string {
	lockedBuf.Lock()
	defer lockedBuf.Unlock()
	return e.log.String()
}

func start(t *testing.T, dir string, tc *tls.Config) *env {
	return startWith(t, dir, tc, nil, nil)
}

// startAs is start with the served agent made from the env's fake.
func startAs(t *testing.T, dir string, tc *tls.Config, served func(*agenttest.Agent) agent.Agent) *env {
	return startWith(t, dir, tc, served, nil)
}

// startWith is start with the served agent made from the env's fake
// (served, if not nil) and the server adjusted before it serves (set).
func startWith(t *testing.T, dir string, tc *tls.Config, served func(*agenttest.Agent) agent.Agent, set func(*Server)) *env {
	e := &env{dir: dir, fake: newFake(), log: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(syncWriter{e.log}, nil))
	var a agent.Agent = e.fake
	if served != nil {
		a = served(e.fake)
	}
	s := NewServer(a, log, Build{Version: "test"}, nil, Hooks{})
	if set != nil {
		set(s)
	}
	e.addr = listen(t, s, tc, log)
	return e
}

func (e *env) client(t *testing.T, files pki.Files, node string) *client.Client {
	t.Helper()
	tc, err := pki.ClientTLS(files, node)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(node, e.addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	c.SetTimeout(10 * time.Second)
	t.Cleanup(func() { c.Close() })
	return c
}

// raw is a controller's bare connection to e's agent, with a Client's
// message limits: for what a Client never sends, and for a controller
// that dies holding its lease (the connection closes, nothing released).
func (e *env) raw(t *testing.T) (pb.AgentClient, *grpc.ClientConn) {
	t.Helper()
	tc, err := pki.ClientTLS(pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(rpc.MaxMessage), grpc.MaxCallSendMsgSize(rpc.MaxMessage)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewAgentClient(conn), conn
}

var addOp = agent.Op{Kind: agent.KindTunSrc, Action: agent.ActSet, TunSrc: "fc00::2"}

func TestRoundTrip(t *testing.T) {
	e := serve(t)
	c := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
	ctx := context.Background()
	if err := c.Preflight(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.Observe(ctx, &nodestate.Node{Name: "nfv1"})
	if err != nil || got.TunSrc != "fc00::1" {
		t.Fatalf("observe: %+v, %v", got, err)
	}
	cs, err := c.Counters(ctx)
	if err != nil || len(cs) != 1 || cs[0].Packets != 7 {
		t.Fatalf("counters: %+v, %v", cs, err)
	}
	if _, err := c.Execute(ctx, []agent.Op{addOp}); err == nil || !strings.Contains(err.Error(), "no lease") {
		t.Fatalf("execute without a lease: %v, want a refusal", err)
	}
	if err := c.AcquireLease(ctx, "ctl-test", time.Minute); err != nil {
		t.Fatal(err)
	}
	n, err := c.Execute(ctx, []agent.Op{addOp, addOp.Inverse()})
	if err != nil || n != 2 {
		t.Fatalf("execute: %d, %v", n, err)
	}
	if diff := cmp.Diff([]agent.Op{addOp, addOp.Inverse()}, e.fake.Executed()); diff != "" {
		t.Errorf("ops the agent ran (-want +got):\n%s", diff)
	}
	o, err := c.Originals(ctx)
	if err != nil || o["net.x"] != "0" {
		t.Fatalf("originals: %v %v", o, err)
	}
}

// refused asserts that a call fails with want in its error, that the
// agent ran nothing and logged the refusal.
func refused(t *testing.T, e *env, c *client.Client, want, wantLog string) {
	t.Helper()
	ctx := context.Background()
	err := c.Preflight(ctx)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("preflight: %v, want an error with %q", err, want)
	}
	if _, err := c.Execute(ctx, []agent.Op{addOp}); err == nil {
		t.Fatal("execute succeeded")
	}
	if n := len(e.fake.Executed()); n != 0 {
		t.Fatalf("the agent ran %d op(s)", n)
	}
	if wantLog != "" {
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(e.logged(), wantLog) {
			if time.Now().After(deadline) {
				t.Fatalf("agent log has no %q:\n%s", wantLog, e.logged())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestRefused(t *testing.T) {
	t.Run("wrong CA", func(t *testing.T) {
		e := serve(t)
		other := t.TempDir()
		pki.Init(other, "other")
		f, _ := pki.Issue(other, pki.RoleController, "ctl", pki.IssueOptions{})
		// The client trusts the right CA but presents a certificate of
		// another one.
		f.CA = pki.DirFiles(e.dir, pki.RoleController, "ctl").CA
		refused(t, e, e.client(t, f, "nfv1"), "Unavailable", "didn't provide a certificate")
	})
	t.Run("agent of another CA", func(t *testing.T) {
		e := serve(t)
		other := t.TempDir()
		pki.Init(other, "other")
		f, _ := pki.Issue(other, pki.RoleController, "ctl", pki.IssueOptions{})
		refused(t, e, e.client(t, f, "nfv1"), "certificate signed by unknown authority", "connection refused")
	})
	t.Run("expired controller certificate", func(t *testing.T) {
		e := serve(t)
		f, err := pki.Issue(e.dir, pki.RoleController, "old", pki.IssueOptions{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		refused(t, e, e.client(t, f, "nfv1"), "Unavailable", "expired")
	})
	t.Run("client with a node certificate", func(t *testing.T) {
		e := serve(t)
		f, _ := pki.Issue(e.dir, pki.RoleNode, "nfv2", pki.IssueOptions{})
		refused(t, e, e.client(t, f, "nfv1"), "Unavailable", "incompatible key usage")
	})
	t.Run("node name mismatch", func(t *testing.T) {
		e := serve(t)
		refused(t, e, e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv9"), `names node \"nfv1\", want \"nfv9\"`, "")
	})
	t.Run("plaintext client", func(t *testing.T) {
		e := serve(t)
		c, err := client.Dial("nfv1", e.addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.SetTimeout(5 * time.Second)
		t.Cleanup(func() { c.Close() })
		refused(t, e, c, "Unavailable", "connection refused")
	})
}

func TestInsecureListen(t *testing.T) {
	for _, a := range []string{"127.0.0.1:1", "[::1]:1", "localhost:1"} {
		if err := CheckInsecureListen(a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	for _, a := range []string{":1", "0.0.0.0:1", "[::]:1", "10.0.0.1:1", "[fc00::1]:1", "nonsense"} {
		if err := CheckInsecureListen(a); err == nil {
			t.Errorf("%s: accepted for plaintext", a)
		}
	}
}

func TestBadMessages(t *testing.T) {
	e := serve(t)
	c, _ := e.raw(t)
	ctx := context.Background()
	l, err := c.AcquireLease(ctx, &pb.AcquireLeaseRequest{Holder: "ctl-test", TtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"malformed", []byte(`[{"kind":`), "malformed JSON"},
		{"empty", nil, "empty"},
		{"unknown action", []byte(`[{"kind":"route","action":"explode","route":{"dst":"fc00::/64"}}]`), `unknown action "explode"`},
		{"route without object", []byte(`[{"kind":"route","action":"add"}]`), "no route"},
		{"sysctl outside net", []byte(`[{"kind":"sysctl","action":"set","sysctl":{"key":"kernel.panic","value":"1"}}]`), "only net.* keys"},
		{"route of another protocol", []byte(`[{"kind":"route","action":"delete","route":{"dst":"fc00::/64","proto":186}}]`), "route protocol 186 is not segchain's"},
		{"rule of another protocol", []byte(`[{"kind":"rule","action":"delete","rule":{"family":6,"priority":1,"table":100,"proto":11}}]`), "rule protocol 11 is not segchain's"},
		{"oversized", append(append([]byte(`[{"kind":"tunsrc","action":"set","tunsrc":"`), bytes.Repeat([]byte("a"), rpc.MaxMessage)...), `"}]`...), "ResourceExhausted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Execute(ctx, &pb.ExecuteRequest{LeaseId: l.LeaseId, OpsJson: tc.body})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if n := len(e.fake.Executed()); n != 0 {
				t.Fatalf("the agent ran %d op(s)", n)
			}
		})
	}
}

func TestLease(t *testing.T) {
	e := serve(t)
	ctx := context.Background()
	a := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
	b := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
	if err := a.AcquireLease(ctx, "pid 1 (segchain apply) on host a", time.Minute); err != nil {
		t.Fatal(err)
	}
	err := b.AcquireLease(ctx, "pid 2 (segchain apply) on host b", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "domain is being applied by pid 1 (segchain apply) on host a") {
		t.Fatalf("second controller: %v", err)
	}
	if _, err := b.Execute(ctx, []agent.Op{addOp}); err == nil {
		t.Fatal("a controller without the lease executed")
	}
	if len(e.fake.Executed()) != 0 {
		t.Fatal("the agent ran an op of the controller without the lease")
	}
	if err := a.ReleaseLease(ctx); err != nil {
		t.Fatal(err)
	}
	// A controller that dies (its connection closes) without releasing
	// leaves no lease behind.
	rb, conn := e.raw(t)
	if _, err := rb.AcquireLease(ctx, &pb.AcquireLeaseRequest{Holder: "pid 2 (segchain apply) on host b", TtlSeconds: 60}); err != nil {
		t.Fatalf("after release: %v", err)
	}
	conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := a.AcquireLease(ctx, "pid 1 (segchain apply) on host a", time.Minute)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease of a closed connection is still held: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A controller killed a moment ago holds its lease until the end of its
// connection reaches the agent: the next controller's AcquireLease waits
// for that end and then gets the lease, rather than being refused. The
// grace here outlasts the client's 10 s timeout, so only the wake-up on
// the connection's close can let the second controller in.
func TestLeaseWaitsForClosingHolder(t *testing.T) {
	e := serve(t)
	waiting := make(chan struct{}, 1)
	e = startWith(t, e.dir, mustServerTLS(t, e.dir), nil, func(s *Server) {
		s.grace = time.Hour
		s.awaiting = func() { waiting <- struct{}{} }
	})
	ctx := context.Background()
	a, conn := e.raw(t)
	b := e.client(t, pki.DirFiles(e.dir, pki.RoleController, "ctl"), "nfv1")
	if _, err := a.AcquireLease(ctx, &pb.AcquireLeaseRequest{Holder: "pid 1 (segchain apply) on host a", TtlSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.AcquireLease(ctx, "pid 2 (segchain apply) on host b", time.Minute) }()
	// Closing before the second request waits at the server would test
	// nothing (it would find no lease): close once it waits.
	select {
	case <-waiting:
	case err := <-got:
		t.Fatalf("the second controller did not wait for the held lease: %v", err)
	}
	conn.Close()
	if err := <-got; err != nil {
		t.Fatalf("the second controller, its predecessor's connection closed: %v", err)
	}
}

// mustServerTLS is the server TLS configuration of node nfv1 of the PKI
// in dir.
func mustServerTLS(t *testing.T, dir string) *tls.Config {
	t.Helper()
	tc, err := pki.ServerTLS(pki.DirFiles(dir, pki.RoleNode, "nfv1"))
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// With JournalOnExecute each op is in the node's journal on the agent
// before it runs, naming the controller; JournalClear forgets it.
func TestJournalOnExecute(t *testing.T) {
	dir, tc := newPKI(t)
	e := &env{dir: dir, fake: newFake(), log: &bytes.Buffer{}}
	jr := journal.New(t.TempDir(), map[string]string{"nfv1": "node-nfv1"})
	e.addr = listen(t, NewServer(e.fake, nil, Build{}, jr, Hooks{}), tc, nil)
	c := e.client(t, pki.DirFiles(dir, pki.RoleController, "ctl"), "nfv1")
	ctx := context.Background()
	if err := c.AcquireLease(ctx, "ctl", time.Minute); err != nil {
		t.Fatal(err)
	}
	c.JournalOnExecute("pid 7 (segchain apply) on host ctl")
	j := &client.Journal{Remote: map[string]*client.Client{"nfv1": c}}
	if err := j.Record("nfv1", addOp); err != nil { // a no-op: Execute journals
		t.Fatal(err)
	}
	if _, err := c.Execute(ctx, []agent.Op{addOp, addOp.Inverse()}); err != nil {
		t.Fatal(err)
	}
	ops, who, err := j.Unfinished("nfv1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]agent.Op{addOp, addOp.Inverse()}, ops); diff != "" || !strings.Contains(who, "pid 7 (segchain apply) on host ctl") {
		t.Fatalf("journal on the agent: who %q, ops (-want +got):\n%s", who, diff)
	}
	if err := j.Clear("nfv1"); err != nil {
		t.Fatal(err)
	}
	if ops, _, _ := j.Unfinished("nfv1"); ops != nil {
		t.Fatalf("journal not cleared: %v", ops)
	}
}

// stepper is a fake agent.Stepper: it checks, when the batch starts, that
// every op of it is already in the node's journal, runs ops until the
// one numbered failAt (-1: none) and reports each to step.
type stepper struct {
	*agenttest.Agent
	root     string // of the node's journal
	failAt   int
	mu       sync.Mutex
	calls    int
	journals [][]agent.Op // the journal as each batch found it
}

func (s *stepper) Caps() agent.Caps { return agent.Caps{Steps: s} }

func (s *stepper) ExecuteSteps(ctx context.Context, ops []agent.Op, step func(int, time.Duration, error)) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	got, _, _ := journal.New(s.root, map[string]string{s.Name: "node-" + s.Name}).Unfinished(s.Name)
	s.journals = append(s.journals, got)
	for i, op := range ops {
		if i == s.failAt {
			err := errors.New("kernel said no")
			step(i, time.Millisecond, err)
			return i, err
		}
		if _, err := s.Agent.Execute(ctx, []agent.Op{op}); err != nil {
			return i, err
		}
		step(i, time.Millisecond, nil)
	}
	return len(ops), nil
}

// An agent.Stepper runs an Execute's batch in one call, journaled as a
// whole before the first op runs; each op is still logged and counted
// (hooks), and a failure reports how many ran.
func TestExecuteBatchJournaledFirst(t *testing.T) {
	dir, tc := newPKI(t)
	root := t.TempDir()
	jr := journal.New(root, map[string]string{"nfv1": "node-nfv1"})
	st := &stepper{Agent: newFake(), root: root, failAt: -1}
	var (
		hmu     sync.Mutex
		hookOps int
	)
	hooks := Hooks{Op: func(agent.Op, time.Duration, error) { hmu.Lock(); hookOps++; hmu.Unlock() }}
	logBuf := &bytes.Buffer{}
	log := slog.New(slog.NewTextHandler(syncWriter{logBuf}, nil))
	e := &env{dir: dir, addr: listen(t, NewServer(st, log, Build{}, jr, hooks), tc, nil)}
	c := e.client(t, pki.DirFiles(dir, pki.RoleController, "ctl"), "nfv1")
	ctx := context.Background()
	if err := c.AcquireLease(ctx, "ctl", time.Minute); err != nil {
		t.Fatal(err)
	}
	c.JournalOnExecute("pid 7 (segchain apply) on host ctl")
	batch := []agent.Op{addOp, addOp.Inverse(), addOp}
	if n, err := c.Execute(ctx, batch); err != nil || n != 3 {
		t.Fatalf("execute: %d, %v", n, err)
	}
	st.failAt = 1
	if n, err := c.Execute(ctx, batch); err == nil || n != 1 || !strings.Contains(err.Error(), "kernel said no") {
		t.Fatalf("execute with the second op failing: %d, %v", n, err)
	}
	if st.calls != 2 {
		t.Errorf("%d calls for 2 batches, want one each", st.calls)
	}
	if diff := cmp.Diff([][]agent.Op{batch, append(append([]agent.Op{}, batch...), batch...)}, st.journals); diff != "" {
		t.Errorf("journal when each batch started (-want +got):\n%s", diff)
	}
	hmu.Lock()
	defer hmu.Unlock()
	if hookOps != 5 {
		t.Errorf("%d ops seen by the hook, want 5 (3, then 1 and the failed one)", hookOps)
	}
	lockedBuf.Lock()
	defer lockedBuf.Unlock()
	if n := strings.Count(logBuf.String(), "msg=op "); n != 4 {
		t.Errorf("%d ops logged, want 4:\n%s", n, logBuf)
	}
	if !strings.Contains(logBuf.String(), "op failed") {
		t.Errorf("the failed op is not logged:\n%s", logBuf)
	}
}
