package controller

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// lockedAgent serializes a fake's Execute with the others' (their shared
// log).
type lockedAgent struct {
	*agenttest.Agent
	mu    *sync.Mutex
	delay time.Duration
	batch bool
}

func (l *lockedAgent) Caps() agent.Caps {
	return agent.Caps{JournalsEachOp: l.batch}
}

func (l *lockedAgent) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	time.Sleep(l.delay) // lets the other nodes of the phase run meanwhile
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Agent.Execute(ctx, ops)
}

func (l *lockedAgent) Observe(ctx context.Context, want *nodestate.Node) (*nodestate.Node, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Agent.Observe(ctx, want)
}

// fanPlan: a headend whose policy visits an End SID on each of n nodes.
func fanPlan(n int) *plan.Plan {
	p := &plan.Plan{Domain: "fan", Nodes: map[string]*nodestate.Node{}}
	var segs []netip.Addr
	for i := 1; i <= n; i++ {
		sid := mustAddr(fmt.Sprintf("fc00:%x::100", i))
		segs = append(segs, sid)
		name := fmt.Sprintf("e%d", i)
		p.Nodes[name] = &nodestate.Node{Name: name, Routes: []nodestate.Route{{Dst: netip.PrefixFrom(sid, 128), Dev: "lo", Metric: 1024,
			Seg6Local: &nodestate.Seg6Local{Action: "End", Count: true}}}}
	}
	p.Nodes["ing"] = &nodestate.Node{Name: "ing",
		Routes: []nodestate.Route{{Dst: mustPrefix("fc00:d::/64"), Table: 1500, Dev: "eth0", Metric: 1024,
			Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: segs}}},
		Rules: []nodestate.Rule{{Family: 6, Priority: 5000, Dst: mustPrefix("fc00:d::/64"), Table: 1500}},
	}
	return p
}

func newParallelCtl(p *plan.Plan, workers int, batch ...bool) (*Controller, map[string]*lockedAgent, *[]string) {
	var mu sync.Mutex
	var all []string
	ls := map[string]*lockedAgent{}
	agents := map[string]agent.Agent{}
	for n := range p.Nodes {
		l := &lockedAgent{Agent: &agenttest.Agent{Name: n, All: &all}, mu: &mu, delay: time.Millisecond, batch: len(batch) > 0 && batch[0]}
		ls[n] = l
		agents[n] = l
	}
	return &Controller{Plan: p, Agents: agents, Concurrency: workers, NodeTimeout: time.Minute}, ls, &all
}

func TestParallelApplyKeepsMakeBeforeBreak(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) { testParallelMBB(t, batch) })
	}
}

func testParallelMBB(t *testing.T, batch bool) {
	ctx := context.Background()
	c, _, all := newParallelCtl(fanPlan(6), 4, batch)
	if _, err := c.Apply(ctx, false); err != nil {
		t.Fatal(err)
	}
	lastEndpoint, firstHeadend := -1, len(*all)
	for i, l := range *all {
		if strings.HasPrefix(l, "ing: ") {
			firstHeadend = min(firstHeadend, i)
		} else {
			lastEndpoint = i
		}
	}
	if lastEndpoint > firstHeadend || lastEndpoint < 5 {
		t.Fatalf("every End SID must be installed before the headend's first op; ops:\n%s", strings.Join(*all, "\n"))
	}
	res, err := c.Apply(ctx, false)
	if err != nil || res.Changes() != 0 {
		t.Fatalf("second apply: %d change(s), %v", res.Changes(), err)
	}
}

func TestParallelFailureRollsBackEveryNode(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) { testParallelRollback(t, batch) })
	}
}

func testParallelRollback(t *testing.T, batch bool) {
	ctx := context.Background()
	c, ls, _ := newParallelCtl(fanPlan(6), 4, batch)
	if _, err := c.Apply(ctx, false); err != nil {
		t.Fatal(err)
	}
	before := map[string]nodestate.Node{}
	for n, l := range ls {
		before[n] = l.State
	}
	c.Plan = fanPlan(6)
	for i := 1; i <= 6; i++ { // every SID moves
		n := c.Plan.Nodes[fmt.Sprintf("e%d", i)]
		n.Routes[0].Dst = netip.PrefixFrom(mustAddr(fmt.Sprintf("fc00:%x::200", i)), 128)
	}
	ls["e4"].FailOn = "fc00:4::200"
	res, err := c.Apply(ctx, false)
	if err == nil || !strings.Contains(err.Error(), "injected failure") || !res.RolledBack {
		t.Fatalf("apply: rolled back %v, %v", res.RolledBack, err)
	}
	for n, l := range ls {
		if diff := cmp.Diff(before[n], l.State, cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); diff != "" {
			t.Errorf("node %s not rolled back (-before +after):\n%s", n, diff)
		}
	}
}
