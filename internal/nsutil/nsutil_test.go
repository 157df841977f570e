package nsutil

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCreateLeavesNoThreadInside: after Create, no thread of this process
// is in the new namespace (one left there — the main thread, which the Go
// runtime parks rather than terminates — would keep the namespace and its
// interfaces alive after Delete). 200 creations give the main thread its
// chances to run the creating goroutine.
func TestCreateLeavesNoThreadInside(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("privileged test: needs root")
	}
	b := make([]byte, 4)
	rand.Read(b)
	for i := range 200 {
		name := "sct-nsu-" + hex.EncodeToString(b) + "-" + strconv.Itoa(i)
		if err := Create(name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = Delete(name) })
		target, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		var mine string
		if err := Do(name, func() error {
			var err error
			mine, err = os.Readlink("/proc/thread-self/ns/net")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
		for _, tk := range tasks {
			if l, _ := os.Readlink(tk); l == mine && l != target {
				t.Fatalf("after Create(%s): thread %s is still in it (%s)", name, tk, l)
			}
		}
	}
}

// TestIPNetnsAddKeepsOursDeletable: a namespace made by Create can still be
// deleted after `ip netns add` has run, also when RunDir was not a mount
// point before Create (a fresh boot). Before Create shared RunDir the way
// iproute2 does, iproute2 bind-mounted RunDir over itself on its first use
// and Delete failed with EBUSY. The scenario runs in a child process in a
// private mount namespace, so unmounting RunDir there disturbs nobody.
func TestIPNetnsAddKeepsOursDeletable(t *testing.T) {
	if os.Getenv("NSUTIL_PRIVATE_MOUNTS") == "1" {
		ipNetnsAddScenario(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("privileged test: needs root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("needs unshare(1) (util-linux)") // a missing tool fails, as testutil.RequireTool
	}
	b := make([]byte, 4)
	rand.Read(b)
	ours, theirs := "sct-nsu-ours-"+hex.EncodeToString(b), "sct-nsu-ip-"+hex.EncodeToString(b)
	t.Cleanup(func() {
		for _, n := range []string{ours, theirs} {
			_ = exec.Command("ip", "netns", "del", n).Run()
			_ = os.Remove(Path(n))
		}
	})
	cmd := exec.Command("unshare", "-m", "--propagation", "private", os.Args[0],
		"-test.run=^TestIPNetnsAddKeepsOursDeletable$", "-test.v")
	cmd.Env = append(os.Environ(), "NSUTIL_PRIVATE_MOUNTS=1", "NSUTIL_OURS="+ours, "NSUTIL_THEIRS="+theirs)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func ipNetnsAddScenario(t *testing.T) {
	ours, theirs := os.Getenv("NSUTIL_OURS"), os.Getenv("NSUTIL_THEIRS")
	// A fresh boot: RunDir is a plain directory.
	for unix.Unmount(RunDir, unix.MNT_DETACH) == nil {
	}
	if err := Create(ours); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "add", theirs).CombinedOutput(); err != nil {
		_ = Delete(ours)
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	defer exec.Command("ip", "netns", "del", theirs).Run()
	if err := Delete(ours); err != nil {
		t.Fatalf("Delete after ip netns add: %v", err)
	}
	if Exists(ours) {
		t.Fatalf("%s still exists", ours)
	}
}

func TestDeleteRefusesNonNames(t *testing.T) {
	for _, n := range []string{"", ".", "..", "a/b"} {
		if err := Delete(n); err == nil {
			t.Errorf("Delete(%q) = nil, want an error", n)
		}
	}
}

// TestPin: fn runs on a thread inside the namespace, a socket it opens is
// the namespace's (a listener there is not one of the caller's), the
// caller's thread stays where it was, and once fn returns no thread of
// this process is left in the namespace.
func TestPin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("privileged test: needs root")
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "s17b-pin-" + hex.EncodeToString(b)
	if err := Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Delete(name) })
	var want string
	if err := Do(name, func() (err error) { want, err = os.Readlink("/proc/thread-self/ns/net"); return err }); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Readlink("/proc/self/ns/net")
	got := make(chan string, 1)
	release := make(chan struct{})
	if err := Pin(name, func() {
		l, _ := os.Readlink("/proc/thread-self/ns/net")
		got <- l
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l != want {
		t.Fatalf("fn ran in %s, want the namespace's %s", l, want)
	}
	if l, _ := os.Readlink("/proc/thread-self/ns/net"); l == want {
		t.Fatal("Pin moved the caller's thread into the namespace")
	}
	close(release)
	if err := Pin("s17b-no-such-ns-"+hex.EncodeToString(b), func() { t.Error("fn ran without its namespace") }); err == nil {
		t.Fatal("Pin into a namespace that does not exist: no error")
	}
	// The pinned goroutine has returned: its thread goes with it.
	for i := 0; ; i++ {
		left := ""
		tasks, _ := filepath.Glob("/proc/self/task/*/ns/net")
		for _, tk := range tasks {
			if l, _ := os.Readlink(tk); l == want && l != host {
				left = tk
			}
		}
		if left == "" {
			break
		}
		if i == 100 {
			t.Fatalf("thread %s still in %s after fn returned", left, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
