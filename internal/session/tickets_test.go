package session

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/agent/rpc/server"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/pki"
)

// ticketAgent serves node over gRPC and mTLS on a loopback port with tc.
func ticketAgent(t *testing.T, node string, tc *tls.Config) string {
	t.Helper()
	srv := server.NewServer(agenttest.New(node), nil, server.Build{}, nil, server.Hooks{})
	g := server.NewGRPCServer(srv, tc, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// dialTickets is what a command does with a domain whose node n1's
// agent is at addr: dial it (with the kept ticket, if any) and preflight
// it; it returns the error and whether the handshake resumed.
func dialTickets(t *testing.T, dir, ctl, addr string) (bool, error) {
	t.Helper()
	f := pki.DirFiles(dir, pki.RoleController, ctl)
	d := &config.Domain{Nodes: map[string]*config.Node{"n1": {Agent: addr}},
		Security: config.Security{PKI: &config.PKI{CA: f.CA, Cert: f.Cert, Key: f.Key}}}
	remote, tk, err := remoteAgents(d, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer remote["n1"].Close()
	before := tk.resumed.Load()
	err = remote["n1"].Preflight(context.Background())
	return tk.resumed.Load() > before, err
}

// A command resumes the TLS session of the command before it from the
// ticket it kept (no certificates exchanged), and a resumed connection is
// still checked as a full one: an agent that restarted (its ticket keys
// gone) gets a full handshake, and an agent whose allow list no longer
// names the controller refuses the resumed session too.
func TestTicketsResumeAcrossCommands(t *testing.T) {
	dir := testCA(t, "tickets", ctlAndN1...)
	serverTLS := func(allow ...string) *tls.Config {
		tc, err := pki.ServerTLSAllow(pki.DirFiles(dir, pki.RoleNode, "n1"), allow)
		if err != nil {
			t.Fatal(err)
		}
		// One ticket key for every agent below, as if the same process:
		// a ticket one issued, another can open.
		tc.SetSessionTicketKeys([][32]byte{{1, 2, 3}})
		return tc
	}
	addr := ticketAgent(t, "n1", serverTLS())
	if resumed, err := dialTickets(t, dir, "ctl", addr); err != nil || resumed {
		t.Fatalf("first command: resumed %v, %v (want a full handshake)", resumed, err)
	}
	files, _ := filepath.Glob(filepath.Join(ticketDir(pki.DirFiles(dir, pki.RoleController, "ctl").Key), "*"))
	if len(files) != 1 {
		t.Fatalf("after the first command: %d ticket file(s) kept, want 1", len(files))
	}
	if st, err := os.Stat(files[0]); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("ticket file %s: %v, mode %v (want 0600)", files[0], err, st.Mode().Perm())
	}
	// Resumed, the kept ticket is offered again (no file written per
	// command) while recent, and replaced by the agent's newer one once
	// older than ticketRefresh.
	age := func(d time.Duration) time.Time {
		at := time.Now().Add(-d).Truncate(time.Second)
		if err := os.Chtimes(files[0], at, at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	mtime := func() time.Time {
		st, err := os.Stat(files[0])
		if err != nil {
			t.Fatal(err)
		}
		return st.ModTime()
	}
	recent := age(time.Minute)
	for i := 0; i < 2; i++ {
		if resumed, err := dialTickets(t, dir, "ctl", addr); err != nil || !resumed {
			t.Fatalf("command %d after the first: resumed %v, %v (want resumed)", i+2, resumed, err)
		}
		if !mtime().Equal(recent) {
			t.Fatalf("command %d after the first: a recent ticket accepted, yet the file was written again", i+2)
		}
	}
	old := age(2 * ticketRefresh)
	if resumed, err := dialTickets(t, dir, "ctl", addr); err != nil || !resumed {
		t.Fatalf("with an old ticket: resumed %v, %v (want resumed)", resumed, err)
	}
	if mtime().Equal(old) {
		t.Fatal("an old ticket accepted: the agent's newer one was not kept")
	}
	age(time.Minute)
	// The agent restarted: its ticket keys are new, the ticket is refused
	// and the handshake is a full one.
	restarted, err := pki.ServerTLSAllow(pki.DirFiles(dir, pki.RoleNode, "n1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	addr2 := ticketAgent(t, "n1", restarted)
	before := mtime()
	if resumed, err := dialTickets(t, dir, "ctl", addr2); err != nil || resumed {
		t.Fatalf("agent restarted: resumed %v, %v (want a full handshake)", resumed, err)
	}
	if mtime().Equal(before) {
		t.Fatal("agent restarted: its new ticket was not kept")
	}
	if resumed, err := dialTickets(t, dir, "ctl", addr2); err != nil || !resumed {
		t.Fatalf("after the agent restarted, the next command: resumed %v, %v (want resumed)", resumed, err)
	}
	// An agent that can open the ticket but no longer allows the
	// controller refuses the resumed session.
	addr3 := ticketAgent(t, "n1", serverTLS())
	if _, err := dialTickets(t, dir, "ctl", addr3); err != nil {
		t.Fatal(err)
	}
	other := ticketAgent(t, "n1", serverTLS("someone-else"))
	moveTickets(t, dir, addr3, other)
	_, err = dialTickets(t, dir, "ctl", other)
	if err == nil || !strings.Contains(err.Error(), "refused this controller's certificate") && !strings.Contains(err.Error(), "closed the connection") {
		t.Fatalf("resumed session to an agent that does not allow the controller: %v", err)
	}
}

// moveTickets makes the ticket kept for the agent at from the one for to
// (the same node reached at another address).
func moveTickets(t *testing.T, dir, from, to string) {
	t.Helper()
	f := pki.DirFiles(dir, pki.RoleController, "ctl")
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	tk := newTickets(ticketDir(f.Key), cert)
	n := &nodeTickets{t: tk, node: "n1"}
	host := func(a string) string { h, _, _ := net.SplitHostPort(a); return h }
	src, dst := n.path(host(from)), n.path(host(to))
	if src == dst {
		return
	}
	if err := os.Rename(src, dst); err != nil {
		t.Fatal(err)
	}
}
