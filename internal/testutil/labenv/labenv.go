// Package labenv is the one harness of the namespace tests that bring up
// a lab: a domain file's lab under a unique name, its agents local or
// remote (lab up --agents), FRR on its routers (routing: bgp), the
// privileged gate, the segchain binary's verbs run against it and an
// apply session (internal/session) opened on it in-process. At the end
// of the test, even when it fails, it destroys the domain and takes the
// lab down, then fails the test if an agent, FRR daemon or supervisor
// process, a namespace or a bpffs pin the lab had outlives it.
package labenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/session"
	"github.com/segchain/segchain/internal/testutil"
)

// Options say which lab to bring up and how.
type Options struct {
	// File is the domain file the lab is brought up from.
	File string
	// Domain, instead of File: a domain the test built (a generated
	// fabric); in-process only (CLI needs a file).
	Domain *config.Domain
	// Prefix starts the lab's name (a random suffix follows).
	Prefix string
	// CLI: the lab is brought up and taken down with the segchain binary
	// Binary (testutil.MainWithBinary's; the test skips when there is
	// none). Otherwise it is brought up in-process (lab.Up: no agents,
	// no FRR) and taken down likewise.
	CLI    bool
	Binary string
	// Agents: an agent process per node (lab up --agents).
	Agents bool
	// BGP: the domain is routing: bgp; lab up starts an agent per node
	// and FRR on the routers, and both are required.
	BGP bool
	// NoAgents: lab up --agents=false, no agent at all even under BGP
	// (the test serves the nodes' agents itself: segchain agent group).
	NoAgents bool
	// Tools the test needs besides the binary (RequireTool).
	Tools []string
}

// Env is one lab brought up for a test.
type Env struct {
	T *testing.T
	// Name is the lab's name (--lab), Lab its state after lab up.
	Name string
	Lab  *lab.Lab
	// Domain is File's domain.
	Domain *config.Domain
	opts   Options
}

// Gate skips a privileged namespace test: not root, or -short.
func Gate(t testing.TB) {
	t.Helper()
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("privileged namespace test: skipped with -short")
	}
}

// New brings up o.File's lab under a unique name, cleaned up (and
// checked for leftovers) when the test ends.
func New(t *testing.T, o Options) *Env {
	t.Helper()
	Gate(t)
	if o.CLI && o.Binary == "" {
		t.Skip("segchain binary not built")
	}
	for _, tool := range o.Tools {
		testutil.RequireTool(t, tool)
	}
	if o.BGP {
		if err := frr.Installed(); err != nil {
			t.Fatalf("routers need FRR (make deps): %v", err)
		}
	}
	d := o.Domain
	switch {
	case d != nil && o.CLI:
		t.Fatal("labenv: a Domain is brought up in-process only (CLI needs File)")
	case d == nil:
		var err error
		if d, err = config.Load(o.File); err != nil {
			t.Fatal(err)
		}
	}
	e := &Env{T: t, Name: testutil.UniqueName(o.Prefix), Domain: d, opts: o}
	if o.CLI {
		e.upWithBinary()
	} else {
		e.upInProcess()
	}
	return e
}

func (e *Env) upWithBinary() {
	t, o := e.T, e.opts
	var left leftovers
	t.Cleanup(func() {
		left.add(e.Name)
		_, _ = e.Run("destroy", "--lab", e.Name)
		if _, err := lab.Get(e.Name); err == nil { // else the test took it down
			if out, err := e.Run("lab", "down", "--lab", e.Name); err != nil {
				t.Errorf("lab down: %v\n%s", err, out)
			}
		}
		left.check(t)
	})
	args := []string{"lab", "up", "-f", o.File, "--lab", e.Name}
	if o.Agents && !o.BGP {
		args = append(args, "--agents")
	}
	if o.NoAgents {
		args = append(args, "--agents=false")
	}
	e.Must(args...)
	l, err := lab.Get(e.Name)
	if err != nil {
		t.Fatal(err)
	}
	e.Lab = l
	left.add(e.Name)
	if (o.Agents || o.BGP) && !o.NoAgents && len(l.Agents) != len(l.Nodes) {
		t.Fatalf("lab has %d agents for %d nodes", len(l.Agents), len(l.Nodes))
	}
	if o.NoAgents && len(l.Agents) != 0 {
		t.Fatalf("lab up --agents=false: the lab has %d agents", len(l.Agents))
	}
	if o.BGP && len(l.FRR) == 0 {
		t.Fatal("routing: bgp lab runs no FRR")
	}
}

