package bpfpin

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// TestRootHelper is not a test: TestRootUnderIPNetnsExec runs the test
// binary with it under `ip netns exec` to print what Root resolves there.
func TestRootHelper(t *testing.T) {
	if os.Getenv("BPFPIN_ROOT_HELPER") != "1" {
		t.Skip("helper process of TestRootUnderIPNetnsExec")
	}
	root, err := Root()
	fmt.Printf("root=%s err=%v own-bpffs=%v\n", root, err, isBPFFS(fsPath))
}

// TestRootUnderIPNetnsExec: `ip netns exec` gives the command a fresh /sys
// in a private mount namespace; Root must still resolve to the host's
// bpffs (so pins outlive the command) and must not mount a bpffs there.
func TestRootUnderIPNetnsExec(t *testing.T) {
	testutil.RequireRoot(t)
	if !isBPFFS(fsPath) {
		t.Skipf("%s is not a bpffs on this host", fsPath)
	}
	ns := testutil.NewNetns(t, "h11root")
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^TestRootHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BPFPIN_ROOT_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var root, rerr, own string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "root=") {
			f := strings.SplitN(l, " ", 3)
			root, rerr, own = strings.TrimPrefix(f[0], "root="), strings.TrimPrefix(f[1], "err="), f[2]
		}
	}
	if rerr != "<nil>" || root == "" {
		t.Fatalf("Root under ip netns exec: %q, %s\n%s", root, rerr, out)
	}
	if own != "own-bpffs=false" {
		t.Errorf("the helper's own /sys/fs/bpf became a bpffs (%s): a throwaway mount", own)
	}
	if !strings.HasPrefix(root, "/proc/") || !strings.HasSuffix(root, "/root/sys/fs/bpf/segchain") {
		t.Errorf("Root under ip netns exec = %s, want the host's bpffs through /proc/<pid>/root", root)
	}
	host, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if host != "/sys/fs/bpf/segchain" {
		t.Errorf("Root in the host's mount namespace = %s, want /sys/fs/bpf/segchain", host)
	}
}
