package session

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

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/reconcile"
	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/bpfpin"
	"github.com/segchain/segchain/internal/devprofile"
	"github.com/segchain/segchain/internal/nodelock"
)

// What a changing command holds while it changes nodes: each in-process
// node's lock (nodelock, a file lock per namespace identity) and each
// remote node's lease (on its agent), taken after every remote agent
// answered a preflight.

// leaseTTL is the lease a session holds on each remote node while it
// changes it (renewed every third of it).
const leaseTTL = 30 * time.Second

// reconcileWait bounds how long a session waits for an agent's own
// reconcile (segchain agent --reconcile) to give the node's lease back.
const reconcileWait = 30 * time.Second

// lock takes every in-process node's lock, preflights every agent that
// can be (agent.Caps.Preflight: the remote ones) and takes every remote
// node's lease; release gives them back. It is the controller's Lock:
// the one preflight of each apply.
func (s *Session) lock(ctx context.Context) (release func(), err error) {
	set, err := LockNodes(ctx, s.log, s.netns, s.opts.NoWait)
	if err != nil {
		return nil, err
	}
	if err := s.preflight(ctx); err != nil {
		set.Release()
		return nil, err
	}
	devprofile.Phase("preflight")
	leased, err := leaseAll(ctx, s.log, s.remote)
	if err != nil {
		set.Release()
		return nil, err
	}
	devprofile.Phase("leases")
	return func() {
		releaseLeases(leased)
		set.Release()
		devprofile.Phase("release")
	}, nil
}

// releaseLeases gives the leases back, with a context of its own: an
// interrupt that ended the command's must not keep them held.
func releaseLeases(cs []*client.Client) {
	m := make(map[string]*client.Client, len(cs))
	for _, c := range cs {
		m[c.Node()] = c
	}
	// In parallel, bounded (each): at 1,000 agents one after the other
	// took seconds.
	each(m, func(c *client.Client) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.ReleaseLease(ctx)
	})
}

// preflight checks every agent that can say, changing nothing, whether
// it can be programmed (reachable, serving the node, a compatible
// protocol), all at once, before anything changes: one failure fails the
// command with every node's error.
func (s *Session) preflight(ctx context.Context) error {
	pf := map[string]agent.Preflighter{}
	for n, a := range s.ctl.Agents {
		if p := a.Caps().Preflight; p != nil {
			pf[n] = p
		}
	}
	_, errs := each(pf, func(p agent.Preflighter) error { return p.Preflight(ctx) })
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("preflight failed, nothing changed on any node:\n%w", err)
	}
	return nil
}

// NodeKey names a node's kernel state for its lock and journal: the
// network namespace's identity (bpfpin.Namespace), so that `--netns NS`,
// `ip netns exec NS` and a lab node are the same node.
func NodeKey(netns string) (string, error) {
	key, _, err := bpfpin.Namespace(netns)
	return key, err
}

// LockNodes takes the lock of every node (name → netns) in the fixed
// order nodelock uses, telling ew whom it waits for.
func LockNodes(ctx context.Context, ew io.Writer, nodes map[string]string, noWait bool) (*nodelock.Set, error) {
	var ns []nodelock.Node
	for name, netns := range nodes {
		key, err := NodeKey(netns)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		ns = append(ns, nodelock.Node{Key: key, Name: name})
	}
	return nodelock.Acquire(ctx, ns, nodelock.Options{NoWait: noWait, Waiting: func(node string, h nodelock.Holder) {
		fmt.Fprintf(ew, "segchain: waiting for lock on node %s held by %s\n", node, h)
	}})
}

// holderName is how other controllers are told who holds a node's lease.
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d (%s) on host %s since %s", os.Getpid(), strings.Join(os.Args, " "), host, time.Now().UTC().Format(time.RFC3339))
}

// leaseAll takes the lease of every remote node; on any failure none is
// kept.
func leaseAll(ctx context.Context, ew io.Writer, remote map[string]*client.Client) ([]*client.Client, error) {
	holder := holderName()
	names, errs := each(remote, func(c *client.Client) error { return acquireLease(ctx, ew, c, holder) })
	var got []*client.Client
	for i, n := range names {
		if errs[i] == nil {
			got = append(got, remote[n])
		}
	}
	if err := errors.Join(errs...); err != nil {
		releaseLeases(got)
		return nil, err
	}
	return got, nil
}

// acquireLease takes c's lease for holder. An agent's own reconcile
// holds it for a moment (re-applying the node's intent): the session
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

// each runs fn on every node's value at once and returns the node names,
// sorted, with each one's error.
func each[T any](m map[string]T, fn func(T) error) ([]string, []error) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	// Bounded: at 1,000 agents, dialling every one at once (a TCP and TLS
	// handshake each) on two cores ran past the dial and handshake
	// deadlines for a quarter of them (docs/scale.md).
	sem := make(chan struct{}, maxDials)
	for i, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = fn(m[n])
		}()
	}
	wg.Wait()
	return names, errs
}

// maxDials is how many agents the session's preflight and leases reach at
// once.
const maxDials = 64