func (e *Env) upInProcess() {
	t := e.T
	topo, err := lab.FromDomain(e.Domain)
	if err != nil {
		t.Fatal(err)
	}
	topo.Name = e.Name
	var left leftovers
	t.Cleanup(func() {
		left.add(e.Name)
		if e.Lab != nil {
			// Nothing destroys an in-process test's domains: forget
			// what the agents remember (lab down removes the pins),
			// also when the test took the lab down itself.
			for _, n := range e.Lab.NodeNames() {
				ns, _ := e.Lab.Netns(n)
				_ = local.NewLocal(n, ns).Forget(context.Background())
			}
		}
		if _, err := lab.Get(e.Name); err == nil {
			if err := lab.Down(e.Name); err != nil {
				t.Errorf("lab down: %v", err)
			}
		}
		left.check(t)
	})
	l, err := lab.Up(topo)
	if err != nil {
		t.Fatal(err)
	}
	e.Lab = l
	left.add(e.Name)
}

// Run runs the binary with args.
func (e *Env) Run(args ...string) (string, error) {
	return testutil.Segchain(e.opts.Binary, args...)
}

// Must runs the binary with args, failing the test if it fails.
func (e *Env) Must(args ...string) string {
	e.T.Helper()
	return testutil.MustSegchain(e.T, e.opts.Binary, args...)
}

// NS is node's namespace.
func (e *Env) NS(node string) string {
	e.T.Helper()
	return testutil.LabNetns(e.T, e.Lab, node)
}

// Session opens an apply session of d (nil: the lab's domain) on the
// lab, in this process: its agents (local, or the lab's remote ones),
// journals, locks and FRR hook are segchain apply's.
func (e *Env) Session(d *config.Domain) *session.Session {
	e.T.Helper()
	if d == nil {
		d = e.Domain
	}
	s, err := session.Open(session.Options{Domain: d, Lab: e.Lab})
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(s.Close)
	return s
}

// leftovers are what a lab had that must not outlive it: processes
// (agents, their supervisor, FRR daemons), namespaces and the bpffs pin
// directories of those namespaces.
type leftovers struct {
	name    string
	pids    map[int]string
	netns   map[string]bool
	pinDirs map[string]bool
}

// add records what lab name has now (nothing if it is down).
func (lo *leftovers) add(name string) {
	if lo.pids == nil {
		lo.name = name
		lo.pids, lo.netns, lo.pinDirs = map[int]string{}, map[string]bool{}, map[string]bool{}
	}
	l, err := lab.Get(name)
	if err != nil {
		return
	}
	for n, a := range l.Agents {
		if a.PID > 0 {
			lo.pids[a.PID] = "agent of " + n
		}
	}
	if l.Supervisor != nil && l.Supervisor.PID > 0 {
		lo.pids[l.Supervisor.PID] = "agent supervisor"
	}
	for n, dir := range l.FRR {
		for d, p := range frr.PIDs(dir) {
			lo.pids[p] = "FRR " + d + " of " + n
		}
	}
	root, rerr := bpfpin.Root()
	for _, ns := range l.Namespaces {
		lo.netns[ns] = true
		if rerr != nil || !nsutil.Exists(ns) {
			continue
		}
		if key, _, err := bpfpin.Namespace(ns); err == nil {
			lo.pinDirs[filepath.Join(root, key)] = true
		}
	}
}

// check fails t for every leftover.
func (lo *leftovers) check(t *testing.T) {
	for _, p := range lo.left() {
		t.Error(p)
	}
}

// left lists what outlived the lab, killing the processes.
func (lo *leftovers) left() []string {
	var out []string
	for p, what := range lo.pids {
		if testutil.Alive(p) && lo.ours(p) {
			out = append(out, fmt.Sprintf("pid %d (%s) outlived lab down", p, what))
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	for ns := range lo.netns {
		if nsutil.Exists(ns) {
			out = append(out, fmt.Sprintf("namespace %s outlived lab down", ns))
		}
	}
	for dir := range lo.pinDirs {
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out = append(out, fmt.Sprintf("bpffs pin %s outlived lab down", path))
			}
			return nil
		})
	}
	sort.Strings(out)
	return out
}

// ours: pid runs a command of this lab (its name is in every agent's,
// supervisor's and FRR daemon's command line), not a process that got a
// recorded pid again.
func (lo *leftovers) ours(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && strings.Contains(string(b), lo.name)
}
