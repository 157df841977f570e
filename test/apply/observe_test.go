package apply

import (
	"os"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// TestBrokenTCXLinkIsDrift breaks the eBPF attachment of the proxy (nfv1)
// and of the firewall (nfv2) behind segchain's back, once by deleting
// their TCX link pins (which detaches the programs) and once by detaching
// the links while the pins stay (bpftool link detach): plan must show the
// repair, status --check must exit non-zero, apply must repair it and
// traffic must pass again. Before observation checked links, plan said
// "no changes" and the chains lost every packet.
func TestBrokenTCXLinkIsDrift(t *testing.T) {
	e := newEnv(t)
	const n = 20
	e.Must("apply", "-f", domainFile, "--lab", e.Name)
	if udp, tcp := e.traffic(n); udp != n || tcp != n {
		t.Fatalf("after apply: %d/%d UDP datagrams, %d/%d TCP exchanges passed, want all", udp, n, tcp, n)
	}
	pins := []string{e.linkPin("nfv1", "proxy", "eth-r1"), e.linkPin("nfv2", "fw", "eth-r2")}
	breaks := []struct {
		name   string
		break_ func(t *testing.T, pin string)
	}{
		{"link pin deleted", func(t *testing.T, pin string) {
			if err := os.Remove(pin); err != nil {
				t.Fatal(err)
			}
		}},
		{"link detached", func(t *testing.T, pin string) {
			testutil.RequireTool(t, "bpftool")
			testutil.Exec(t, "", "bpftool", "link", "detach", "pinned", pin)
		}},
	}
	for _, b := range breaks {
		t.Run(b.name, func(t *testing.T) {
			for _, p := range pins {
				b.break_(t, p)
			}
			udp, tcp := e.traffic(n)
			t.Logf("broken: %d/%d UDP, %d/%d TCP passed", udp, n, tcp, n)
			if udp == n && tcp == n {
				t.Errorf("traffic still passes with the programs detached: the test breaks nothing")
			}
			out, err := e.domain("plan")
			if err != nil {
				t.Fatalf("plan: %v\n%s", err, out)
			}
			if strings.Contains(out, "no changes: every node") || !strings.Contains(out, "repair") ||
				!strings.Contains(out, "node nfv1:") || !strings.Contains(out, "node nfv2:") {
				t.Errorf("plan does not show the broken links as drift on nfv1 and nfv2:\n%s", out)
			}
			if out, err := e.domain("status", "--check"); err == nil {
				t.Errorf("status --check exited 0 with broken links:\n%s", out)
			} else if !strings.Contains(out, "nfv1") || !strings.Contains(out, "nfv2") {
				t.Errorf("status --check does not name nfv1 and nfv2:\n%s", out)
			}
			e.Must("apply", "-f", domainFile, "--lab", e.Name)
			if out, err := e.domain("plan"); err != nil || !strings.Contains(out, "no changes: every node") {
				t.Errorf("plan after the repairing apply: %v\n%s", err, out)
			}
			if out, err := e.domain("status", "--check"); err != nil {
				t.Errorf("status --check after the repairing apply: %v\n%s", err, out)
			}
			if udp, tcp := e.traffic(n); udp != n || tcp != n {
				t.Errorf("after the repairing apply: %d/%d UDP datagrams, %d/%d TCP exchanges passed, want all", udp, n, tcp, n)
			}
		})
	}
}
