package oam

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// lockHolder starts a process (in ns, when not "") that takes the flock
// of p as a sampler does and sleeps; it returns once the lock is held.
// It is killed when the test ends.
func lockHolder(t *testing.T, ns, p string) *exec.Cmd {
	t.Helper()
	script := `import fcntl, sys, time
f = open(sys.argv[1], "a")
fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
time.sleep(600)`
	args := []string{"python3", "-c", script, p}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	c := exec.Command(args[0], args[1:]...)
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "held\n" {
		t.Fatalf("lock holder: %q %v", l, err)
	}
	return c
}

// kill SIGKILLs c and waits for it: its lock is released, its file stays.
func kill(t *testing.T, c *exec.Cmd) {
	t.Helper()
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
}

// newNS creates the namespace name, deleted when the test ends (unless
// the test deleted it).
func newNS(t *testing.T, prefix string) string {
	t.Helper()
	name := testutil.UniqueName(prefix)
	if err := nsutil.Create(name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsutil.Delete(name) })
	return name
}

// A sampling lock file is removed when nobody holds it and nothing can
// enter its namespace any more — never while a process holds it, nor
// while its namespace can be entered by a process in it, a bind mount
// (/run/netns or anywhere else) or an open descriptor.
func TestSweepSampleLocks(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "python3")
	exists := func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	}
	sweep := func(step string, p string, wantRemoved bool) {
		t.Helper()
		gone, err := SweepSampleLocks()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if slices.Contains(gone, p) != wantRemoved || exists(p) == wantRemoved {
			t.Fatalf("%s: removed %v (file there: %v), want %s removed: %v", step, gone, exists(p), p, wantRemoved)
		}
	}
	if err := os.MkdirAll(sampleLockDir, 0o755); err != nil {
		t.Fatal(err)
	}

	// a: a sampler in a, killed; a then deleted but bind-mounted elsewhere.
	a := newNS(t, "s16b-lka-")
	pa, err := sampleLockPath(a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(pa) })
	ha := lockHolder(t, a, pa)
	sweep("a sampler lives in a", pa, false)
	kill(t, ha)
	sweep("the sampler killed, a exists", pa, false)
	bind := filepath.Join(t.TempDir(), "netns-a")
	if err := os.WriteFile(bind, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(nsutil.Path(a), bind, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = unix.Unmount(bind, unix.MNT_DETACH)
		}
	})
	if err := nsutil.Delete(a); err != nil {
		t.Fatal(err)
	}
	sweep("a deleted from /run/netns, bind-mounted elsewhere", pa, false)
	if err := unix.Unmount(bind, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false
	sweep("a gone", pa, true)

	// b: a sampler outside b holds b's lock; a process holds b open.
	b := newNS(t, "s16b-lkb-")
	pb, err := sampleLockPath(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(pb) })
	hb := lockHolder(t, "", pb)
	f, err := os.Open(nsutil.Path(b))
	if err != nil {
		t.Fatal(err)
	}
	opener := exec.Command("sleep", "600")
	opener.ExtraFiles = []*os.File{f}
	if err := opener.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() { _ = opener.Process.Kill(); _ = opener.Wait() })
	if err := nsutil.Delete(b); err != nil {
		t.Fatal(err)
	}
	kill(t, hb)
	sweep("b deleted, held open by a process", pb, false)
	hb = lockHolder(t, "", pb)
	kill(t, opener)
	sweep("b gone, its lock held", pb, false)
	kill(t, hb)
	sweep("b gone, its lock free", pb, true)
}

// The first sampler of a process sweeps too: lockSampling of a live
// namespace removes the file of one that is gone.
func TestLockSamplingSweeps(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "python3")
	gone := newNS(t, "s16b-lkg-")
	p, err := sampleLockPath(gone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(p) })
	if err := os.MkdirAll(sampleLockDir, 0o755); err != nil {
		t.Fatal(err)
	}
	kill(t, lockHolder(t, "", p))
	if err := nsutil.Delete(gone); err != nil {
		t.Fatal(err)
	}
	live := newNS(t, "s16b-lkl-")
	sweepOnce = sync.Once{} // this test process's first sampler
	l, err := lockSampling(live)
	if err != nil {
		t.Fatal(err)
	}
	l.unlock()
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after the first lockSampling: %v, want removed", p, err)
	}
}
