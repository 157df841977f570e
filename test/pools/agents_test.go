package pools

import (
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// TestPoolThroughAgents: with an agent per node (lab up --agents), apply
// installs the selector through ingress's agent, the agent runs the
// node's health checks itself, and status (through the agents) shows an
// SF that stops forwarding as down — status --check exits 2 — and back.
func TestPoolThroughAgents(t *testing.T) {
	e := labenv.New(t, labenv.Options{File: "testdata/pooled.yaml", Prefix: "s9g", CLI: true, Binary: bin, Agents: true, Tools: []string{"nft"}})
	e.Must("apply", "--lab", e.Name)
	status := func() (string, int) {
		out, err := e.Run("status", "--lab", e.Name, "--check")
		code := 0
		if err != nil {
			code = 1
			if strings.Contains(out, "pool instance(s) down") {
				code = 2
			}
		}
		return out, code
	}
	wait := func(what string, ok func(out string, code int) bool) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, code := status()
			if ok(out, code) {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never came:\n%s", what, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	wait("the agent's checks", func(out string, code int) bool {
		return code == 0 && strings.Contains(out, "pools:") && strings.Contains(out, "(checked ")
	})
	testutil.Exec(t, e.NS("sf2"), "nft", "add table inet s9g; add chain inet s9g s9gfwd { type filter hook forward priority 0; policy drop; }")
	out := wait("fw2 down", func(out string, code int) bool { return code == 2 })
	if !strings.Contains(out, "fw2 at ingress") || !strings.Contains(out, "fw2          packets") || !strings.Contains(out, "srv6 check failed") {
		t.Errorf("status while fw2 is down:\n%s", out)
	}
	testutil.Exec(t, e.NS("sf2"), "nft", "delete", "table", "inet", "s9g")
	wait("fw2 up again", func(out string, code int) bool { return code == 0 && strings.Contains(out, "srv6 check passed") })
}
