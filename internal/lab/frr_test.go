package lab

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/testutil"
)

// redundantLab brings up examples/redundant.yaml's lab (torn down when the
// test ends) with its routing started: FRR on r1 and r2.
func redundantLab(t *testing.T) (string, *Lab, *config.Domain) {
	t.Helper()
	name := newLabName(t)
	if err := frr.Installed(); err != nil {
		t.Fatal(err) // make deps installs FRR
	}
	d, err := config.Load("../../examples/redundant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := FromDomain(d)
	if err != nil {
		t.Fatal(err)
	}
	topo.Name = name
	l, err := Up(topo)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StartRouting(d); err != nil {
		t.Fatal(err)
	}
	return name, l, d
}

// A routing: bgp lab runs FRR in its routers (zebra and bgpd, its own
// sockets and pid files), vtysh reaches each instance, the two routers'
// sessions with the (agent-less here) GoBGP nodes are configured, and Down
// stops every daemon and removes every file.
func TestFRRStartStop(t *testing.T) {
	name, l, _ := redundantLab(t)
	if len(l.FRR) != 2 {
		t.Fatalf("FRR instances: %v, want r1 and r2", l.FRR)
	}
	var pids []int
	for _, n := range []string{"r1", "r2"} {
		dir, ok := l.FRRDir(n)
		if !ok {
			t.Fatalf("%s: no FRR", n)
		}
		ps := frr.PIDs(dir)
		if ps["zebra"] == 0 || ps["bgpd"] == 0 || ps["bfdd"] != 0 {
			t.Errorf("%s: daemons %v, want zebra and bgpd", n, ps)
		}
		for _, p := range ps {
			pids = append(pids, p)
		}
		ns, _ := l.Netns(n)
		out, err := exec.Command("ip", "netns", "exec", ns, "vtysh", "--vty_socket", dir, "-c", "show running-config").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "router bgp 42000000") {
			t.Errorf("%s: vtysh: %v\n%s", n, err, out)
		}
		ss, err := frr.Sessions(ns, dir, nil)
		if err != nil || len(ss) != 2 {
			t.Errorf("%s: sessions %+v: %v", n, ss, err)
		}
	}
	// The state file records them (lab down after a crash finds them).
	if got, err := Get(name); err != nil || len(got.FRR) != 2 {
		t.Errorf("state: %v %v", got, err)
	}
	if err := Down(name); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for {
			_, err := os.Stat("/proc/" + strconv.Itoa(p))
			if err != nil {
				break
			}
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat"); strings.Contains(string(b), ") Z ") {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("FRR pid %d outlived lab down", p)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, dir := range l.FRR {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s left behind", dir)
		}
	}
}

// SyncRouting keeps a lab's FRR in step with the domain applied: an
// unchanged domain leaves the instances alone, a changed configuration
// (BFD turned on, then off again) restarts them with it, and a switch to
// static stops them at Commit, not before; Undo of a change puts the
// previous configuration back.
func TestFRRSyncRouting(t *testing.T) {
	name, l, d := redundantLab(t)
	r1 := func() (map[string]int, frr.Config) {
		t.Helper()
		dir, ok := l.FRRDir("r1")
		if !ok {
			t.Fatal("r1 runs no FRR")
		}
		c, running := frr.Running(dir)
		if !running {
			t.Fatalf("r1's FRR is not running: %v", frr.PIDs(dir))
		}
		return frr.PIDs(dir), c
	}
	sync := func(d *config.Domain) *RoutingChange {
		t.Helper()
		rc, err := l.SyncRouting(d)
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	before, _ := r1()
	sync(d)
	if now, _ := r1(); now["bgpd"] != before["bgpd"] {
		t.Errorf("an unchanged domain restarted r1's bgpd: %v → %v", before, now)
	}

	bfdOn := *d
	b := *d.Routing.BGP
	b.BFD = true
	bfdOn.Routing.BGP = &b
	rc := sync(&bfdOn)
	now, c := r1()
	if now["bfdd"] == 0 || c.BFDD == "" || now["bgpd"] == before["bgpd"] {
		t.Errorf("BFD on: r1 runs %v with bfdd config %q, want restarted with bfdd", now, c.BFDD)
	}
	if err := rc.Undo(); err != nil {
		t.Fatal(err)
	}
	if now, c := r1(); now["bfdd"] != 0 || c.BFDD != "" {
		t.Errorf("undone: r1 runs %v with bfdd config %q, want the configuration before", now, c.BFDD)
	}
	// The instance without bfdd again is what the domain wants: no restart.
	before, _ = r1()
	sync(d)
	if now, _ := r1(); now["bgpd"] != before["bgpd"] {
		t.Errorf("the restored configuration restarted again: %v → %v", before, now)
	}

	static := *d
	static.Routing.Mode = config.RoutingStatic
	static.Routing.BGP = nil
	rc = sync(&static)
	if _, ok := l.FRRDir("r1"); !ok {
		t.Fatal("a switch to static stopped r1's FRR before the apply")
	}
	if err := rc.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(l.FRR) != 0 {
		t.Errorf("FRR left after the switch to static: %v", l.FRR)
	}
	if got, err := Get(name); err != nil || len(got.FRR) != 0 {
		t.Errorf("state after the switch: %+v %v", got, err)
	}
}

// An apply that retires no FRR instance leaves the lab's state file as it
// was: every apply commits its routing change, and rewriting the file was
// 1 % of a no-op's controller CPU at 250 nodes.
func TestCommitNothingRetiredKeepsStateFile(t *testing.T) {
	testutil.RequireRoot(t)
	l := &Lab{Name: testutil.UniqueName("t-")}
	if err := l.save(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(statePath(l.Name)) })
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Stat(statePath(l.Name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	before := inode()
	if err := (&RoutingChange{l: l, changed: map[string]frr.Config{}}).Commit(); err != nil {
		t.Fatal(err)
	}
	if after := inode(); after != before {
		t.Errorf("a commit that retired nothing rewrote the lab's state file (inode %d → %d)", before, after)
	}
}
