package cpbench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/agent/reconcile"
	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/agent/rpc/server"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/session"
)

// executions counts the Execute calls each node's agent gets.
type executions struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *executions) take() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.n
	e.n = map[string]int{}
	return out
}

// counted is a node's remote agent whose Executes are counted.
type counted struct {
	*client.Client
	ex *executions
}

func (c counted) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	c.ex.mu.Lock()
	c.ex.n[c.Node()]++
	c.ex.mu.Unlock()
	return c.Client.Execute(ctx, ops)
}

// A 16-node Clos fabric in namespaces, each node served by a real agent
// server over gRPC (the agents' digests: ObserveDigest) with an intent
// store: after an apply, a no-op apply observes no node in full and
// changes none; a route deleted by hand on one leaf makes the next plain
// apply fetch that node's state alone and repair it alone.
func TestPrivilegedDigestsObserveOnlyDrift(t *testing.T) {
	d, p, l := fabricLab(t, "dig")
	ex, agents, locals := realAgents(t, p, l)
	records := t.TempDir()
	apply := func(what string) (full, digest int, changed []string, executed map[string]int) {
		t.Helper()
		s, err := session.Open(session.Options{Domain: d, Agents: agents, AppliedDir: records})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Apply(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, df := range res.Diffs {
			if !df.Empty() {
				changed = append(changed, df.Node)
			}
		}
		o := s.Controller().Observed()
		return o.Full, o.Digest, changed, ex.take()
	}
	if full, _, changed, _ := apply("apply from scratch"); full != len(p.Nodes) || len(changed) != len(p.Nodes) {
		t.Fatalf("apply from scratch observed %d node(s) in full and changed %d, want %d", full, len(changed), len(p.Nodes))
	}
	// The record of the apply (apply --changed-only's) is left as it is
	// by a no-op: nothing to write.
	rec := filepath.Join(records, "domain-"+d.Name+".json")
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(rec, old, old); err != nil {
		t.Fatal(err)
	}
	full, digest, changed, executed := apply("no-op apply")
	if full != 0 || digest != len(p.Nodes) || len(changed) != 0 || len(executed) != 0 {
		t.Fatalf("no-op apply: %d node(s) observed in full (want 0), %d by digest (want %d), changed %v, executed on %v",
			full, digest, len(p.Nodes), changed, executed)
	}
	if st, err := os.Stat(rec); err != nil || !st.ModTime().Equal(old) {
		t.Fatalf("no-op apply wrote the record of the apply again (%v)", err)
	}

	// Another: the agents answer from their kept routing state (the
	// first no-op may have dumped it, if it came before the agent's
	// background dump after the apply).
	hits := func() (n int) {
		for _, la := range locals {
			n += int(la.EventStats().Hits)
		}
		return n
	}
	before := hits()
	if full, _, changed, executed := apply("second no-op apply"); full != 0 || len(changed) != 0 || len(executed) != 0 {
		t.Fatalf("second no-op apply: %d observed in full, changed %v, executed on %v", full, changed, executed)
	}
	if hits() == before {
		t.Fatal("second no-op apply: no agent answered from its kept routing state")
	}

	// Drift by hand: a leaf loses one of its summary routes.
	leaf := "l1"
	lost, restored := loseSummaryRoute(t, p, l, leaf)
	full, _, changed, executed = apply("apply after drift")
	if full != 1 || fmt.Sprint(changed) != "["+leaf+"]" || len(executed) != 1 || executed[leaf] == 0 {
		t.Fatalf("apply after %s lost %s: %d node(s) observed in full (want 1), changed %v, executed on %v (want %s alone)",
			leaf, lost, full, changed, executed, leaf)
	}
	if !restored() {
		t.Fatalf("%s's route %s not restored", leaf, lost)
	}
	if full, _, changed, executed = apply("no-op apply after repair"); full != 0 || len(changed) != 0 || len(executed) != 0 {
		t.Fatalf("no-op apply after the repair: %d observed in full, changed %v, executed on %v", full, changed, executed)
	}
}

// loseSummaryRoute deletes one of leaf's summary routes (a /16 of its
// plan, not SRv6) by hand with iproute2: drift of the kernel's state.
// restored says whether it is back.
func loseSummaryRoute(t *testing.T, p *plan.Plan, l *lab.Lab, leaf string) (lost string, restored func() bool) {
	t.Helper()
	for _, r := range p.Nodes[leaf].Routes {
		if r.Seg6 == nil && r.Seg6Local == nil && r.Dst.Bits() == 16 {
			lost = r.Dst.String()
			break
		}
	}
	if lost == "" {
		t.Fatalf("%s has no summary route", leaf)
	}
	ns, _ := l.Netns(leaf)
	ip := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"-n", ns, "-6", "route"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip route %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	ip("del", lost)
	return lost, func() bool { return strings.Contains(ip("show", lost), lost) }
}

// realAgents serves each node of p in lab l by a real agent server over
// gRPC (a watched local agent, an intent store), its client's Executes
// counted.
func realAgents(t *testing.T, p *plan.Plan, l *lab.Lab) (*executions, map[string]agent.Agent, map[string]*local.Local) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	ex := &executions{n: map[string]int{}}
	agents := map[string]agent.Agent{}
	locals := map[string]*local.Local{}
	for n := range p.Nodes {
		ns, _ := l.Netns(n)
		la := local.NewLocal(n, ns)
		t.Cleanup(func() { _ = la.Forget(context.Background()) })
		// As the agent daemon: routing state kept from the kernel's
		// events (docs/scale.md, "Digests kept from events").
		if err := la.Watch(ctx); err != nil {
			t.Fatal(err)
		}
		locals[n] = la
		st, err := reconcile.Open(t.TempDir(), n)
		if err != nil {
			t.Fatal(err)
		}
		srv := server.NewServer(la, nil, server.Build{}, nil, server.Hooks{})
		srv.KeepIntents(st)
		g := server.NewGRPCServer(srv, nil, nil)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go server.Serve(ctx, g, lis)
		c, err := client.Dial(n, lis.Addr().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// SetIntent needs the node's lease (the session takes none for
		// agents it is handed).
		if err := c.AcquireLease(ctx, "test", time.Minute); err != nil {
			t.Fatal(err)
		}
		agents[n] = counted{c, ex}
	}
	return ex, agents, locals
}
