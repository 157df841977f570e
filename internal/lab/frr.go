package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/nodestate"
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
	if _, err := l.SyncRouting(d); err != nil {
		return errors.Join(err, l.StopFRR())
	}
	return nil
}

// RoutingChange is what SyncRouting did to the lab's FRR instances
// before an apply: Commit finishes it once the apply succeeded, Undo puts
// the instances back as they were when it failed.
type RoutingChange struct {
	l       *Lab
	started []string              // had no instance
	changed map[string]frr.Config // restarted: node → the configuration it ran
	retire  []string              // the plan has no router there any more
}

// SyncRouting brings the lab's FRR instances to domain d's plan before
// an apply of d, so that applying a domain that changed its routing does
// not need the lab brought up again: a router that needs FRR and runs
// none gets it (static → bgp: the routers' sessions come up while apply
// waits for the speakers' sessions, before the static routes go), a
// router whose configuration changed is restarted with the new one, and
// an instance the plan no longer wants is left running until Commit
// (bgp → static: the static routes replacing the routers' BGP routes
// are installed by then).
func (l *Lab) SyncRouting(d *config.Domain) (*RoutingChange, error) {
	rc := &RoutingChange{l: l, changed: map[string]frr.Config{}}
	want := map[string]*nodestate.BGP{}
	if d.Routing.Mode == config.RoutingBGP {
		p, err := plan.Build(d)
		if err != nil {
			return nil, err
		}
		want = p.FRR
	}
	for _, n := range sortedKeys(l.FRR) {
		if want[n] == nil {
			rc.retire = append(rc.retire, n)
		}
	}
	nodes := make([]string, 0, len(want))
	for n := range want {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	if len(nodes) > 0 {
		if err := frr.Installed(); err != nil {
			return nil, fmt.Errorf("lab %s: routers %v need FRR: %w", l.Name, nodes, err)
		}
	}
	for _, n := range nodes {
		c := frr.Render(n, want[n])
		dir, had := l.FRR[n]
		var old frr.Config
		if had {
			var ok bool
			if old, ok = frr.Running(dir); ok && old == c {
				continue
			}
			if err := frr.Stop(dir); err != nil {
				return rc, errors.Join(fmt.Errorf("lab %s: node %s: %w", l.Name, n, err), rc.Undo())
			}
		}
		ns, err := l.Netns(n)
		if err != nil {
			return rc, errors.Join(err, rc.Undo())
		}
		if !had {
			dir = l.frrDir(n)
			if l.FRR == nil {
				l.FRR = map[string]string{}
			}
			// Recorded before anything starts: lab down stops what it finds.
			l.FRR[n] = dir
			if err := l.save(); err != nil {
				return rc, errors.Join(err, rc.Undo())
			}
			rc.started = append(rc.started, n)
		} else {
			rc.changed[n] = old
		}
		if err := frr.Start(ns, dir, c); err != nil {
			return rc, errors.Join(fmt.Errorf("lab %s: node %s: %w", l.Name, n, err), rc.Undo())
		}
	}
	return rc, nil
}

// Commit stops the instances the applied plan no longer wants.
func (rc *RoutingChange) Commit() error {
	if rc == nil {
		return nil
	}
	return rc.l.stopFRR(rc.retire)
}

// Undo stops the instances SyncRouting started and restarts those it
// changed with the configuration they ran before.
func (rc *RoutingChange) Undo() error {
	if rc == nil {
		return nil
	}
	errs := []error{rc.l.stopFRR(rc.started)}
	for _, n := range sortedKeys(rc.changed) {
		dir := rc.l.FRR[n]
		ns, err := rc.l.Netns(n)
		if err == nil {
			err = frr.Stop(dir)
		}
		if err == nil {
			err = frr.Start(ns, dir, rc.changed[n])
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("lab %s: node %s: restore FRR: %w", rc.l.Name, n, err))
		}
	}
	rc.started, rc.changed = nil, nil
	return errors.Join(errs...)
}

// stopFRR stops the instances of nodes and forgets them. The lab's state
// file is written only when it forgot one: every apply commits, and a
// no-op's rewrite was 1 % of its controller CPU at 250 nodes.
func (l *Lab) stopFRR(nodes []string) error {
	var errs []error
	forgot := false
	for _, n := range nodes {
		dir, ok := l.FRR[n]
		if !ok {
			continue
		}
		if err := frr.Stop(dir); err != nil {
			errs = append(errs, fmt.Errorf("node %s: stop FRR: %w", n, err))
			continue
		}
		os.RemoveAll(dir)
		delete(l.FRR, n)
		forgot = true
	}
	if len(l.FRR) == 0 && l.FRR != nil {
		os.Remove(filepath.Join(StateDir, l.Name+".frr"))
		l.FRR = nil
		forgot = true
	}
	if forgot {
		errs = append(errs, l.save())
	}
	return errors.Join(errs...)
}

// StopFRR stops every FRR instance of the lab and removes its files.
func (l *Lab) StopFRR() error { return l.stopFRR(sortedKeys(l.FRR)) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
