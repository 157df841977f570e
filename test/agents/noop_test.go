package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
)

// A no-op needs no plan (docs/scale.md, "Session 16"), end to end: the
// segchain CLI, an agent process per node over mutual TLS. After an
// apply, a no-op apply says it made no plan (text and -o json); after
// the HMAC secret file changes, apply plans and installs the new secret;
// after a route of segchain's is deleted by hand, apply plans and puts it
// back; each time the next no-op skips the plan again.
func TestPrivilegedAgentsNoOpWithoutPlan(t *testing.T) {
	file, _ := hmacDomain(t)
	e := newEnvFile(t, true, "s16a-", file)
	const skipped = "not planned"
	if out := e.Must("apply", "--lab", e.Name); !strings.Contains(out, "applied") || strings.Contains(out, skipped) {
		t.Fatalf("apply from scratch: %s", out)
	}
	noOp := func(what string) {
		t.Helper()
		if out := e.Must("apply", "--lab", e.Name); !strings.Contains(out, "the domain is already applied") || !strings.Contains(out, skipped) {
			t.Fatalf("%s: the no-op planned (or changed something):\n%s", what, out)
		}
	}
	noOp("no-op")
	var res struct {
		NotPlanned bool `json:"not_planned"`
	}
	if err := json.Unmarshal([]byte(e.Must("apply", "--lab", e.Name, "-o", "json")), &res); err != nil || !res.NotPlanned {
		t.Fatalf("apply -o json: not_planned %v (%v), want true", res.NotPlanned, err)
	}

	// The secret file changes: the plan's input, not the domain file's.
	secret := []byte("a-second-secret-for-this-test-of-48-bytes-length")
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "secrets", "k1.key"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := e.Must("apply", "--lab", e.Name); !strings.Contains(out, "applied") || strings.Contains(out, "already applied") {
		t.Fatalf("apply after the secret file changed:\n%s", out)
	}
	if got, err := exec.Command("ip", "-n", e.NS("nfv1"), "sr", "hmac", "show").CombinedOutput(); err != nil || !bytes.Contains(got, secret) {
		t.Fatalf("nfv1: the new secret not installed (%v):\n%s", err, got)
	}
	noOp("no-op after the new secret")

	// Drift by hand: one of segchain's routes on nfv1 deleted.
	ns := e.NS("nfv1")
	out, err := exec.Command("ip", "-n", ns, "-6", "route", "show", "proto", fmt.Sprint(nodestate.Proto)).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v: %s", err, out)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	dst := strings.Fields(first)
	if len(dst) == 0 {
		t.Fatal("nfv1 has no route of segchain's")
	}
	if out, err := exec.Command("ip", "-n", ns, "-6", "route", "del", dst[0], "proto", fmt.Sprint(nodestate.Proto)).CombinedOutput(); err != nil {
		t.Fatalf("ip route del %s: %v: %s", dst[0], err, out)
	}
	if out := e.Must("apply", "--lab", e.Name); !strings.Contains(out, "applied 1 change(s)") || strings.Contains(out, skipped) {
		t.Fatalf("apply after nfv1 lost %s:\n%s", dst[0], out)
	}
	if out, _ := exec.Command("ip", "-n", ns, "-6", "route", "show", dst[0], "proto", fmt.Sprint(nodestate.Proto)).CombinedOutput(); !strings.Contains(string(out), dst[0]) {
		t.Fatalf("nfv1's route %s not restored", dst[0])
	}
	noOp("no-op after the repair")
}
