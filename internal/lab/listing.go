package lab

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/segchain/segchain/internal/nsutil"
)

// Listing is a lab as `segchain lab ls` shows it (its JSON form): the
// state file, whether each node's namespace still exists, and the agents
// and supervisor as the supervisor recorded them.
type Listing struct {
	Name     string       `json:"name"`
	Created  time.Time    `json:"created"`
	File     string       `json:"file,omitempty"`
	Complete bool         `json:"complete"`
	Nodes    []ListedNode `json:"nodes"`
	// Agents (lab up --agents): per node, its address, metrics
	// endpoint, log and state as the lab's supervisor recorded it.
	Agents     map[string]ListedAgent `json:"agents,omitempty"`
	Supervisor *ListedSupervisor      `json:"supervisor,omitempty"`
}

// ListedNode is a node of a Listing.
type ListedNode struct {
	Node   string `json:"node"`
	Netns  string `json:"netns"`
	Exists bool   `json:"exists"`
}

// ListedAgent is a node's agent in a Listing.
type ListedAgent struct {
	Addr    string `json:"addr"`
	Metrics string `json:"metrics"`
	Log     string `json:"log"`
	AgentRun
}

// ListedSupervisor is the lab's supervisor in a Listing.
type ListedSupervisor struct {
	PID     int    `json:"pid"`
	Running bool   `json:"running"`
	Log     string `json:"log"`
}

// Listing looks up what `lab ls` shows of l.
func (l *Lab) Listing() Listing {
	x := Listing{Name: l.Name, Created: l.Created, File: l.File, Complete: l.Complete, Nodes: []ListedNode{}}
	for _, n := range l.NodeNames() {
		x.Nodes = append(x.Nodes, ListedNode{Node: n, Netns: l.Nodes[n], Exists: nsutil.Exists(l.Nodes[n])})
	}
	if len(l.Agents) > 0 {
		x.Agents = map[string]ListedAgent{}
		for n, a := range l.Agents {
			x.Agents[n] = ListedAgent{Addr: a.Addr, Metrics: a.Metrics, Log: a.Log, AgentRun: l.AgentStatus(n)}
		}
	}
	if l.Supervisor != nil {
		x.Supervisor = &ListedSupervisor{PID: l.Supervisor.PID, Running: l.SupervisorAlive(), Log: l.Supervisor.Log}
	}
	return x
}

// ExecArgv is the command line `lab exec NODE -- ARGV` runs in the node's
// namespace: ARGV, but vtysh is pointed at the node's own FRR (its vty
// socket directory) unless ARGV already names one.
func (l *Lab) ExecArgv(node string, argv []string) []string {
	dir, ok := l.FRRDir(node)
	if !ok || filepath.Base(argv[0]) != "vtysh" {
		return argv
	}
	for _, a := range argv[1:] {
		if a == "--vty_socket" || strings.HasPrefix(a, "--vty_socket=") || a == "-N" || strings.HasPrefix(a, "--pathspace") {
			return argv
		}
	}
	return append([]string{argv[0], "--vty_socket", dir}, argv[1:]...)
}
