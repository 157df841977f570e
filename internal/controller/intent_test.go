package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/nodestate"
)

// keeper is a fake agent that keeps the intents it is handed.
type keeper struct {
	*agenttest.Agent
	intents []*nodestate.Node
	err     error
}

func (k *keeper) Caps() agent.Caps { return agent.Caps{Intents: k} }

func (k *keeper) SetIntent(_ context.Context, want *nodestate.Node) error {
	if k.err != nil {
		return k.err
	}
	k.intents = append(k.intents, want)
	return nil
}

func newKeeperCtl() (*Controller, map[string]*keeper) {
	c, fakes := newCtl(twoNodePlan("fc00:2::100"))
	ks := map[string]*keeper{}
	for n, f := range fakes {
		ks[n] = &keeper{Agent: f}
		c.Agents[n] = ks[n]
	}
	return c, ks
}

// After an apply (also one that changes nothing) every node's agent is
// handed its planned state; after a destroy, "nothing"; after a dry run
// or a failed, rolled-back apply, nothing is handed (the previous intent
// stands).
func TestApplyHandsIntents(t *testing.T) {
	ctx := context.Background()
	c, ks := newKeeperCtl()
	if _, err := c.Apply(ctx, true); err != nil {
		t.Fatal(err)
	}
	for n, k := range ks {
		if len(k.intents) != 0 {
			t.Errorf("dry run handed %s %d intent(s)", n, len(k.intents))
		}
	}
	ks["ing"].FailOn = "rule"
	if _, err := c.Apply(ctx, false); err == nil {
		t.Fatal("apply with a failing op succeeded")
	}
	for n, k := range ks {
		if len(k.intents) != 0 {
			t.Errorf("a rolled-back apply handed %s %d intent(s)", n, len(k.intents))
		}
	}
	ks["ing"].FailOn = ""
	for range 2 { // the second apply changes nothing
		if _, err := c.Apply(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	for n, k := range ks {
		if len(k.intents) != 2 {
			t.Fatalf("node %s was handed %d intents, want 2", n, len(k.intents))
		}
		if k.intents[1] != c.Plan.Nodes[n] {
			t.Errorf("node %s was handed %+v, not its planned state", n, k.intents[1])
		}
	}
	if _, err := c.Destroy(ctx, false); err != nil {
		t.Fatal(err)
	}
	for n, k := range ks {
		if got := k.intents[len(k.intents)-1]; got.Name != n || len(got.Routes)+len(got.Rules)+len(got.Sysctls)+len(got.HMACKeys) != 0 {
			t.Errorf("node %s intent after destroy: %+v, want nothing", n, got)
		}
	}
}

// An agent that does not take the intent fails the command, naming the
// node, though the nodes are applied.
func TestIntentRefusedIsReported(t *testing.T) {
	c, ks := newKeeperCtl()
	ks["nfv"].err = errors.New("node nfv: agent x: set intent: disk full")
	res, err := c.Apply(context.Background(), false)
	if err == nil || !strings.Contains(err.Error(), "node nfv") || !strings.Contains(err.Error(), "the nodes are as planned") {
		t.Fatalf("apply: %v", err)
	}
	if res == nil || !res.Applied {
		t.Errorf("result %+v: want applied", res)
	}
	if len(ks["ing"].intents) != 1 {
		t.Errorf("ing was handed %d intents, want 1", len(ks["ing"].intents))
	}
}
