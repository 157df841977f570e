package agenttest

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// Every op the controller sends, then its inverse in reverse order,
// leaves the node as it was (rollback relies on it); an injected failure
// stops the batch at the failing op; the journal keeps a node's ops until
// it is cleared.
func TestAgentAndJournal(t *testing.T) {
	ctx := context.Background()
	a := New("n")
	a.State.Routes = []nodestate.Route{{Dst: netip.MustParsePrefix("fc00:9::/64"), Dev: "e0"}}
	before := a.Snapshot()
	r := nodestate.Route{Dst: netip.MustParsePrefix("fc00:2::1/128"), Dev: "lo", Owner: "service s1",
		Seg6Local: &nodestate.Seg6Local{Action: "End"}}
	ops := []agent.Op{
		{Kind: agent.KindSysctl, Action: agent.ActSet, Sysctl: &nodestate.Sysctl{Key: "net.ipv6.conf.all.forwarding", Value: "1"}, OldValue: "0"},
		{Kind: agent.KindTunSrc, Action: agent.ActSet, TunSrc: "fc00::1"},
		{Kind: agent.KindHMAC, Action: agent.ActSet, HMAC: &nodestate.HMACKey{ID: 7, Alg: "sha256"}},
		{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &r},
		{Kind: agent.KindRule, Action: agent.ActAdd, Rule: &nodestate.Rule{Family: 6, Priority: 5000, Table: 1500}},
		{Kind: agent.KindServices, Action: agent.ActSet, Service: "firewall", Services: []nodestate.Service{{Kind: "firewall", SID: netip.MustParsePrefix("fc00:2::f1/128")}}},
	}
	if n, err := a.Execute(ctx, ops); n != len(ops) || err != nil {
		t.Fatalf("Execute = %d, %v", n, err)
	}
	got, _ := a.Observe(ctx, &nodestate.Node{Sysctls: []nodestate.Sysctl{{Key: "net.ipv6.conf.all.forwarding"}}})
	if len(got.Routes) != 2 || got.Routes[0].Owner+got.Routes[1].Owner != "" || got.Sysctls[0].Value != "1" || len(got.Services) != 1 {
		t.Errorf("observed after Execute: %+v", got)
	}
	for i := len(ops) - 1; i >= 0; i-- {
		if _, err := a.Execute(ctx, []agent.Op{ops[i].Inverse()}); err != nil {
			t.Fatal(err)
		}
	}
	after := a.Snapshot()
	after.Sysctls = nil // set back to "0", as the kernel keeps it
	if diff := cmp.Diff(before, after, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); diff != "" {
		t.Errorf("not restored by the inverses (-before +after):\n%s", diff)
	}
	if o, _ := a.Originals(ctx); o["net.ipv6.conf.all.forwarding"] != "0" {
		t.Errorf("originals %v", o)
	}

	a.FailOn = "tunsrc"
	if n, err := a.Execute(ctx, ops); n != 1 || err == nil {
		t.Errorf("Execute with FailOn = %d, %v, want 1 and the injected failure", n, err)
	}

	j := NewJournal()
	j.Record("n", ops[0])
	j.Record("n", ops[1])
	if got, who, _ := j.Unfinished("n"); len(got) != 2 || who != "pid 1 (segchain apply)" {
		t.Errorf("Unfinished = %v, %q", got, who)
	}
	if got, who, _ := j.Unfinished("m"); got != nil || who != "" {
		t.Errorf("Unfinished of a node without a journal = %v, %q", got, who)
	}
	j.Clear("n")
	if got, _, _ := j.Unfinished("n"); got != nil || len(j.Nodes()) != 0 || len(j.Cleared()) != 1 {
		t.Errorf("after Clear: %v, nodes %v, cleared %v", got, j.Nodes(), j.Cleared())
	}
}
