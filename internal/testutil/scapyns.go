package testutil

import (
	"bytes"
	"os/exec"
	"testing"
)

// RunScapyIn is RunScapy inside network namespace ns (ip netns exec), for
// sending crafted packets from a node.
func RunScapyIn(t testing.TB, ns, script string) []byte {
	t.Helper()
	RequireScapy(t)
	cmd := exec.Command("ip", "netns", "exec", ns, Python(), "-")
	cmd.Stdin = bytes.NewBufferString(ScapyPrelude + script)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("scapy script in %s: %v\n%s", ns, err, errb.String())
	}
	return out.Bytes()
}
