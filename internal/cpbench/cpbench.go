package cpbench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/devprofile"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// Chains is how many chains a generated domain has.
const Chains = lab.FabricChains

// Domain is the YAML of a line of n nodes (n ≥ 5): hosts s and d at the
// ends, an ingress, n-4 NFV nodes with one End service each, an egress.
// With changed, the first chain skips its first service (a one-chain
// change: its headend policy).
func Domain(n int, changed bool) string { return DomainRouting(n, changed, "") }

// DomainRouting is Domain with routing.mode routing ("" or static: the
// default; bgp: eBGP between every pair of neighbours, GoBGP in every
// agent).
func DomainRouting(n int, changed bool, routing string) string {
	y, _ := lab.Fabric{Topology: "line", Nodes: n, Changed: changed, Routing: routing}.YAML()
	return y
}

// Result is one size's figures.
type Result struct {
	Nodes    int    `json:"nodes"`
	Topology string `json:"topology"` // line, clos2, clos3
	Chains   int    `json:"chains"`
	Changes  int    `json:"changes"` // ops of the apply from scratch
	// ChangesPerNodeMax and Mean are the apply from scratch's ops per
	// node (the largest, and over all nodes), from the plan.
	ChangesPerNodeMax  int     `json:"changes_per_node_max"`
	ChangesPerNodeMean float64 `json:"changes_per_node_mean"`
	// Summaries is how many routing.summaries blocks the domain has.
	Summaries   int           `json:"summaries,omitempty"`
	LabUp       time.Duration `json:"lab_up_ns"`
	FromScratch time.Duration `json:"from_scratch_ns"`
	NoOp        time.Duration `json:"noop_ns"`
	OneChain    time.Duration `json:"one_chain_ns"`
	Destroy     time.Duration `json:"destroy_ns"`
	// OneChainNodes is how many nodes the one-chain change changed.
	OneChainNodes int `json:"one_chain_nodes"`
	// NoOpChangedOnly and OneChainChangedOnly are the same with apply
	// --changed-only (the change back to the first domain), contacting
	// only the nodes whose intent changed.
	NoOpChangedOnly     time.Duration `json:"noop_changed_only_ns"`
	OneChainChangedOnly time.Duration `json:"one_chain_changed_only_ns"`
	// NoOps are the no-ops repeated after the first (NoOpsEnv), each
	// with its CPU.
	NoOps []NoOpRun `json:"noops,omitempty"`
	// NoOpNotPlanned: the no-op made no plan (apply's "not planned":
	// docs/scale.md, "Session 16").
	NoOpNotPlanned bool `json:"noop_not_planned,omitempty"`
	// Routing is the domain's routing mode; under bgp, Converged is the
	// time from the start of the apply from scratch until every leaf
	// routes to every other leaf's locator over BGP (bgpconv.go).
	Routing   string        `json:"routing,omitempty"`
	Converged time.Duration `json:"converged_ns,omitempty"`
	// BGPKeepalive and BGPHold are the fabric's BGP timers (seconds),
	// under bgp.
	BGPKeepalive int `json:"bgp_keepalive_s,omitempty"`
	BGPHold      int `json:"bgp_hold_s,omitempty"`
	BGPFigures
	// ControllerPeakKiB is the largest peak resident set (getrusage
	// maxrss) of the three apply commands: the controller's memory.
	ControllerPeakKiB int `json:"controller_peak_kib"`
	// RouteSlabKiB is the growth of the kernel's slab memory (/proc/meminfo
	// Slab:, machine-wide, so other work on the host adds noise) over the
	// apply from scratch: routes, rules, SIDs of every node.
	RouteSlabKiB int `json:"route_slab_kib"`
	// Agent resident memory after the applies (VmRSS), KiB, and its
	// anonymous part (RssAnon: heap and stacks; the rest is the
	// binary's file pages, shared by every agent on the host), and the
	// proportional set size (Pss, /proc/PID/smaps_rollup: shared pages
	// divided among the processes that map them).
	AgentRSSMaxKiB      int `json:"agent_rss_max_kib"`
	AgentRSSMeanKiB     int `json:"agent_rss_mean_kib"`
	AgentRSSAnonMaxKiB  int `json:"agent_rss_anon_max_kib"`
	AgentRSSAnonMeanKiB int `json:"agent_rss_anon_mean_kib"`
	AgentPssMaxKiB      int `json:"agent_pss_max_kib"`
	AgentPssMeanKiB     int `json:"agent_pss_mean_kib"`
	// AgentExe is the program the agents ran (segchain, or the lighter
	// segchain-agent).
	AgentExe string `json:"agent_exe"`
	// PerProcess is how many nodes each agent process served (0: one,
	// under lab up --agents; else the lighter mode, agent group), and
	// AgentProcAnonMaxKiB the largest process's RssAnon.
	PerProcess          int `json:"per_process,omitempty"`
	AgentProcAnonMaxKiB int `json:"agent_proc_anon_max_kib"`
	// The no-op apply's CPU (user + system): the controller's, and the
	// agents' (the growth of their processes' utime + stime over it,
	// idle work included).
	NoOpControllerCPU time.Duration `json:"noop_controller_cpu_ns"`
	NoOpAgentsCPU     time.Duration `json:"noop_agents_cpu_ns"`
	// Error is why the run stopped, when it did (its figures are those
	// measured until then).
	Error string `json:"error,omitempty"`
}

