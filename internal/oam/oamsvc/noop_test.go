package oamsvc

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/agent/reconcile"
	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/agent/rpc/server"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/session"
	"github.com/segchain/segchain/internal/testutil"
)

// keptNode is one node's agent as the daemon serves it (agent service
// with an intent store, OAM service, the kept OAM's digest reported with
// the state's), on a fake kernel (agenttest) that outlives the agent, and
// the OAM service in a namespace of its own (the taps are real).
type keptNode struct {
	t       *testing.T
	name    string
	addr    string
	ns      string
	kernel  *agenttest.Agent
	intents string
	oam     *Server
	stop    func()
}

// start (re)starts the node's agent on its address: a restart is a new
// process, keeping nothing of the OAM it kept (its intent is on disk).
func (k *keptNode) start() {
	t := k.t
	if k.stop != nil {
		k.stop()
	}
	st, err := reconcile.Open(k.intents, k.name)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewServer(k.kernel, nil, server.Build{}, nil, server.Hooks{})
	srv.KeepIntents(st)
	g := server.NewGRPCServer(srv, nil, nil)
	k.oam = Register(g, k.name, k.ns)
	srv.ReportKeptOAM(k.oam.KeptDigest)
	addr := k.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var lis net.Listener
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if lis, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	k.addr = lis.Addr().String()
	go g.Serve(lis)
	o := k.oam
	k.stop = func() { g.Stop(); o.Close() }
}

// keptDomain is the default example with web's OAM kept: sampling 1 in
// 100, and the echo responder with respond.
func keptDomain(t *testing.T, respond bool) *config.Domain {
	t.Helper()
	ex := "../../../examples/default.yaml"
	b, err := os.ReadFile(ex)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	at := strings.Index(s, "  web:")
	if at < 0 {
		t.Fatal("examples/default.yaml: no chain web")
	}
	line := "    oam: {sample: 100}\n"
	if respond {
		line = "    oam: {sample: 100, respond: true}\n"
	}
	s = s[:at] + "  web:\n" + line + s[at+len("  web:\n"):]
	d, err := config.Parse([]byte(s), filepath.Dir(ex))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A no-op apply hands no agent its kept OAM (chains[].oam) again: each
// agent reports the digest of the set it keeps with its state's, and only
// a set that differs is handed. The guarantees Keep gave on every apply
// hold: the first apply hands each node its set, an agent restarted
// (keeping nothing) gets its set at the next apply, a changed rate
// reaches the nodes it changes, a responder is handed its set (its SIDs
// read again) by every apply, and destroy leaves nothing kept.
func TestNoOpHandsNoKeptOAM(t *testing.T) {
	testutil.RequireRoot(t)
	d := keptDomain(t, false)
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*keptNode{}
	agents := map[string]agent.Agent{}
	ctx := context.Background()
	for n := range p.Nodes {
		k := &keptNode{t: t, name: n, ns: testutil.NewNetns(t, "oamnoop"), kernel: agenttest.New(n), intents: t.TempDir()}
		k.start()
		t.Cleanup(func() { k.stop() })
		c, err := client.Dial(n, k.addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.SetTimeout(10 * time.Second)
		t.Cleanup(func() { c.Close() })
		// SetIntent needs the node's lease (the session takes none for
		// the agents it is handed).
		if err := c.AcquireLease(ctx, "test", time.Hour); err != nil {
			t.Fatal(err)
		}
		nodes[n] = k
		agents[n] = c
	}
	records := t.TempDir()
	// apply is segchain apply (destroy): the session's apply, then the
	// kept OAM handed; it returns the nodes handed it.
	apply := func(what string, d *config.Domain, destroy bool) []string {
		t.Helper()
		for _, k := range nodes {
			k.oam.keeps.Store(0)
		}
		s, err := session.Open(session.Options{Domain: d, Agents: agents, AppliedDir: records})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if destroy {
			_, err = s.Destroy(ctx)
		} else {
			_, err = s.Apply(ctx)
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if _, err := Keep(ctx, s, destroy); err != nil {
			t.Fatalf("%s: keep: %v", what, err)
		}
		var handed []string
		for n, k := range nodes {
			switch c := k.oam.keeps.Load(); c {
			case 0:
			case 1:
				handed = append(handed, n)
			default:
				t.Errorf("%s: %s handed its set %d times", what, n, c)
			}
		}
		sort.Strings(handed)
		return handed
	}
	// want: the nodes that keep something of d, and each one's chains.
	want := func(d *config.Domain) ([]string, []string) {
		t.Helper()
		p, err := plan.Build(d)
		if err != nil {
			t.Fatal(err)
		}
		sets, err := oam.KeepPlan(d, p)
		if err != nil {
			t.Fatal(err)
		}
		var keeping, responders []string
		for n, s := range sets {
			var chains []string
			for _, k := range s.Samples {
				if k.Rate > 0 || k.Tap {
					chains = append(chains, k.Chain)
				}
			}
			if len(chains) > 0 || s.Respond {
				keeping = append(keeping, n)
			}
			if s.Respond {
				responders = append(responders, n)
			}
			if got, _ := nodes[n].oam.keep.Kept(); !slices.Equal(got, chains) {
				t.Errorf("%s keeps %v, want %v", n, got, chains)
			}
		}
		sort.Strings(keeping)
		sort.Strings(responders)
		return keeping, responders
	}

	handed := apply("apply from scratch", d, false)
	keeping, _ := want(d)
	if len(keeping) == 0 || len(keeping) == len(nodes) {
		t.Fatalf("the plan keeps sampling on %v of %d nodes: want some, not all", keeping, len(nodes))
	}
	// Fresh agents keep the empty set: only the nodes that keep
	// something are handed theirs.
	if !slices.Equal(handed, keeping) {
		t.Fatalf("apply from scratch handed the kept OAM to %v, want %v", handed, keeping)
	}
	for i := 0; i < 2; i++ {
		if handed := apply("no-op apply", d, false); len(handed) != 0 {
			t.Fatalf("no-op apply %d handed the kept OAM to %v, want none", i+1, handed)
		}
		want(d)
	}

	// An agent restarted keeps nothing: the next apply hands it its set,
	// and it alone.
	restarted := keeping[0]
	nodes[restarted].start()
	if err := agents[restarted].(*client.Client).AcquireLease(ctx, "test", time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, _ := nodes[restarted].oam.keep.Kept(); len(got) != 0 {
		t.Fatalf("restarted %s keeps %v", restarted, got)
	}
	if handed := apply("no-op apply after a restart", d, false); !slices.Equal(handed, []string{restarted}) {
		t.Fatalf("no-op apply after %s's agent restarted handed the kept OAM to %v, want it alone", restarted, handed)
	}
	want(d)

	// The responder: its SIDs are read again by every Keep, so every
	// apply hands the responders' sets; the others' are kept as they are.
	dr := keptDomain(t, true)
	apply("apply with the responder", dr, false)
	_, responders := want(dr)
	if len(responders) == 0 {
		t.Fatal("no responder planned")
	}
	if handed := apply("no-op apply with the responder", dr, false); !slices.Equal(handed, responders) {
		t.Fatalf("no-op apply with responders handed the kept OAM to %v, want the responders %v", handed, responders)
	}

	// destroy hands every agent the empty set: nothing is kept.
	apply("destroy", dr, true)
	for n, k := range nodes {
		if got, r := k.oam.keep.Kept(); len(got) != 0 || r {
			t.Errorf("after destroy %s keeps %v (responder %v)", n, got, r)
		}
	}
}
