package agents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/pki"
)

// Lab agents accept only the lab's controller (--allow-controller lab):
// another controller certificate of the same lab CA is refused in the
// TLS handshake, over the management network, and the agent logs which
// controller it refused; the lab's controller and a scrape from the
// management network still work.
func TestPrivilegedAgentRefusesUnlistedController(t *testing.T) {
	e := newEnvFile(t, true, "h2a-", "../../examples/hmac.yaml")
	f, err := pki.Issue(e.Lab.AgentPKI, pki.RoleController, "intruder", pki.IssueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := pki.ClientTLS(f, "nfv1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial("nfv1", e.Lab.Agents["nfv1"].Addr, tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetTimeout(10 * time.Second)
	ctx := context.Background()
	if err := c.Preflight(ctx); err == nil || !strings.Contains(err.Error(), "--allow-controller") {
		t.Fatalf("preflight with the intruder's certificate: %v, want refused", err)
	}
	if err := c.AcquireLease(ctx, "intruder", time.Minute); err == nil {
		t.Fatal("the intruder took nfv1's lease")
	}
	if !waitFor(10*time.Second, func() bool {
		for _, r := range e.agentLog("nfv1", "connection refused") {
			if strings.Contains(r["err"].(string), `controller "intruder" is not allowed`) {
				return true
			}
		}
		return false
	}) {
		t.Errorf("nfv1's agent did not log the refused controller")
	}
	if err := controller(t, e.Lab, "nfv1").Preflight(ctx); err != nil {
		t.Errorf("the lab's controller: %v", err)
	}
	if !strings.Contains(e.scrape("nfv1"), "segchain_agent_build_info") {
		t.Error("the management network cannot scrape")
	}
}
