package cpbench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/pki"
)

// The lighter mode (Options.PerProcess): instead of `lab up --agents`
// (one agent process per node, on the lab's management bridge), the
// nodes' agents run K to a process (`segchain agent group`), each node
// with its own listener on the host's loopback and its own mTLS identity,
// and the domain names them (nodes.NAME.agent, security.pki): the
// controller's path (dial, TLS, gRPC, every RPC) is the same as against
// one process per node.

// groupController is the controller certificate's name in the lighter
// mode's PKI.
const groupController = "cpbench"

// groups are the running group processes of one lab.
type groups struct {
	cmds  []*exec.Cmd
	addrs map[string]string
	pki   string
	// Nodes is how many nodes each process serves, by pid.
	nodes map[int]int
}

// startGroups issues a PKI under dir, starts ⌈len(nodes)/per⌉ `exe agent
// group` processes serving the lab's nodes, and waits until each has
// written its addresses.
func startGroups(ctx context.Context, exe, labName string, nodes []string, per int, dir string) (*groups, error) {
	g := &groups{addrs: map[string]string{}, pki: filepath.Join(dir, "pki"), nodes: map[int]int{}}
	if err := os.MkdirAll(g.pki, 0o700); err != nil {
		return nil, err
	}
	if err := pki.Init(g.pki, "cpbench "+labName); err != nil {
		return nil, err
	}
	if _, err := pki.Issue(g.pki, pki.RoleController, groupController, pki.IssueOptions{}); err != nil {
		return nil, err
	}
	sort.Strings(nodes)
	var ready []string
	for i := 0; i < len(nodes); i += per {
		var list []agent.GroupNode
		for _, n := range nodes[i:min(i+per, len(nodes))] {
			if _, err := pki.Issue(g.pki, pki.RoleNode, n, pki.IssueOptions{}); err != nil {
				g.stop()
				return nil, err
			}
			list = append(list, agent.GroupNode{Node: n, Netns: lab.NetnsName(labName, n), Listen: "[::1]:0",
				StateDir: filepath.Join(dir, "state", n)})
		}
		k := strconv.Itoa(i / per)
		file, rdy, logf := filepath.Join(dir, "group"+k+".json"), filepath.Join(dir, "group"+k+".ready"), filepath.Join(dir, "group"+k+".log")
		b, _ := json.Marshal(list)
		if err := os.WriteFile(file, b, 0o644); err != nil {
			g.stop()
			return nil, err
		}
		lf, err := os.Create(logf)
		if err != nil {
			g.stop()
			return nil, err
		}
		cmd := exec.Command(exe, "agent", "group", "--nodes", file, "--pki", g.pki, "--allow-controller", groupController, "--ready", rdy, "--log-format", "json")
		cmd.Stdout, cmd.Stderr = lf, lf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err = cmd.Start()
		lf.Close()
		if err != nil {
			g.stop()
			return nil, err
		}
		g.cmds = append(g.cmds, cmd)
		g.nodes[cmd.Process.Pid] = len(list)
		ready = append(ready, rdy)
	}
	// Each process writes its ready file once all its nodes are served.
	deadline := time.Now().Add(10 * time.Minute)
	for i, rdy := range ready {
		for {
			b, err := os.ReadFile(rdy)
			if err == nil {
				var m map[string]string
				if err := json.Unmarshal(b, &m); err != nil {
					g.stop()
					return nil, fmt.Errorf("%s: %w", rdy, err)
				}
				for n, a := range m {
					g.addrs[n] = a
				}
				break
			}
			if st := g.cmds[i].ProcessState; st != nil || ctx.Err() != nil || time.Now().After(deadline) {
				g.stop()
				return nil, fmt.Errorf("agent group %d did not start (log %s)", i, strings.TrimSuffix(rdy, ".ready")+".log")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return g, nil
}

// stop ends every group process (SIGTERM, then SIGKILL after 10 s).
func (g *groups) stop() {
	for _, c := range g.cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range g.cmds {
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
}

// domain is the generated domain y with every node reached through its
// group's agent: nodes.NAME.agent and security.pki added to the
// generator's one-line node entries.
func (g *groups) domain(y string) (string, error) {
	var b strings.Builder
	inNodes, found := false, 0
	for _, line := range strings.SplitAfter(y, "\n") {
		switch {
		case line == "nodes:\n":
			inNodes = true
		case inNodes && !strings.HasPrefix(line, "  "):
			inNodes = false
		case inNodes:
			name, rest, ok := strings.Cut(strings.TrimPrefix(line, "  "), ": {")
			if a := g.addrs[name]; ok && a != "" {
				line = fmt.Sprintf("  %s: {agent: %q, %s", name, a, rest)
				found++
			}
		}
		b.WriteString(line)
	}
	if found != len(g.addrs) {
		return "", fmt.Errorf("the generated domain lists %d of the %d nodes the agent groups serve", found, len(g.addrs))
	}
	f := pki.DirFiles(g.pki, pki.RoleController, groupController)
	fmt.Fprintf(&b, "security:\n  pki: {ca: %q, cert: %q, key: %q}\n", f.CA, f.Cert, f.Key)
	return b.String(), nil
}
