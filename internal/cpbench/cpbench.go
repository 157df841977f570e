package cpbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/segchain/segchain/internal/lab"
)

// Chains is how many chains a generated domain has; each visits every
// Chains-th NFV node, so that every chain spans the whole line.
const Chains = 4

// Domain is the YAML of a domain of n nodes (n ≥ 5): hosts s and d at the
// ends, an ingress, n-4 NFV nodes with one End service each, an egress, in
// a line. With changed, the first chain skips its first service (a
// one-chain change: its headend policy).
func Domain(n int, changed bool) string { return DomainRouting(n, changed, "") }

// DomainRouting is Domain with routing.mode routing ("" or static: the
// default; bgp: eBGP between every pair of neighbours, GoBGP in every
// agent).
func DomainRouting(n int, changed bool, routing string) string {
	var b strings.Builder
	nfv := n - 4
	fmt.Fprintf(&b, "name: cp%d\nnodes:\n", n)
	b.WriteString("  s: {role: host, id: 0xfffe}\n  d: {role: host, id: 0xfffd}\n")
	b.WriteString("  ingress: {role: ingress, id: 1, locator: \"fc00:1::/64\"}\n")
	names := []string{"s", "ingress"}
	for i := 1; i <= nfv; i++ {
		id := i + 1
		fmt.Fprintf(&b, "  n%d: {role: nfv, id: %d, locator: \"fc00:%x::/64\"}\n", i, id, id)
		names = append(names, fmt.Sprintf("n%d", i))
	}
	eg := nfv + 2
	fmt.Fprintf(&b, "  egress: {role: egress, id: %d, locator: \"fc00:%x::/64\"}\n", eg, eg)
	names = append(names, "egress", "d")
	b.WriteString("links:\n")
	for i := 0; i+1 < len(names); i++ {
		a, z := names[i], names[i+1]
		pfx := fmt.Sprintf("fc01:%x::/64", i+1)
		if z == "d" {
			pfx = "fc02:d::/64"
		}
		fmt.Fprintf(&b, "  - {endpoints: [\"%s:e-%s\", \"%s:e-%s\"], ipv6: %q}\n", a, z, z, a, pfx)
	}
	b.WriteString("services:\n")
	for i := 1; i <= nfv; i++ {
		fmt.Fprintf(&b, "  s%d: {node: n%d, behavior: End}\n", i, i)
	}
	b.WriteString("chains:\n")
	for c := 0; c < Chains; c++ {
		var svcs []string
		for i := 1; i <= nfv; i++ {
			if i%Chains == c {
				svcs = append(svcs, fmt.Sprintf("s%d", i))
			}
		}
		if changed && c == 0 && len(svcs) > 1 {
			svcs = svcs[1:]
		}
		fmt.Fprintf(&b, "  c%d:\n    ingress: ingress\n    mode: encap\n    match: {dst: \"fc02:d::/64\", proto: udp, dport: \"%d\"}\n", c, 10000+c)
		fmt.Fprintf(&b, "    services: [%s]\n    egress: {node: egress, behavior: End.DX6, nh6: \"fc02:d::fffd\"}\n", strings.Join(svcs, ", "))
	}
	if routing != "" {
		fmt.Fprintf(&b, "routing:\n  mode: %s\n", routing)
	}
	return b.String()
}

// Result is one size's figures.
type Result struct {
	Nodes       int           `json:"nodes"`
	Chains      int           `json:"chains"`
	Changes     int           `json:"changes"` // ops of the apply from scratch
	LabUp       time.Duration `json:"lab_up_ns"`
	FromScratch time.Duration `json:"from_scratch_ns"`
	NoOp        time.Duration `json:"noop_ns"`
	OneChain    time.Duration `json:"one_chain_ns"`
	Destroy     time.Duration `json:"destroy_ns"`
	// Routing is the domain's routing mode; under bgp, Converged is the
	// time from the start of the apply from scratch until ingress and
	// egress, the two ends of the line, route to each other's locator
	// (BGP routes, protocol 199).
	Routing   string        `json:"routing,omitempty"`
	Converged time.Duration `json:"converged_ns,omitempty"`
	// Agent resident memory after the applies (VmRSS), KiB, and its
	// anonymous part (RssAnon: heap and stacks; the rest is the binary's
	// file pages, shared by every agent on the host), and the
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
}

// Run measures each size with the segchain binary exe, the agents being
// agentExe's (lab up --agent-exe; "": exe's own agent); labs are named
// prefix-N and removed afterwards, even on failure. Progress goes to log.
func Run(ctx context.Context, exe, agentExe, prefix string, sizes []int, log io.Writer) ([]Result, error) {
	return RunRouting(ctx, exe, agentExe, prefix, sizes, "", log)
}

