// Package userspace_test applies examples/userspace.yaml, a chain through a
// userspace SR-aware service (kind: userspace), to a lab.
package userspace_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodeagent"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// TestPrivilegedUserspaceDomain: apply fails, naming the SID and changing
// nothing, while no process serves the userspace service; once a process
// has bound the planned SID, apply succeeds, a re-apply changes nothing and
// the chain's traffic goes through the process.
func TestPrivilegedUserspaceDomain(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("privileged namespace test: skipped with -short")
	}
	testutil.RequireTool(t, "tcpdump")
	testutil.RequireScapy(t)
	raw, err := os.ReadFile("../../examples/userspace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "userspace.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(string(raw), "wait: 10s", "wait: 1s", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := lab.FromDomain(d)
	if err != nil {
		t.Fatal(err)
	}
	topo.Name = testutil.UniqueName("h17u")
	t.Cleanup(func() {
		if err := lab.Down(topo.Name); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	l, err := lab.Up(topo)
	if err != nil {
		t.Fatal(err)
	}
	ns := func(n string) string {
		s, err := l.Netns(n)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	agents := map[string]agent.Agent{}
	for n := range p.Nodes {
		agents[n] = nodeagent.NewLocal(n, ns(n))
	}
	t.Cleanup(func() {
		for _, n := range l.NodeNames() {
			_ = nodeagent.NewLocal(n, ns(n)).Forget(context.Background())
		}
	})
	ctl := &controller.Controller{Plan: p, Agents: agents}
	ctx := context.Background()
	prefix := netip.MustParsePrefix("fc00:2::5c:0/112")

	// No process: apply waits 1 s, fails naming the SID, and leaves the
	// ingress without the chain's route.
	_, err = ctl.Apply(ctx, false)
	if err == nil || !strings.Contains(err.Error(), prefix.String()) || !strings.Contains(err.Error(), "no process has bound it") {
		t.Fatalf("apply without the process: %v", err)
	}
	if out := testutil.Exec(t, ns("ingress"), "ip", "-6", "route", "show", "fc00:4d::/64"); strings.Contains(out, "seg6") {
		t.Errorf("failed apply left the chain's route at the ingress: %s", out)
	}

	// A process binds the planned SID (as examples/services/counter would).
	var seen atomic.Int64
	svc, err := srv6svc.Listen(srv6svc.Config{Name: "acct", Netns: ns("nfv1"), Interfaces: []string{"eth-ingress"},
		SIDs: []netip.Prefix{prefix}, OnFailure: srv6svc.OnFailureBypass, Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- svc.Serve(sctx, func(*srv6svc.Packet) srv6svc.Verdict { seen.Add(1); return srv6svc.Forward })
	}()
	t.Cleanup(func() { cancel(); <-done; _ = svc.Release() })

	res, err := ctl.Apply(ctx, false)
	if err != nil {
		t.Fatalf("apply with the process serving: %v", err)
	}
	if res.Changes() == 0 {
		t.Error("apply changed nothing")
	}
	if res, err := ctl.Apply(ctx, false); err != nil || res.Changes() != 0 {
		t.Errorf("second apply: %v, %d changes: %+v", err, res.Changes(), res.Diffs)
	}

	// The chain's traffic goes through the process (End) to d.
	c := testutil.StartInboundCapture(t, ns("d"), "eth-egress", "udp port 9999", 5)
	testutil.RunScapyIn(t, ns("s"), `
conf.verb = 0
for i in range(5):
    send(IPv6(src='fc00:1a::a', dst='fc00:4d::d')/UDP(sport=4000+i, dport=9999)/Raw(b'acct'))
`)
	if n := len(testutil.Tshark(t, c.Wait(5*time.Second), "udp.srcport")); n != 5 {
		t.Errorf("d received %d packets, want 5", n)
	}
	if c := svc.Counters(); seen.Load() != 5 || c.TX != 5 {
		t.Errorf("the service saw %d packets and sent %d, want 5 and 5 (counters %+v)", seen.Load(), c.TX, c)
	}
}
