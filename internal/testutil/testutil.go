package testutil

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/nsutil"
)

// Unprivileged, when set in the environment, makes RequireRoot skip as if
// the tests did not run as root: make test's -race step runs the unit
// tests only (the namespace tests run without -race, in the main step).
const Unprivileged = "SEGCHAIN_TEST_UNPRIVILEGED"

// RequireRoot skips the test, saying why, unless it runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Getenv(Unprivileged) != "" {
		t.Skip("privileged test: skipped (" + Unprivileged + " set)")
	}
	if os.Geteuid() != 0 {
		t.Skip("privileged test: needs root (run make test as root)")
	}
}

// RequirePrivileged gates a privileged namespace test: it skips, saying
// why, unless the test runs as root (RequireRoot) and without -short.
func RequirePrivileged(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	if testing.Short() {
		t.Skip("privileged namespace test: skipped with -short")
	}
}

// RequireTool fails the test unless the external program is installed: a
// missing tool is a broken environment (make deps installs them all), not
// a reason for a green skip.
func RequireTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("needs %s (installed by scripts/deps.sh: make deps)", name)
	}
}

// RequireScapy fails the test unless python3 can import scapy (as
// RequireTool).
func RequireScapy(t testing.TB) {
	t.Helper()
	if Python() == "" {
		t.Fatal("needs python3 scapy (installed by scripts/deps.sh: make deps)")
	}
}

var python struct {
	once sync.Once
	path string
}

// Python is the python3 interpreter on the PATH that imports scapy, by its
// own path (sys.executable: a pyenv shim on the PATH costs a shell and
// pyenv's scripts per run), or "" when there is none. Asked once per test
// binary: importing scapy takes seconds of CPU, and every RunScapy needs
// the answer.
func Python() string {
	python.once.Do(func() {
		out, err := exec.Command("python3", "-c", ScapyImport+"import sys\nprint(sys.executable)").Output()
		if err == nil {
			python.path = strings.TrimSpace(string(out))
			if python.path == "" {
				python.path = "python3"
			}
		}
	})
	return python.path
}

// UniqueName returns prefix plus a random suffix, short enough to be an
// interface name when prefix is at most 6 characters.
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// NewNetns creates a uniquely named namespace with loopback up, removed at
// the end of the test even when it fails.
func NewNetns(t testing.TB, prefix string) string {
	t.Helper()
	RequireRoot(t)
	name := UniqueName("sct-" + prefix + "-")
	if err := nsutil.Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nsutil.Delete(name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	Exec(t, name, "ip", "link", "set", "lo", "up")
	return name
}

// Exec runs a command inside a namespace and fails the test on error,
// returning its combined output.
func Exec(t testing.TB, ns string, args ...string) string {
	t.Helper()
	out, err := ExecErr(ns, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// ExecErr runs a command inside a namespace (ip netns exec) and returns its
// combined output and error.
func ExecErr(ns string, args ...string) (string, error) {
	full := args
	if ns != "" {
		full = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	out, err := exec.Command(full[0], full[1:]...).CombinedOutput()
	return string(out), err
}

// KillAfter starts c, SIGKILLs it after delay and reports whether the
// kill came before c ended: the kill -9 tests count the runs that were
// really interrupted.
func KillAfter(t testing.TB, c *exec.Cmd, delay time.Duration) bool {
	t.Helper()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(delay)
	_ = c.Process.Signal(syscall.SIGKILL)
	_ = c.Wait()
	ws, ok := c.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}