// RunRouting is Run with the domains' routing mode ("" = static).
func RunRouting(ctx context.Context, exe, agentExe, prefix string, sizes []int, routing string, log io.Writer) ([]Result, error) {
	var out []Result
	for _, n := range sizes {
		if n < 5 {
			return out, fmt.Errorf("control-plane benchmark: %d nodes: want at least 5", n)
		}
		r, err := runOne(ctx, exe, agentExe, fmt.Sprintf("%s%d", prefix, n), n, routing, log)
		if err != nil {
			return out, fmt.Errorf("%d nodes: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func runOne(ctx context.Context, exe, agentExe, labName string, n int, routing string, log io.Writer) (Result, error) {
	r := Result{Nodes: n, Chains: Chains, Routing: routing, AgentExe: filepath.Base(exe)}
	up := []string{"lab", "up", "-f", "", "--lab", labName, "--agents"}
	if agentExe != "" {
		up = append(up, "--agent-exe", agentExe)
		r.AgentExe = filepath.Base(agentExe)
	}
	dir, err := os.MkdirTemp("", "segchain-cpbench-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	file, changed := filepath.Join(dir, "domain.yaml"), filepath.Join(dir, "changed.yaml")
	if err := os.WriteFile(file, []byte(DomainRouting(n, false, routing)), 0o644); err != nil {
		return r, err
	}
	if err := os.WriteFile(changed, []byte(DomainRouting(n, true, routing)), 0o644); err != nil {
		return r, err
	}
	run := func(args ...string) (time.Duration, string, error) {
		start := time.Now()
		out, err := exec.CommandContext(ctx, exe, args...).CombinedOutput()
		d := time.Since(start)
		if err != nil {
			return d, string(out), fmt.Errorf("segchain %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return d, string(out), nil
	}
	fmt.Fprintf(log, "control-plane %d nodes: lab up --agents\n", n)
	var out string
	up[3] = file
	if r.LabUp, _, err = run(up...); err != nil {
		run("lab", "down", "--lab", labName)
		return r, err
	}
	defer run("lab", "down", "--lab", labName)
	defer run("destroy", "-f", file, "--lab", labName)
	fmt.Fprintf(log, "control-plane %d nodes: apply from scratch\n", n)
	start := time.Now()
	if r.FromScratch, out, err = run("apply", "-f", file, "--lab", labName); err != nil {
		return r, err
	}
	r.Changes = appliedChanges(out)
	if routing == "bgp" {
		fmt.Fprintf(log, "control-plane %d nodes: waiting for BGP to converge\n", n)
		if err := converged(ctx, labName, n, 5*time.Minute); err != nil {
			return r, err
		}
		r.Converged = time.Since(start)
	}
	if r.NoOp, out, err = run("apply", "-f", file, "--lab", labName); err != nil {
		return r, err
	}
	if !strings.Contains(out, "no changes") {
		return r, fmt.Errorf("the second apply changed something:\n%s", out)
	}
	if r.OneChain, _, err = run("apply", "-f", changed, "--lab", labName); err != nil {
		return r, err
	}
	l, err := lab.Get(labName)
	if err != nil {
		return r, err
	}
	total, anon, pss := 0, 0, 0
	for _, a := range l.Agents {
		kib, akib := rssKiB(a.PID, "status", "VmRSS:"), rssKiB(a.PID, "status", "RssAnon:")
		pkib := rssKiB(a.PID, "smaps_rollup", "Pss:")
		total += kib
		anon += akib
		pss += pkib
		r.AgentRSSMaxKiB = max(r.AgentRSSMaxKiB, kib)
		r.AgentRSSAnonMaxKiB = max(r.AgentRSSAnonMaxKiB, akib)
		r.AgentPssMaxKiB = max(r.AgentPssMaxKiB, pkib)
	}
	if len(l.Agents) > 0 {
		r.AgentRSSMeanKiB = total / len(l.Agents)
		r.AgentRSSAnonMeanKiB = anon / len(l.Agents)
		r.AgentPssMeanKiB = pss / len(l.Agents)
	}
	if r.Destroy, _, err = run("destroy", "-f", changed, "--lab", labName); err != nil {
		return r, err
	}
	return r, nil
}

// converged waits until the line's ends route to each other's locator
// over BGP.
func converged(ctx context.Context, labName string, n int, limit time.Duration) error {
	eg := n - 4 + 2
	want := map[string]string{"ingress": fmt.Sprintf("fc00:%x::/64", eg), "egress": "fc00:1::/64"}
	deadline := time.Now().Add(limit)
	for {
		ok := true
		for node, dst := range want {
			out, err := exec.CommandContext(ctx, "ip", "-6", "-n", lab.NetnsName(labName, node), "route", "show", "proto", "199", dst).Output()
			ok = ok && err == nil && strings.TrimSpace(string(out)) != ""
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("BGP did not converge in %v (ingress ↔ egress locators)", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
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
