package lab

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/segchain/segchain/internal/config"
)

// UpOptions are the choices of `segchain lab up` beyond the domain.
type UpOptions struct {
	Name, File string // the lab's name ("" = the default) and the domain file it records
	Agents     bool   // an agent per node under a supervisor (routing: bgp implies it)
	// NoAgents: no agent at all, even under routing: bgp (lab up
	// --agents=false): the caller serves the nodes' agents itself, such
	// as segchain agent group (docs/scale.md, the lighter mode).
	NoAgents bool
	// AgentExe runs `AgentExe agent ...` as the agents ("" = this
	// program, which is the supervisor in any case).
	AgentExe string
}

// UpDomain brings up the lab of domain d: its namespaces and links (Up),
// the FRR of its routers, and with o.Agents an agent in every node. A BGP
// domain implies agents (a BGP speaker lives in the node's agent), said
// on note. On any failure the lab is taken down again.
func UpDomain(d *config.Domain, o UpOptions, note io.Writer) (*Lab, error) {
	topo, err := FromDomain(d)
	if err != nil {
		return nil, err
	}
	topo.Name, topo.File = o.Name, o.File
	if o.NoAgents && o.Agents {
		return nil, errors.New("lab up: agents and no agents: give one")
	}
	if d.Routing.Mode == config.RoutingBGP && o.NoAgents {
		fmt.Fprintln(note, "routing: bgp without agents: the SR nodes' BGP speakers run in the agents you start (segchain agent group)")
	}
	if d.Routing.Mode == config.RoutingBGP && !o.Agents && !o.NoAgents {
		// A BGP speaker lives as long as a process does: the nodes'
		// agents run them (docs/routing.md).
		fmt.Fprintln(note, "routing: bgp: starting an agent in every node (implies --agents)")
		o.Agents = true
	}
	l, err := Up(topo)
	if err != nil {
		return nil, err
	}
	if err := l.StartRouting(d); err != nil {
		return nil, errors.Join(err, Down(l.Name))
	}
	if o.Agents {
		// The supervisor is this program (lab supervise); the agents
		// are AgentExe's, or this program's.
		self, err := os.Executable()
		exe := o.AgentExe
		if exe == "" {
			exe = self
		}
		if err == nil {
			err = l.StartAgents(self, exe)
		}
		if err != nil {
			return nil, errors.Join(err, Down(l.Name))
		}
	}
	return l, nil
}
