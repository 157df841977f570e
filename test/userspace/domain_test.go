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

	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// TestPrivilegedUserspaceDomain: apply fails, naming the SID and changing
// nothing, while no process serves the userspace service; once a process
// has bound the planned SID, apply succeeds, a re-apply changes nothing and
// the chain's traffic goes through the process.
func TestPrivilegedUserspaceDomain(t *testing.T) {
	testutil.RequirePrivileged(t)
	testutil.RequireTool(t, "tcpdump")
	testutil.RequireScapy(t)
	raw, err := os.ReadFile("../../examples/userspace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := upLab(t, "h17u", strings.Replace(string(raw), "wait: 10s", "wait: 1s", 1))
	ns := e.NS
	ctl := e.Session(nil)
	ctx := context.Background()
	prefix := netip.MustParsePrefix("fc00:2::5c:0/112")

	// No process: apply waits 1 s, fails naming the SID, and leaves the
	// ingress without the chain's route.
	_, err = ctl.Apply(ctx)
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

	res, err := ctl.Apply(ctx)
	if err != nil {
		t.Fatalf("apply with the process serving: %v", err)
	}
	if res.Changes() == 0 {
		t.Error("apply changed nothing")
	}
	if res, err := ctl.Apply(ctx); err != nil || res.Changes() != 0 {
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

// TestPrivilegedUserspaceStaleBypass: a service that bound its SID with
// on-failure bypass and binds again with drop leaves no bypass End route;
// a bypass route left anyway (by hand here, as an older version left it)
// is drift that plan sees and apply removes; status marks the SID as the
// domain's.
func TestPrivilegedUserspaceStaleBypass(t *testing.T) {
	testutil.RequirePrivileged(t)
	raw, err := os.ReadFile("../../examples/userspace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(strings.Replace(string(raw), "wait: 10s", "wait: 1s", 1), "on_failure: bypass", "on_failure: drop", 1)
	e := upLab(t, "h7sb", y)
	nfv1 := e.NS("nfv1")
	ctl := e.Session(nil)
	ctx := context.Background()
	prefix := netip.MustParsePrefix("fc00:2::5c:0/112")
	bypassRoutes := func() string {
		return strings.TrimSpace(testutil.Exec(t, nfv1, "ip", "-6", "route", "show", "proto", "201"))
	}
	cfg := srv6svc.Config{Name: "acct", Netns: nfv1, Interfaces: []string{"eth-ingress"}, SIDs: []netip.Prefix{prefix},
		OnFailure: srv6svc.OnFailureBypass, Queues: 1}
	first, err := srv6svc.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r0 := strings.Fields(bypassRoutes())
	own := ""
	for i := range r0 {
		if r0[i] == "dev" && i+1 < len(r0) {
			own = r0[i+1]
		}
	}
	if own == "" {
		t.Fatalf("a bypass binding installed no End route: %v", r0)
	}
	first.Close()
	cfg.OnFailure = srv6svc.OnFailureDrop
	svc, err := srv6svc.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- svc.Serve(sctx, func(*srv6svc.Packet) srv6svc.Verdict { return srv6svc.Forward })
	}()
	t.Cleanup(func() { cancel(); <-done; _ = svc.Release() })
	if r := bypassRoutes(); r != "" {
		t.Errorf("rebound with drop, the bypass End route stayed: %s", r)
	}
	if _, err := ctl.Apply(ctx); err != nil {
		t.Fatalf("apply: %v", err)
	}
	drift := func() int {
		diffs, err := ctl.Controller().Diff(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range diffs {
			n += len(d.Adds) + len(d.Deletes)
		}
		return n
	}
	if n := drift(); n != 0 {
		t.Fatalf("applied, %d pending changes", n)
	}
	testutil.Exec(t, nfv1, "ip", "-6", "route", "replace", prefix.String(), "proto", "201", "metric", "1199",
		"encap", "seg6local", "action", "End", "dev", own)
	if n := drift(); n == 0 {
		t.Error("a stale bypass End route for a drop binding is not drift")
	}
	if _, err := ctl.Apply(ctx); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if r := bypassRoutes(); r != "" {
		t.Errorf("apply left the stale bypass route: %s", r)
	}
	if n := drift(); n != 0 {
		t.Errorf("after apply, %d pending changes", n)
	}
	st := ctl.Status(ctx)
	found := false
	for _, n := range st.Nodes {
		for _, s := range n.SIDs {
			if n.Node == "nfv1" && s.SID == prefix {
				found = true
				if !s.Owned || s.Service != "acct" {
					t.Errorf("status of %s: owned %v, service %q; want the domain's service acct", prefix, s.Owned, s.Service)
				}
			}
		}
	}
	if !found {
		t.Errorf("status lacks %s", prefix)
	}
}

// upLab writes domain (YAML text) to a file and brings up its lab under a
// unique name with prefix (labenv: taken down when the test ends, even on
// failure, and checked for leftovers).
func upLab(t *testing.T, prefix, domain string) *labenv.Env {
	t.Helper()
	file := filepath.Join(t.TempDir(), prefix+".yaml")
	if err := os.WriteFile(file, []byte(domain), 0o644); err != nil {
		t.Fatal(err)
	}
	return labenv.New(t, labenv.Options{File: file, Prefix: prefix})
}
