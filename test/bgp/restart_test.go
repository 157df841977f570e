package bgp

import (
	"strings"
	"testing"
	"time"
)

// An agent killed (SIGKILL) leaves its BGP routes in the kernel; restarted,
// it runs the intent it persisted (no apply needed): its sessions come back,
// its routes are adopted, and apply finds nothing to change.
func TestPrivilegedBGPAgentRestart(t *testing.T) {
	e := newEnv(t, domainFile)
	e.Must("apply", "--lab", e.Name)
	e.waitEstablished(30 * time.Second)
	e.waitRoute("ingress", "fc00:4::/64", []string{"eth-r1", "eth-r2"}, 30*time.Second)
	if err := e.Lab.StopAgent("ingress", true); err != nil {
		t.Fatal(err)
	}
	if rs := e.bgpRoutes("ingress"); len(rs["fc00:2::/64"]) == 0 {
		t.Errorf("the killed agent's routes are gone: %v", rs)
	}
	if err := e.Lab.StartAgent(segchainBin, "ingress"); err != nil {
		t.Fatal(err)
	}
	e.waitEstablished(30 * time.Second)
	e.waitRoute("ingress", "fc00:4::/64", []string{"eth-r1", "eth-r2"}, 10*time.Second)
	if out := e.Must("apply", "--lab", e.Name); !strings.Contains(out, "no changes") {
		t.Errorf("apply after the restart changed something:\n%s", out)
	}
}
