package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
)

// checkingAgent refuses every batch of ops in Check.
type checkingAgent struct{ *agenttest.Agent }

func (c checkingAgent) Caps() agent.Caps { return agent.Caps{Check: c} }

func (c checkingAgent) Check(context.Context, []agent.Op) error {
	return errors.New("node " + c.Name + ": firewall does not fit")
}

// TestCheckFailsBeforeAnythingChanges: an agent's Checker refusal is the
// plan's and apply's error, and no node executes anything.
func TestCheckFailsBeforeAnythingChanges(t *testing.T) {
	c, fakes := newCtl(twoNodePlan("fc00:2::100"))
	for n, f := range fakes {
		if n != "ingress" {
			c.Agents[n] = checkingAgent{f}
		}
	}
	for _, dry := range []bool{true, false} {
		_, err := c.Apply(context.Background(), dry)
		if err == nil || !strings.Contains(err.Error(), "does not fit") {
			t.Errorf("Apply(dry %v) = %v, want the check's refusal", dry, err)
		}
	}
	for n, f := range fakes {
		if len(f.Log) != 0 {
			t.Errorf("node %s executed %v after a refused check", n, f.Log)
		}
	}
}
