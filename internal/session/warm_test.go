package session

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segchain/segchain/examples"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/agent/rpc/server"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/pki"
)

// countingListener counts the connections an agent accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// A plain command sets its agents' connections up while it plans: when
// Open returns they are being (or have been) set up, one per agent,
// without a call; the digests' calls then use them (no other connection).
// An --changed-only command, which knows its scope only from the plan,
// dials nothing early.
func TestAgentsDialledWhilePlanning(t *testing.T) {
	dir := testCA(t, "warm", [2]string{pki.RoleController, "ctl"})
	load := func() *config.Domain {
		d, err := config.Parse(examples.Default, ".")
		if err != nil {
			t.Fatal(err)
		}
		f := pki.DirFiles(dir, pki.RoleController, "ctl")
		d.Security.PKI = &config.PKI{CA: f.CA, Cert: f.Cert, Key: f.Key}
		return d
	}
	d := load()
	var accepted atomic.Int64
	addrs := map[string]string{}
	for _, n := range d.NodeNames() {
		if _, err := pki.Issue(dir, pki.RoleNode, n, pki.IssueOptions{}); err != nil {
			t.Fatal(err)
		}
		tc, err := pki.ServerTLSAllow(pki.DirFiles(dir, pki.RoleNode, n), nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := server.NewServer(agenttest.New(n), nil, server.Build{}, nil, server.Hooks{})
		g := server.NewGRPCServer(srv, tc, nil)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go g.Serve(countingListener{lis, &accepted})
		t.Cleanup(g.Stop)
		addrs[n] = lis.Addr().String()
	}
	withAgents := func() *config.Domain {
		d := load()
		for n, a := range addrs {
			d.Nodes[n].Agent = a
		}
		return d
	}

	s, err := Open(Options{Domain: withAgents(), AppliedDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if s.early == nil {
		s.Close()
		t.Fatal("no agent dialled while planning")
	}
	select {
	case <-s.early.done:
	case <-time.After(time.Minute):
		t.Fatal("the connections' set-up never ended")
	}
	if got, want := s.early.ready.Load(), int64(len(addrs)); got != want {
		t.Errorf("%d connection(s) set up before any call, want %d", got, want)
	}
	for n, rc := range s.remote {
		if !rc.Ready() {
			t.Errorf("node %s: connection not ready", n)
		}
	}
	ctx := context.Background()
	s.ctl.Unchanged(ctx) // the digests: one call per node, on those connections
	s.Close()
	if got := accepted.Load(); got != int64(len(addrs)) {
		t.Errorf("%d connection(s) accepted, want one per agent (%d)", got, len(addrs))
	}

	s, err = Open(Options{Domain: withAgents(), ChangedOnly: true, AppliedDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.early != nil {
		t.Error("--changed-only dialled its agents before the plan said which")
	}
}

// An agent down while the command plans and up by its first call is
// reached: the failed early connection is dialled again (the call does
// not fail on the earlier attempt's error).
func TestAgentDownWhilePlanningReachedAfter(t *testing.T) {
	dir := testCA(t, "warm", [2]string{pki.RoleController, "ctl"})
	d, err := config.Parse(examples.Default, ".")
	if err != nil {
		t.Fatal(err)
	}
	f := pki.DirFiles(dir, pki.RoleController, "ctl")
	d.Security.PKI = &config.PKI{CA: f.CA, Cert: f.Cert, Key: f.Key}
	serve := func(n string, lis net.Listener) {
		if _, err := pki.Issue(dir, pki.RoleNode, n, pki.IssueOptions{}); err != nil {
			t.Fatal(err)
		}
		tc, err := pki.ServerTLSAllow(pki.DirFiles(dir, pki.RoleNode, n), nil)
		if err != nil {
			t.Fatal(err)
		}
		g := server.NewGRPCServer(server.NewServer(agenttest.New(n), nil, server.Build{}, nil, server.Hooks{}), tc, nil)
		go g.Serve(lis)
		t.Cleanup(g.Stop)
	}
	names := d.NodeNames()
	down := names[0]
	for _, n := range names {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		d.Nodes[n].Agent = lis.Addr().String()
		if n == down {
			lis.Close() // refused while planning
			continue
		}
		serve(n, lis)
	}
	s, err := Open(Options{Domain: d, AppliedDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.early == nil {
		t.Fatal("no agent dialled while planning")
	}
	if got, want := s.early.ready.Load(), int64(len(names)-1); got != want {
		t.Fatalf("%d connection(s) set up early, want %d (all but %s's)", got, want, down)
	}
	lis, err := net.Listen("tcp", d.Nodes[down].Agent)
	if err != nil {
		t.Fatal(err)
	}
	serve(down, lis)
	if err := s.remote[down].Preflight(context.Background()); err != nil {
		t.Errorf("node %s, up by its first call: %v", down, err)
	}
}
