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
	"time"

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

// watchRoutes in a namespace given by name, by path (segchain --netns
// PATH; an agent's /proc/self/ns/net) and as the caller's own ("": an
// agent in its namespace, `ip netns exec`): a route of anyone but
// boundary marking is a trigger; a route or rule of protocol 205, and a
// route in another namespace, are not.
func TestWatchRoutes(t *testing.T) {
	testutil.RequireRoot(t)
	ns := newNS(t, "s16b-wr-")
	other := newNS(t, "s16b-wo-")
	for _, n := range []string{ns, other} {
		testutil.Exec(t, n, "ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1")
		testutil.Exec(t, n, "ip", "link", "set", "d0", "up")
	}
	for _, tc := range []struct{ name, arg string }{
		{"name", ns}, {"path", nsutil.Path(ns)}, {"own", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kicks := make(chan bool, 100)
			var w *rtWatch
			open := func() error {
				var err error
				w, err = watchRoutes(tc.arg, func(o bool) { kicks <- o })
				return err
			}
			var err error
			if tc.arg == "" {
				err = nsutil.Do(ns, open) // the caller's own namespace is ns
			} else {
				err = open()
			}
			if err != nil {
				t.Fatal(err)
			}
			defer w.close()
			// The kernel delivers in order: a trigger by the marker's
			// route or rule or by the other namespace's route would be a
			// kick before the one of apply's route, left over after it.
			testutil.Exec(t, ns, "ip", "-6", "route", "add", "fd00:205::/64", "dev", "d0", "table", "4242", "proto", "205")
			testutil.Exec(t, ns, "ip", "-6", "rule", "add", "pref", "4242", "fwmark", "7", "table", "4242", "proto", "205")
			testutil.Exec(t, other, "ip", "-6", "route", "add", "fd00:1::/64", "dev", "d0", "table", "4242", "proto", "202")
			testutil.Exec(t, ns, "ip", "-6", "route", "add", "fd00:202::/64", "dev", "d0", "table", "4242", "proto", "202")
			select {
			case o := <-kicks:
				if o {
					t.Error("an overrun, want a trigger")
				}
			case <-time.After(10 * time.Second): // a bound on the wait
				t.Fatal("apply's route added: no trigger")
			}
			if len(kicks) != 0 {
				t.Errorf("%d triggers more than apply's route", len(kicks))
			}
			w.close() // the deferred close again: a no-op
			testutil.Exec(t, ns, "ip", "-6", "rule", "del", "pref", "4242")
			testutil.Exec(t, ns, "ip", "-6", "route", "flush", "table", "4242")
			testutil.Exec(t, other, "ip", "-6", "route", "flush", "table", "4242")
		})
	}
}
