package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/segchain/segchain/internal/agent/reconcile"
	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodelock"
	"github.com/segchain/segchain/internal/pki"
)

// Remote nodes: a node with an agent address (nodes.NAME.agent, or a lab
// brought up with --agents) is programmed through its agent over gRPC.

// remoteConcurrency is how many nodes a controller works on at once when
// some are remote (in-process nodes are worked on one at a time as
// before: they share this process).
const remoteConcurrency = 16

// leaseTTL is the lease a controller holds on each remote node while it
// changes it (renewed every third of it).
const leaseTTL = 30 * time.Second

// remoteAgents dials the agent of every node that has one: the lab's
// agents (lab up --agents, with the lab's PKI) or the domain's
// nodes.NAME.agent (with security.pki).
func remoteAgents(d *config.Domain, l *lab.Lab) (map[string]*client.Client, error) {
	out := map[string]*client.Client{}
	dial := func(node, addr string, files pki.Files) error {
		tc, err := pki.ClientTLS(files, node)
		if err != nil {
			return fmt.Errorf("node %s: %w", node, err)
		}
		c, err := client.Dial(node, addr, tc)
		if err != nil {
			return err
		}
		c.SetHint(agentHint(l, node))
		out[node] = c
		return nil
	}
	var errs []error
	if l != nil && len(l.Agents) > 0 {
		files := pki.DirFiles(l.AgentPKI, pki.RoleController, lab.ControllerName)
		for _, n := range l.NodeNames() {
			if a, ok := l.Agents[n]; ok && d.Nodes[n] != nil {
				errs = append(errs, dial(n, a.Addr, files))
			}
		}
		return out, errors.Join(errs...)
	}
	ca, cert, key := d.PKIFiles()
	files := pki.Files{CA: ca, Cert: cert, Key: key}
	for _, n := range d.NodeNames() {
		if a := d.Nodes[n].Agent; a != "" {
			errs = append(errs, dial(n, a, files))
		}
	}
	return out, errors.Join(errs...)
}

// agentHint is what an unreachable agent's error adds: how to see it and
// bring it back, in a lab (its supervisor) or on a host (systemd).
func agentHint(l *lab.Lab, node string) string {
	if l != nil && len(l.Agents) > 0 {
		return fmt.Sprintf("is it running? `segchain lab ls --lab %s` shows its state and log (the lab's supervisor restarts an agent that exits, with backoff); `segchain lab restart-agents --lab %s %s` starts it again",
			l.Name, l.Name, node)
	}
	return "is `segchain agent` running on that host? `systemctl status segchain-agent` there shows it, `systemctl restart segchain-agent` starts it again (docs/deploy.md)"
}

// holderName is how other controllers are told who holds a node's lease.
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d (%s) on host %s since %s", os.Getpid(), strings.Join(os.Args, " "), host, time.Now().UTC().Format(time.RFC3339))
}

// domainLocks are what a changing command holds: the locks of its
// in-process nodes and the leases of its remote ones.
type domainLocks struct {
	set    *nodelock.Set
	remote []*client.Client
}

// Release gives every lock and lease back.
func (l *domainLocks) Release() {
	for _, c := range l.remote {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.ReleaseLease(ctx)
		cancel()
	}
	l.remote = nil
	if l.set != nil {
		l.set.Release()
		l.set = nil
	}
}

// leaseAll takes the lease of every remote node; on any failure none is
// kept.
func leaseAll(ctx context.Context, ew io.Writer, remote map[string]*client.Client) ([]*client.Client, error) {
	if err := preflightAll(ctx, remote); err != nil {
		return nil, err
	}
	holder := holderName()
	names, errs := eachRemote(remote, func(c *client.Client) error { return acquireLease(ctx, ew, c, holder) })
	var got []*client.Client
	for i, n := range names {
		if errs[i] == nil {
			got = append(got, remote[n])
		}
	}
	if err := errors.Join(errs...); err != nil {
		for _, c := range got {
			c.ReleaseLease(ctx)
		}
		return nil, err
	}
	return got, nil
}

// reconcileWait bounds how long a controller waits for an agent's own
// reconcile (segchain agent --reconcile) to give the node's lease back.
const reconcileWait = 30 * time.Second

// acquireLease takes c's lease for holder. An agent's own reconcile
// holds it for a moment (re-applying the node's intent): the controller
// waits for it, telling ew, instead of failing; another controller's
// lease fails at once ("domain is being applied by …").
func acquireLease(ctx context.Context, ew io.Writer, c *client.Client, holder string) error {
	deadline := time.Now().Add(reconcileWait)
	told := false
	for {
		err := c.AcquireLease(ctx, holder, leaseTTL)
		if err == nil {
			return nil
		}
		h, herr := c.Health(ctx)
		if herr != nil || !strings.HasPrefix(h.LeaseHolder, reconcile.WhoPrefix) || time.Now().After(deadline) {
			return err
		}
		if !told {
			fmt.Fprintf(ew, "segchain: waiting for node %s: its agent is reconciling it (%s)\n", c.Node(), h.LeaseHolder)
			told = true
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// preflightAll checks every remote node (agent.Caps.Preflight) at once,
// before any lease is taken: one unreachable or incompatible agent fails
// the command before anything changes.
func preflightAll(ctx context.Context, remote map[string]*client.Client) error {
	_, errs := eachRemote(remote, func(c *client.Client) error { return c.Preflight(ctx) })
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("preflight failed, nothing changed on any node:\n%w", err)
	}
	return nil
}

// eachRemote runs fn on every remote node's client at once and returns
// the node names, sorted, with each one's error.
func eachRemote(remote map[string]*client.Client, fn func(*client.Client) error) ([]string, []error) {
	names := sortedNames(remote)
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(remote[n])
		}()
	}
	wg.Wait()
	return names, errs
}

func sortedNames[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
