package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func mustAddr(s string) netip.Addr     { return netip.MustParseAddr(s) }

// twoNodePlan is a headend steering into an End SID on a second node.
func twoNodePlan(sid string) *plan.Plan {
	return &plan.Plan{Domain: "t", Nodes: map[string]*nodestate.Node{
		"ing": {Name: "ing",
			Sysctls:  []nodestate.Sysctl{{Key: "net.ipv6.conf.all.forwarding", Value: "1"}},
			HMACKeys: []nodestate.HMACKey{{ID: 7, Alg: "sha256", Secret: []byte("s")}},
			Routes: []nodestate.Route{{Dst: mustPrefix("fc00:d::/64"), Table: 1500, Dev: "eth0", Metric: 1024,
				Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: []netip.Addr{mustAddr(sid)}}}},
			Rules: []nodestate.Rule{{Family: 6, Priority: 5000, Dst: mustPrefix("fc00:d::/64"), Table: 1500}},
		},
		"nfv": {Name: "nfv",
			Sysctls: []nodestate.Sysctl{{Key: "net.ipv6.conf.all.forwarding", Value: "1"}},
			Routes: []nodestate.Route{{Dst: netip.PrefixFrom(mustAddr(sid), 128), Dev: "lo", Metric: 1024,
				Seg6Local: &nodestate.Seg6Local{Action: "End", Count: true}}},
		},
	}}
}

func newCtl(p *plan.Plan) (*Controller, map[string]*agenttest.Agent) {
	fakes := map[string]*agenttest.Agent{}
	agents := map[string]agent.Agent{}
	for n := range p.Nodes {
		f := agenttest.New(n)
		fakes[n] = f
		agents[n] = f
	}
	return &Controller{Plan: p, Agents: agents}, fakes
}

