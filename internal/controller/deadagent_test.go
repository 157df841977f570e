package controller

import (
	"context"
	"errors"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/nodestate"
)

// deadAgent is an agent whose process died: every call fails as the
// transport would.
type deadAgent struct{ *lockedAgent }

func (d deadAgent) Execute(context.Context, []agent.Op) (int, error) {
	return 0, errors.New("node ing: agent 192.0.2.9:7070: execute: error reading from server: EOF (Unavailable)")
}

// deadJournal is an agenttest.Journal whose node dead cannot be reached.
type deadJournal struct {
	*agenttest.Journal
	dead string
}

func (j *deadJournal) Clear(node string) error {
	if node == j.dead {
		return errors.New("node " + node + ": agent 192.0.2.9:7070: journal: connection refused (Unavailable)")
	}
	return j.Journal.Clear(node)
}

// The agent of a node dies in the middle of an apply: every other node
// is rolled back and its journal cleared; the report names the node,
// says that the others were rolled back, and that the dead node's journal
// is left for the next apply.
func TestAgentDiesMidApply(t *testing.T) {
	ctx := context.Background()
	c, ls, _ := newParallelCtl(fanPlan(4), 4, true)
	before := map[string]nodestate.Node{}
	for n, l := range ls {
		before[n] = l.State
	}
	j := &deadJournal{Journal: agenttest.NewJournal(), dead: "ing"}
	c.Journal = j
	c.Agents["ing"] = deadAgent{ls["ing"]}
	res, err := c.Apply(ctx, false)
	if err == nil {
		t.Fatal("apply succeeded with a dead agent")
	}
	for _, want := range []string{"apply failed, every node rolled back to its previous state: node ing: agent 192.0.2.9:7070: execute",
		"journals left where they could not be cleared", "node ing: agent 192.0.2.9:7070: journal: connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !res.RolledBack {
		t.Error("result not rolled back")
	}
	for n, l := range ls {
		if diff := cmp.Diff(before[n], l.State, cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})); diff != "" {
			t.Errorf("node %s not rolled back (-before +after):\n%s", n, diff)
		}
	}
	cleared := j.Cleared()
	sort.Strings(cleared)
	if diff := cmp.Diff([]string{"e1", "e2", "e3", "e4"}, cleared); diff != "" {
		t.Errorf("journals cleared (-want +got):\n%s", diff)
	}
}