// cpuOf is the CPU time (user + system) the processes pids have used.
func cpuOf(pids map[int]int) time.Duration {
	var t time.Duration
	for pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 12 {
			u, _ := strconv.Atoi(f[11])
			k, _ := strconv.Atoi(f[12])
			t += time.Duration(u+k) * time.Second / 100 // clock ticks (USER_HZ 100)
		}
	}
	return t
}

// Options are what a run measures besides the sizes.
type Options struct {
	// Fabric is the template of the generated domains (Nodes is set per
	// size; Topology "": line).
	Fabric lab.Fabric
	// AgentExe is the agents' program (lab up --agent-exe; "": the
	// segchain binary's own agent).
	AgentExe string
	// PerProcess > 0 is the lighter mode (group.go): the nodes' agents
	// run PerProcess to a process (`segchain agent group`), each with its
	// own listener and mTLS identity, instead of one process per node.
	PerProcess int
}

// check refuses what the lighter mode cannot measure, before any lab:
// BGP between agents (the line), whose speakers, sharing a process, can
// only wait for their neighbours to dial (internal/bgp NewShared).
func (o Options) check() error {
	if o.PerProcess > 0 && o.Fabric.Routing == "bgp" && o.Fabric.Topology == "line" {
		return fmt.Errorf("control-plane benchmark: --agents-per-process under --routing bgp needs a Clos topology: in a line every node's BGP neighbours are other agents' GoBGP speakers, and a speaker sharing its process (segchain agent group) cannot dial (GoBGP dials from threads of its own, outside the node's namespace), only wait; in a Clos fabric the leaves' neighbours are FRR routers, which dial")
	}
	return nil
}

// Run measures each size with the segchain binary exe, the agents being
// agentExe's (lab up --agent-exe; "": exe's own agent); labs are named
// prefix-N and removed afterwards, even on failure. Progress goes to log.
func Run(ctx context.Context, exe, agentExe, prefix string, sizes []int, log io.Writer) ([]Result, error) {
	return RunRouting(ctx, exe, agentExe, prefix, sizes, "", log)
}

// RunRouting is Run of lines with the domains' routing mode ("" = static).
func RunRouting(ctx context.Context, exe, agentExe, prefix string, sizes []int, routing string, log io.Writer) ([]Result, error) {
	return RunOptions(ctx, exe, prefix, sizes, Options{Fabric: lab.Fabric{Topology: "line", Routing: routing}, AgentExe: agentExe}, log)
}