func TestApplyIsIdempotent(t *testing.T) {
	ctx := context.Background()
	c, _ := newCtl(twoNodePlan("fc00:2::100"))
	res, err := c.Apply(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Applied || res.Changes() == 0 {
		t.Fatalf("first apply: applied=%v changes=%d", res.Applied, res.Changes())
	}
	res, err = c.Apply(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Changes() != 0 {
		t.Fatalf("second apply changed %d things: %+v", res.Changes(), res.Diffs)
	}
}

func TestApplyOrdersEndpointsBeforeHeadends(t *testing.T) {
	ctx := context.Background()
	c, fakes := newCtl(twoNodePlan("fc00:2::100"))
	var all []string
	for _, f := range fakes {
		f.All = &all
	}
	if _, err := c.Apply(ctx, false); err != nil {
		t.Fatal(err)
	}
	sidAt, policyAt := -1, -1
	for i, l := range all {
		switch {
		case strings.HasPrefix(l, "nfv: + route fc00:2::100/128"):
			sidAt = i
		case strings.HasPrefix(l, "ing: + route fc00:d::/64"):
			policyAt = i
		}
	}
	if sidAt < 0 || policyAt < 0 || sidAt > policyAt {
		t.Errorf("the End SID must be installed before the policy steering into it; ops:\n%s", strings.Join(all, "\n"))
	}
	if last := all[len(all)-1]; !strings.HasPrefix(last, "ing: + ipv6 rule") {
		t.Errorf("last op = %q, want the rule that steers traffic", last)
	}
}

func TestChangeIsMakeBeforeBreak(t *testing.T) {
	ctx := context.Background()
	c, fakes := newCtl(twoNodePlan("fc00:2::100"))
	if _, err := c.Apply(ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, f := range fakes {
		f.Log = nil
	}
	c.Plan = twoNodePlan("fc00:2::200") // the chain moves to a new SID
	if _, err := c.Apply(ctx, false); err != nil {
		t.Fatal(err)
	}
	want := []string{"+ route fc00:2::200/128", "- route fc00:2::100/128"}
	var got []string
	for _, l := range fakes["nfv"].Log {
		got = append(got, l[:min(len(l), len(want[0]))])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("nfv ops (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(fakes["ing"].Log[0], "~ route fc00:d::/64") {
		t.Errorf("ing ops = %v, want an in-place replace of the policy", fakes["ing"].Log)
	}
}

func TestFailedApplyRollsBackEveryNode(t *testing.T) {
	ctx := context.Background()
	c, fakes := newCtl(twoNodePlan("fc00:2::100"))
	if _, err := c.Apply(ctx, false); err != nil {
		t.Fatal(err)
	}
	c.Plan = twoNodePlan("fc00:2::200")
	c.Plan.Nodes["ing"].Sysctls = append(c.Plan.Nodes["ing"].Sysctls, nodestate.Sysctl{Key: "net.ipv6.conf.all.seg6_enabled", Value: "1"})
	observe := func(n string) *nodestate.Node {
		got, _ := fakes[n].Observe(ctx, c.Plan.Nodes[n])
		return got
	}
	before := map[string]*nodestate.Node{}
	for n := range fakes {
		before[n] = observe(n)
	}
	fakes["ing"].FailOn = "fc00:d::/64" // the headend policy fails after nfv and the sysctl changed
	res, err := c.Apply(ctx, false)
	if err == nil {
		t.Fatal("apply succeeded despite an injected failure")
	}
	if !res.RolledBack {
		t.Errorf("result not marked rolled back: %+v", res)
	}
	for n := range fakes {
		if diff := cmp.Diff(before[n], observe(n), cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); diff != "" {
			t.Errorf("node %s not restored (-before +after):\n%s", n, diff)
		}
	}
}

func TestDestroyRemovesWhatWasInstalled(t *testing.T) {
	ctx := context.Background()
	c, fakes := newCtl(twoNodePlan("fc00:2::100"))
	if _, err := c.Apply(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Destroy(ctx, false); err != nil {
		t.Fatal(err)
	}
	for n, f := range fakes {
		if len(f.State.Routes)+len(f.State.Rules)+len(f.State.HMACKeys) != 0 || f.State.TunSrc != "" {
			t.Errorf("node %s keeps state after destroy: %+v", n, f.State)
		}
		for _, s := range f.State.Sysctls {
			if s.Value != "0" {
				t.Errorf("node %s: sysctl %s not restored: %s", n, s.Key, s.Value)
			}
		}
	}
}

func TestInverseRoundTrip(t *testing.T) {
	r := nodestate.Route{Dst: mustPrefix("fc00::/64"), Dev: "lo"}
	old := nodestate.Route{Dst: mustPrefix("fc00::/64"), Dev: "eth0"}
	ops := []agent.Op{
		{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &r},
		{Kind: agent.KindRoute, Action: agent.ActReplace, Route: &r, OldRoute: &old},
		{Kind: agent.KindRoute, Action: agent.ActDelete, Route: &r},
		{Kind: agent.KindSysctl, Action: agent.ActSet, Sysctl: &nodestate.Sysctl{Key: "k", Value: "1"}, OldValue: "0"},
	}
	for _, op := range ops {
		if got := op.Inverse().Inverse().String(); got != op.String() {
			t.Errorf("inverse of inverse of %q = %q", op, got)
		}
		if op.Inverse().String() == op.String() {
			t.Errorf("inverse of %q is itself", op)
		}
	}
}

// A route observed as desired, its Owner aside, is no change; one that
// differs in anything String shows is replaced.
func TestComputeSameRoute(t *testing.T) {
	p := netip.MustParsePrefix
	want := nodestate.Route{Dst: p("fc00:9::/64"), Dev: "e0", Via: netip.MustParseAddr("fc01:1::2"), Owner: "static"}
	same := want
	same.Owner = ""
	other := want
	other.Via = netip.MustParseAddr("fc01:1::3")
	emptySegs := nodestate.Route{Dst: p("fc00:2::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End", Segs: []netip.Addr{}}}
	nilSegs := nodestate.Route{Dst: p("fc00:2::1/128"), Seg6Local: &nodestate.Seg6Local{Action: "End"}}
	for _, tc := range []struct {
		name      string
		got, want nodestate.Route
		ops       int
	}{
		{"owner only", same, want, 0},
		{"via differs", other, want, 1},
		{"nil and empty lists render alike", nilSegs, emptySegs, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Compute(&nodestate.Node{Name: "n", Routes: []nodestate.Route{tc.got}}, &nodestate.Node{Name: "n", Routes: []nodestate.Route{tc.want}})
			if n := len(d.Adds) + len(d.Deletes); n != tc.ops {
				t.Fatalf("%d ops, want %d: %v", n, tc.ops, d.Ops())
			}
		})
	}
}

// Outside runs around every apply that is not a dry run, before the
// nodes change (a lab's routers must run FRR before the apply waits for
// their sessions), and learns the outcome: nil when the apply succeeded,
// the error when it failed and was rolled back. Its own failure stops the
// apply before any node changes.
func TestApplyOutside(t *testing.T) {
	ctx := context.Background()
	c, fakes := newCtl(twoNodePlan("fc00:2::100"))
	var calls []string
	c.Outside = func() (func(error) error, error) {
		calls = append(calls, fmt.Sprintf("sync (nfv ops so far %d)", len(fakes["nfv"].Log)))
		return func(err error) error {
			calls = append(calls, fmt.Sprintf("done %v", err != nil))
			return nil
		}, nil
	}
	if _, err := c.Apply(ctx, true); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 0 {
		t.Errorf("a dry run ran Outside: %v", calls)
	}
	if _, err := c.Apply(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, false); err != nil { // no changes: still kept in step
		t.Fatal(err)
	}
	c.Plan = twoNodePlan("fc00:2::200")
	fakes["ing"].FailOn = "fc00:d::/64"
	if _, err := c.Apply(ctx, false); err == nil {
		t.Fatal("apply succeeded despite an injected failure")
	}
	want := []string{"sync (nfv ops so far 0)", "done false", "sync (nfv ops so far 2)", "done false", "sync (nfv ops so far 2)", "done true"}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("Outside calls (-want +got):\n%s", diff)
	}
	fakes["ing"].FailOn = ""
	c.Outside = func() (func(error) error, error) { return nil, errors.New("frr would not start") }
	before := len(fakes["nfv"].Log)
	if _, err := c.Apply(ctx, false); err == nil || !strings.Contains(err.Error(), "frr would not start") {
		t.Errorf("apply with a failing Outside: %v", err)
	}
	if len(fakes["nfv"].Log) != before {
		t.Errorf("a failing Outside let the apply change nodes: %v", fakes["nfv"].Log[before:])
	}
}
