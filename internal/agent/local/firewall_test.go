package local

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	firewalldp "github.com/segchain/segchain/internal/dataplane/firewall"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/firewall"
	"github.com/segchain/segchain/internal/testutil"
)

// CanonicalFirewall is the firewall kind's canonical text of f.
func CanonicalFirewall(f firewall.Spec) string { return firewall.Kind{}.Canonical(f.Service()) }

func firewalls(n *nodestate.Node) []firewall.Spec {
	fs, err := firewall.SpecsOf(n.Services)
	if err != nil {
		panic(err)
	}
	return fs
}

var services = firewall.Services

func testFirewall() firewall.Spec {
	return firewall.Spec{SID: netip.MustParsePrefix("fc00:2::f1:0/112"), ArgsBits: 16, Policy: "drop",
		Rules: []string{"-p udp --dport 53 -m srh -j SEG6 --seg6-action skip-next", "-4 -s 10.0.0.0/8 -j DROP"},
		Args:  map[uint32]string{0: "go-next", 1: "drop", 2: "skip-next", 3: "go-last"}}
}

func TestCanonicalFirewall(t *testing.T) {
	a := testFirewall()
	b := testFirewall()
	b.Rules = []string{"-m srh -p udp -m udp --dport 53 -j SEG6 --seg6-action seg6-skip-next", "-s 10.0.0.0/8 -4 -j DROP"}
	b.Args = nil // the default table, implicit
	if CanonicalFirewall(a) != CanonicalFirewall(b) {
		t.Errorf("equal firewalls differ:\n%s\n%s", CanonicalFirewall(a), CanonicalFirewall(b))
	}
	c := testFirewall()
	c.Policy = "accept"
	if CanonicalFirewall(a) == CanonicalFirewall(c) {
		t.Error("a policy change is not a difference")
	}
	op := agent.Op{Kind: agent.KindServices, Action: agent.ActSet, Service: firewall.Name, Services: services(a)}
	if s := op.String(); !strings.Contains(s, "~ firewalls: 0 -> 1") || !strings.Contains(s, "+ firewall fc00:2::f1:0/112") ||
		!strings.Contains(s, "2: -4 -s 10.0.0.0/8 -j DROP") {
		t.Errorf("op string:\n%s", s)
	}
	if inv := op.Inverse(); len(inv.Services) != 0 || len(inv.OldServices) != 1 {
		t.Errorf("inverse %+v", inv)
	}
	if _, err := firewalldp.InstanceOf(firewall.Spec{SID: a.SID, Policy: "drop", Rules: []string{"-j NOPE"}}.Service()); err == nil ||
		!strings.Contains(err.Error(), "rule 1") {
		t.Errorf("bad rule: %v", err)
	}
}

// TestLocalFirewallOps applies, observes, replaces and removes a firewall
// instance in a namespace through the local agent.
func TestLocalFirewallOps(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "agfw")
	l := NewLocal("n", ns)
	l.stateDir = t.TempDir()
	ctx := context.Background()
	want := testFirewall()
	op := agent.Op{Kind: agent.KindServices, Action: agent.ActSet, Service: firewall.Name, Services: services(want)}
	if _, err := l.Execute(ctx, []agent.Op{op}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = l.Execute(ctx, []agent.Op{op.Inverse()}) })
	got, err := l.Observe(ctx, &nodestate.Node{})
	if err != nil {
		t.Fatal(err)
	}
	if fs := firewalls(got); len(fs) != 1 || CanonicalFirewall(fs[0]) != CanonicalFirewall(want) {
		t.Fatalf("observed %+v, want %+v", fs, want)
	}
	// Replace: a new rule list on the same SID.
	repl := testFirewall()
	repl.Rules = append(repl.Rules, "-d fc00:d1::/64 -j REJECT")
	op2 := agent.Op{Kind: agent.KindServices, Action: agent.ActSet, Service: firewall.Name, Services: services(repl), OldServices: got.Services}
	if _, err := l.Execute(ctx, []agent.Op{op2}); err != nil {
		t.Fatal(err)
	}
	got, err = l.Observe(ctx, &nodestate.Node{})
	if err != nil {
		t.Fatal(err)
	}
	if fs := firewalls(got); len(fs) != 1 || len(fs[0].Rules) != 3 {
		t.Fatalf("after replace: %+v", fs)
	}
	cs, err := l.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range cs {
		if c.Behavior == "End.AN.FW" && c.SID == want.SID {
			found = true
		}
	}
	if !found {
		t.Errorf("counters lack the firewall: %+v", cs)
	}
	// Remove everything (the inverse of the first op, after the replace).
	if _, err := l.Execute(ctx, []agent.Op{{Kind: agent.KindServices, Action: agent.ActSet, Service: firewall.Name, OldServices: got.Services}}); err != nil {
		t.Fatal(err)
	}
	if got, err = l.Observe(ctx, &nodestate.Node{}); err != nil || len(got.Services) != 0 {
		t.Fatalf("after remove: %+v, %v", got.Services, err)
	}
}
