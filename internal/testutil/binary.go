package testutil

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// MainWithBinary is a TestMain body for packages that test the segchain
// binary: it builds cmd/segchain once into a temporary directory (or takes
// $SEGCHAIN_BIN), stores its path in *bin and runs the tests. Unprivileged
// and -short runs build nothing: their tests skip with a reason.
func MainWithBinary(m *testing.M, bin *string) int {
	flag.Parse()
	if os.Geteuid() != 0 || testing.Short() || os.Getenv(Unprivileged) != "" {
		return m.Run()
	}
	if b := os.Getenv("SEGCHAIN_BIN"); b != "" {
		*bin = b
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "segchain-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "segchain")
	out, err := exec.Command("go", "build", "-o", *bin, "github.com/segchain/segchain/cmd/segchain").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build segchain: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// IPNetnsExec runs `ip netns exec ns bin args...` (bin alone when ns is
// "") and returns its combined output: the command gets a private mount
// namespace with a fresh /sys, as iproute2 tutorials run node commands.
func IPNetnsExec(t testing.TB, bin, ns string, args ...string) string {
	t.Helper()
	if bin == "" {
		t.Skip("segchain binary not built")
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, bin}, args...)...)
	if ns == "" {
		cmd = exec.Command(bin, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns exec %s %s %s: %v\n%s", ns, filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Segchain runs the binary bin (MainWithBinary's) with args and returns
// its combined output.
func Segchain(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// MustSegchain is Segchain failing t when the command fails.
func MustSegchain(t testing.TB, bin string, args ...string) string {
	t.Helper()
	out, err := Segchain(bin, args...)
	if err != nil {
		t.Fatalf("segchain %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// LabNetns is the namespace of a lab's node, failing t if it has none.
func LabNetns(t testing.TB, l interface{ Netns(string) (string, error) }, node string) string {
	t.Helper()
	ns, err := l.Netns(node)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// Alive reports whether pid is a running process (not a zombie).
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}
