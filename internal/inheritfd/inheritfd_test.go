package inheritfd

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The test binary re-runs itself as the "command": it inherits a pipe as
// descriptor 3 without close-on-exec (as flock(1) passes its lock), calls
// CloseOnExec or not, and starts a shell that reports whether it got
// descriptor 3.
const childEnv = "SEGCHAIN_INHERITFD_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		if mode == "fix" {
			if err := CloseOnExec(); err != nil {
				os.Stdout.WriteString("error: " + err.Error())
				os.Exit(1)
			}
		}
		out, err := exec.Command("/bin/sh", "-c", "if [ -e /proc/self/fd/3 ]; then echo open; else echo closed; fi").Output()
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error())
			os.Exit(1)
		}
		os.Stdout.Write(out)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func grandchildSees(t *testing.T, mode string) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.ExtraFiles = []*os.File{w} // descriptor 3 in the child, without close-on-exec
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child (%s): %v: %s", mode, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestInheritedDescriptorStaysWithTheCommand(t *testing.T) {
	if got := grandchildSees(t, "plain"); got != "open" {
		t.Fatalf("control: a grandchild of a process that did not call CloseOnExec saw descriptor 3 %q, want open (the test no longer shows the leak)", got)
	}
	if got := grandchildSees(t, "fix"); got != "closed" {
		t.Fatalf("after CloseOnExec a started process still got the inherited descriptor 3: %q", got)
	}
}