// RunOptions measures each size of the fabric o.Fabric.
func RunOptions(ctx context.Context, exe, prefix string, sizes []int, o Options, log io.Writer) ([]Result, error) {
	if o.Fabric.Topology == "" {
		o.Fabric.Topology = "line"
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	var out []Result
	for _, n := range sizes {
		f := o.Fabric
		f.Nodes = n
		if _, err := f.YAML(); err != nil {
			return out, fmt.Errorf("control-plane benchmark: %w", err)
		}
		r, err := runOne(ctx, exe, o, fmt.Sprintf("%s%d", prefix, n), f, log)
		if err != nil {
			// What was measured before it failed (a lab that came up,
			// BGP that did not converge) goes with the error.
			if r.LabUp > 0 {
				r.Error = err.Error()
				out = append(out, r)
			}
			return out, fmt.Errorf("%d nodes: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// PlanFigures are the plan's figures of a generated domain: ops per node
// of an apply from scratch and how many nodes a one-chain change touches.
func PlanFigures(f lab.Fabric) (perNodeMax int, perNodeMean float64, oneChainNodes, summaries int, err error) {
	build := func(changed bool) (*plan.Plan, error) {
		f.Changed = changed
		y, err := f.YAML()
		if err != nil {
			return nil, err
		}
		d, err := config.Parse([]byte(y), ".")
		if err != nil {
			return nil, err
		}
		return plan.Build(d)
	}
	p, err := build(false)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	q, err := build(true)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	total := 0
	for name, n := range p.Nodes {
		c := len(controller.Compute(&nodestate.Node{Name: name}, n).Ops())
		total += c
		perNodeMax = max(perNodeMax, c)
		if len(controller.Compute(n, q.Nodes[name]).Ops()) > 0 {
			oneChainNodes++
		}
	}
	return perNodeMax, float64(total) / float64(len(p.Nodes)), oneChainNodes, len(p.Summaries), nil
}

func runOne(ctx context.Context, exe string, o Options, labName string, f lab.Fabric, log io.Writer) (Result, error) {
	n := f.Nodes
	r := Result{Nodes: n, Topology: f.Kind(), Chains: Chains, Routing: f.Routing, AgentExe: filepath.Base(exe)}
	if f.Routing == "bgp" {
		r.BGPKeepalive, r.BGPHold = cmp.Or(f.Keepalive, config.DefaultKeepalive), cmp.Or(f.Hold, config.DefaultHold)
	}
	var err error
	if r.ChangesPerNodeMax, r.ChangesPerNodeMean, r.OneChainNodes, r.Summaries, err = PlanFigures(f); err != nil {
		return r, err
	}
	up := []string{"lab", "up", "-f", "", "--lab", labName}
	if o.PerProcess == 0 {
		up = append(up, "--agents")
	} else if f.Routing == "bgp" {
		up = append(up, "--agents=false") // the groups run the speakers
	}
	r.PerProcess = o.PerProcess
	if o.AgentExe != "" && o.PerProcess == 0 {
		up = append(up, "--agent-exe", o.AgentExe)
		r.AgentExe = filepath.Base(o.AgentExe)
	}
	dir, err := os.MkdirTemp("", "segchain-cpbench-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	file, changed := filepath.Join(dir, "domain.yaml"), filepath.Join(dir, "changed.yaml")
	f.Changed = false
	y, _ := f.YAML()
	f.Changed = true
	yc, _ := f.YAML()
	if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
		return r, err
	}
	if err := os.WriteFile(changed, []byte(yc), 0o644); err != nil {
		return r, err
	}
	var lastCPU time.Duration // the last apply's CPU (user + system)
	var run2 func(exe string, args ...string) (time.Duration, string, error)
	run := func(args ...string) (time.Duration, string, error) { return run2(exe, args...) }
	run2 = func(exe string, args ...string) (time.Duration, string, error) {
		start := time.Now()
		cmd := exec.CommandContext(ctx, exe, args...)
		out, err := cmd.CombinedOutput()
		d := time.Since(start)
		if cmd.ProcessState != nil && len(args) > 0 && args[0] == "apply" {
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				r.ControllerPeakKiB = max(r.ControllerPeakKiB, int(ru.Maxrss))
			}
			lastCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		if err != nil {
			return d, string(out), fmt.Errorf("segchain %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return d, string(out), nil
	}
	apply := func(file string) (time.Duration, string, error) {
		return run("apply", "-f", file, "--lab", labName)
	}
	fmt.Fprintf(log, "control-plane %d nodes (%s): %s\n", n, r.Topology, strings.TrimSpace("lab up "+strings.Join(up[6:], " ")))
	var out string
	up[3] = file
	if r.LabUp, _, err = run(up...); err != nil {
		run("lab", "down", "--lab", labName)
		return r, err
	}
	defer run("lab", "down", "--lab", labName)
	var grp *groups
	if o.PerProcess > 0 {
		fmt.Fprintf(log, "control-plane %d nodes: agents, %d to a process\n", n, o.PerProcess)
		agentExe := exe
		if o.AgentExe != "" {
			agentExe = o.AgentExe
		}
		r.AgentExe = filepath.Base(agentExe)
		start := time.Now()
		l, err := lab.Get(labName)
		if err != nil {
			return r, err
		}
		if grp, err = startGroups(ctx, agentExe, labName, l.NodeNames(), o.PerProcess, dir); err != nil {
			return r, err
		}
		defer grp.stop()
		r.LabUp += time.Since(start)
		for _, p := range []struct{ file, yaml string }{{file, y}, {changed, yc}} {
			ya, err := grp.domain(p.yaml)
			if err != nil {
				return r, err
			}
			if err := os.WriteFile(p.file, []byte(ya), 0o644); err != nil {
				return r, err
			}
		}
	}
	agentPIDs := func() map[int]int {
		if grp != nil {
			return grp.nodes
		}
		l, err := lab.Get(labName)
		if err != nil {
			return nil
		}
		m := map[int]int{}
		for _, a := range l.Agents {
			m[a.PID] = 1
		}
		return m
	}
	defer func() {
		if r.Destroy == 0 {
			run("destroy", "-f", file, "--lab", labName)
		}
	}()
	fmt.Fprintf(log, "control-plane %d nodes: apply from scratch\n", n)
	slab0 := routeSlabKiB()
	var bw *bgpWatch
	if f.Routing == "bgp" {
		if bw, err = watchBGP(ctx, labName, y, 10*time.Minute); err != nil {
			return r, err
		}
		defer bw.close()
	}
	applyStart := time.Now()
	frrCPU := frrPIDs(labName)
	cpu0 := map[string]time.Duration{"agents": cpuOf(agentPIDs())}
	for d, pids := range frrCPU {
		cpu0[d] = cpuOf(pids)
	}
	if r.FromScratch, out, err = apply(file); err != nil {
		return r, err
	}
	r.RouteSlabKiB = routeSlabKiB() - slab0
	r.Changes = appliedChanges(out)
	if os.Getenv(devprofile.PhaseEnv) != "" {
		// Where the apply from scratch spent its time (segchain: phase …).
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "segchain: phase ") {
				fmt.Fprintln(log, l)
			}
		}
	}
	if bw != nil {
		fmt.Fprintf(log, "control-plane %d nodes: waiting for BGP to converge\n", n)
		applyCPU := lastCPU
		figs, conv, werr := bw.wait()
		// What the run used until it converged (or gave up), and when
		// the groups' speakers started, even when it did not converge.
		figs.CPU = map[string]time.Duration{"controller": applyCPU, "agents": cpuOf(agentPIDs()) - cpu0["agents"]}
		for d, pids := range frrCPU {
			figs.CPU[d] = cpuOf(pids) - cpu0[d]
		}
		if grp != nil {
			var last time.Time
			if figs.SpeakersStarted, last = speakerStarts(dir); !last.IsZero() {
				figs.LastSpeakerStart = last.Sub(applyStart)
			}
		}
		r.BGPFigures, r.Converged = figs, conv
		fmt.Fprintf(log, "control-plane %d nodes: %d speakers started, the last %v after the apply began; CPU until then %v\n",
			n, figs.SpeakersStarted, figs.LastSpeakerStart.Round(time.Millisecond), figs.CPU)
		if werr != nil {
			return r, werr
		}
	}
	fmt.Fprintf(log, "control-plane %d nodes: no-op apply\n", n)
	pids := agentPIDs()
	if grp != nil {
		phase(pids) // the agents' CPU profiles: the no-op in a file of its own
	}
	agents0 := cpuOf(pids)
	if r.NoOp, out, err = apply(file); err != nil {
		return r, err
	}
	r.NoOpControllerCPU, r.NoOpAgentsCPU = lastCPU, cpuOf(pids)-agents0
	if grp != nil {
		phase(pids)
	}
	if !strings.Contains(out, "no changes") {
		return r, fmt.Errorf("the second apply changed something:\n%s", out)
	}
	r.NoOpNotPlanned = notPlanned(out)
	if r.NoOps, err = repeatNoOps(exe, pids, func(exe string) (time.Duration, string, error) {
		save := r.ControllerPeakKiB
		d, out, err := run2(exe, "apply", "-f", file, "--lab", labName)
		r.ControllerPeakKiB = save
		return d, out, err
	}, func() time.Duration { return lastCPU }); err != nil {
		return r, err
	}
	fmt.Fprintf(log, "control-plane %d nodes: one-chain change\n", n)
	if r.OneChain, _, err = apply(changed); err != nil {
		return r, err
	}
	fmt.Fprintf(log, "control-plane %d nodes: one-chain change back and no-op, --changed-only\n", n)
	if r.OneChainChangedOnly, _, err = run("apply", "-f", file, "--lab", labName, "--changed-only"); err != nil {
		return r, err
	}
	if r.NoOpChangedOnly, out, err = run("apply", "-f", file, "--lab", labName, "--changed-only"); err != nil {
		return r, err
	}
	if !strings.Contains(out, "no changes") {
		return r, fmt.Errorf("the no-op apply --changed-only changed something:\n%s", out)
	}
	// Memory per node: a process's figures divided among the nodes it
	// serves (one each, but in the lighter mode).
	total, anon, pss, served := 0, 0, 0, 0
	for pid, k := range pids {
		kib, akib := rssKiB(pid, "status", "VmRSS:"), rssKiB(pid, "status", "RssAnon:")
		pkib := rssKiB(pid, "smaps_rollup", "Pss:")
		total += kib
		anon += akib
		pss += pkib
		served += k
		r.AgentRSSMaxKiB = max(r.AgentRSSMaxKiB, kib/k)
		r.AgentRSSAnonMaxKiB = max(r.AgentRSSAnonMaxKiB, akib/k)
		r.AgentPssMaxKiB = max(r.AgentPssMaxKiB, pkib/k)
		r.AgentProcAnonMaxKiB = max(r.AgentProcAnonMaxKiB, akib)
	}
	if served > 0 {
		r.AgentRSSMeanKiB = total / served
		r.AgentRSSAnonMeanKiB = anon / served
		r.AgentPssMeanKiB = pss / served
	}
	if f.Routing == "bgp" {
		frrMemory(labName, &r.BGPFigures)
	}
	fmt.Fprintf(log, "control-plane %d nodes: destroy\n", n)
	if r.Destroy, _, err = run("destroy", "-f", file, "--lab", labName); err != nil {
		return r, err
	}
	return r, nil
}

// phase starts a new CPU profile file in each agent group process (this
// run started them, with devprofile.Env in their environment) when
// devprofile.Env is set (SIGUSR1), so that the no-op's profile is apart
// from the apply from scratch's; nothing otherwise.
func phase(pids map[int]int) {
	if os.Getenv(devprofile.Env) == "" {
		return
	}
	for pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGUSR1)
	}
}

// routeSlabKiB is the kernel's slab memory now (/proc/meminfo Slab:):
// this kernel merges the IPv6 route caches (fib6_info, fib6_nodes) into
// the generic kmalloc slabs, so their own size cannot be read.
func routeSlabKiB() int { return rssKiB(0, "meminfo", "Slab:") }

// appliedChanges reads "applied N change(s)" from apply's output.
func appliedChanges(out string) int {
	i := strings.Index(out, "applied ")
	if i < 0 {
		return 0
	}
	f := strings.Fields(out[i+len("applied "):])
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

// rssKiB is a memory figure of /proc/PID/file (status: field "VmRSS:"
// ..., smaps_rollup: "Pss:" ...).
func rssKiB(pid int, file, field string) int {
	path := fmt.Sprintf("/proc/%d/%s", pid, file)
	if pid == 0 {
		path = "/proc/" + file
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}
