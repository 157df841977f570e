package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/plan"
)

// Routing labs (routing: bgp): the router nodes run FRR, one instance per
// namespace with every file of it under /run/segchain/labs/LAB.frr/NODE
// (configurations, pid files, the zebra API and vty sockets, logs). The
// other SR nodes' speakers live in their agents (StartAgents).

// frrDir is node's FRR directory.
func (l *Lab) frrDir(node string) string { return filepath.Join(StateDir, l.Name+".frr", node) }

// FRRDir returns the directory of node's FRR instance (its vty sockets:
// vtysh --vty_socket DIR), if the node runs one.
func (l *Lab) FRRDir(node string) (string, bool) {
	d, ok := l.FRR[node]
	return d, ok
}

// StartRouting starts what domain d's routing needs besides the agents:
// FRR on every router node under routing: bgp (nothing under static). On
// failure it stops every instance it started.
func (l *Lab) StartRouting(d *config.Domain) error {
	if d.Routing.Mode != config.RoutingBGP {
		return nil
	}
	p, err := plan.Build(d)
	if err != nil {
		return err
	}
	nodes := make([]string, 0, len(p.FRR))
	for n := range p.FRR {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	if len(nodes) > 0 {
		if err := frr.Installed(); err != nil {
			return fmt.Errorf("lab %s: routers %v need FRR: %w", l.Name, nodes, err)
		}
	}
	for _, n := range nodes {
		ns, err := l.Netns(n)
		if err != nil {
			return errors.Join(err, l.StopFRR())
		}
		if l.FRR == nil {
			l.FRR = map[string]string{}
		}
		dir := l.frrDir(n)
		// Recorded before anything starts: lab down stops what it finds.
		l.FRR[n] = dir
		if err := l.save(); err != nil {
			return errors.Join(err, l.StopFRR())
		}
		if err := frr.Start(ns, dir, frr.Render(n, p.FRR[n])); err != nil {
			return errors.Join(fmt.Errorf("lab %s: node %s: %w", l.Name, n, err), l.StopFRR())
		}
	}
	return nil
}

// StopFRR stops every FRR instance of the lab and removes its files.
func (l *Lab) StopFRR() error {
	var errs []error
	for _, n := range sortedKeys(l.FRR) {
		dir := l.FRR[n]
		if err := frr.Stop(dir); err != nil {
			errs = append(errs, fmt.Errorf("node %s: stop FRR: %w", n, err))
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if l.FRR != nil {
		os.Remove(filepath.Join(StateDir, l.Name+".frr"))
		l.FRR = nil
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
