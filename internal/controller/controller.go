package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/chainpath"
	"github.com/segchain/segchain/internal/devprofile"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/service/kinds"
)

// Controller applies a plan to a set of node agents.
type Controller struct {
	Plan   *plan.Plan
	Agents map[string]agent.Agent
	// Journal, if set, records every op before it runs (recover.go).
	Journal Journal
	// Lock, if set, is taken around each apply of a long-running command
	// (Watch), so that it is serialized with other segchain commands on
	// the same nodes; it returns the release function. The apply session
	// (internal/session) sets it: its locks, leases and the preflight of
	// remote agents (Apply and Destroy take neither: the session does,
	// once per apply).
	Lock func(ctx context.Context) (release func(), err error)
	// Outside, if set, brings what the domain needs outside its SR nodes
	// (a lab's routers' FRR: lab.SyncRouting) to the plan before every
	// apply that is not a dry run, also one that changes no node (FRR may
	// still differ); done then gets the apply's outcome, to keep that
	// (nil) or put it back. segchain apply's applies run it, and each of
	// segchain watch's.
	Outside func() (done func(applyErr error) error, err error)
	// BGPStarted, if set, is told of each node whose adds of an apply
	// started its BGP speaker (none ran there), as soon as that node's
	// adds have run (before the other nodes' end): b is its intent. A lab's
	// routers are then asked to dial it at once (lab.Nudger), instead of
	// at their connect timer's end. It must not block.
	BGPStarted func(node string, b *nodestate.BGP)
	// Concurrency is how many nodes change (and are observed) at once
	// (≤ 1: one at a time); NodeTimeout, if set, bounds each node's part
	// of each phase (parallel.go).
	Concurrency int
	NodeTimeout time.Duration
	// BGPSettle bounds the wait, between the adds and the deletes, for
	// the BGP sessions an apply starts (bgp.go); 0: DefaultBGPSettle.
	BGPSettle time.Duration
	// Scope, if set, is the only nodes Apply, Destroy, Diff and Status
	// contact: the nodes whose intent changed since the last apply
	// (internal/session, apply --changed-only). nil: every node.
	Scope map[string]bool

	// statsMu guards stats: the nodes observed in full and by digest
	// (digest.go).
	statsMu sync.Mutex
	stats   ObserveCounts
	// wantDg memoises the plan's digest of each node's state
	// (wantDigest; the plan's states are not changed once planned),
	// guarded by statsMu.
	wantDg map[*nodestate.Node]string
	// keptOAM is each agent's latest report of the OAM set it keeps
	// (agent.Digests.KeptOAM; KeptOAM), guarded by statsMu.
	keptOAM map[string]string
	// dg are the current apply's agents' digests (digest.go); nil
	// outside one.
	dg *digests
}

// Result is what an apply or destroy did (or, for a dry run, would do).
type Result struct {
	Diffs      []Diff `json:"diffs"`
	Applied    bool   `json:"applied"`
	RolledBack bool   `json:"rolled_back,omitempty"`
	// Interrupted: the command's context ended (^C, SIGTERM) while it
	// changed nodes; no op started after that, and the ones that ran
	// were undone (RolledBack) — Undone of them.
	Interrupted bool     `json:"interrupted,omitempty"`
	Undone      int      `json:"undone,omitempty"`
	Errors      []string `json:"errors,omitempty"`
	// Recovered are the unfinished journals of killed commands found
	// (and, unless a dry run, undone) first.
	Recovered []Recovery `json:"recovered,omitempty"`
	// NotPlanned: a no-op apply found every node unchanged against the
	// intent its agent keeps, those of the last apply, whose inputs were
	// this command's: it made no plan (docs/scale.md, "Session 16").
	NotPlanned bool `json:"not_planned,omitempty"`
}

// Changes counts the ops over all nodes.
func (r *Result) Changes() int {
	n := 0
	for _, d := range r.Diffs {
		n += len(d.Adds) + len(d.Deletes)
	}
	return n
}

func (c *Controller) nodes() []string {
	names := make([]string, 0, len(c.Plan.Nodes))
	for n := range c.Plan.Nodes {
		if c.Scope != nil && !c.Scope[n] {
			continue // outside the apply's scope (scope.go)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (c *Controller) agentFor(node string) (agent.Agent, error) {
	a, ok := c.Agents[node]
	if !ok {
		return nil, fmt.Errorf("node %s: no agent (is the node's namespace known?)", node)
	}
	return a, nil
}

// Diff observes every node and computes what apply would change. A node
// whose agent reports digests (agent.Caps.Digest) is asked in one round
// trip for its digest, and for its state only when the digest differs
// from the plan's: a node in sync is neither fetched nor probed
// (digest.go).
func (c *Controller) Diff(ctx context.Context) ([]Diff, error) {
	defer func() { c.dg = nil }()
	return c.diff(ctx, c.digestAll(ctx, c.nodes(), true))
}

// diff is Diff with the digests (and states) already fetched in dg.
func (c *Controller) diff(ctx context.Context, dg *digests) ([]Diff, error) {
	c.dg = dg
	names := c.nodes()
	diffs := make([]Diff, len(names))
	// Nodes are observed Concurrency at a time (parallel.go).
	if errs := c.each(ctx, names, func(ctx context.Context, i int, n string) error {
		a, err := c.agentFor(n)
		if err != nil {
			return err
		}
		want := c.Plan.Nodes[n]
		if c.inSync(dg, n) {
			c.countDigests(1)
			diffs[i] = Diff{Node: n}
			return nil
		}
		var got *nodestate.Node
		if g, ok := dg.get(n); ok && g.Observed != nil {
			got = g.Observed
		} else if got, err = a.Observe(ctx, want); err != nil {
			return err
		}
		c.countFull()
		d := Compute(got, want)
		if fc := a.Caps().Features; fc != nil {
			if d.Unsupported, err = fc.Unsupported(ctx, want); err != nil {
				return err
			}
		}
		diffs[i] = d
		return nil
	}); len(errs) > 0 {
		return nil, errs[0]
	}
	// What cannot fit is reported now, before anything changes anywhere
	// (every node asked, Concurrency at a time; errors in node order).
	if err := errors.Join(c.each(ctx, names, func(ctx context.Context, i int, n string) error {
		d := diffs[i]
		a, err := c.agentFor(d.Node)
		if err != nil {
			return err
		}
		if ck := a.Caps().Check; ck != nil && !d.Empty() {
			return ck.Check(ctx, d.Ops())
		}
		return nil
	})...); err != nil {
		return diffs, err
	}
	return diffs, nil
}

// Apply brings every node to the plan. Adds run on every node first
// (endpoints before headends, so a chain is never steered into a SID that
// does not exist yet), then deletes (headends first). If any op fails, every
// op already executed on every node is undone in reverse order, so the
// domain is left as it was. Once every node is as planned, the agents that
// keep intents (agent.Caps.Intents) are handed their node's desired state.
func (c *Controller) Apply(ctx context.Context, dryRun bool) (*Result, error) {
	// One round trip per node first (digest.go): the digests say which
	// nodes have a journal to recover and which need observing at all.
	dg := c.digestAll(ctx, c.nodes(), true)
	defer func() { c.dg = nil }()
	devprofile.Phase("digests")
	rec, err := c.recover(ctx, dryRun, dg)
	if err != nil {
		return &Result{Recovered: rec}, err
	}
	devprofile.Phase("recover")
	diffs, err := c.diff(ctx, dg)
	if err != nil {
		return nil, err
	}
	devprofile.Phase("diff")
	res := &Result{Diffs: diffs, Recovered: rec}
	if err := res.blockers(); err != nil {
		return res, err
	}
	if dryRun {
		return res, nil
	}
	done := func(error) error { return nil }
	if c.Outside != nil {
		if done, err = c.Outside(); err != nil {
			return res, err
		}
	}
	if res.Changes() > 0 {
		if _, err := c.execute(ctx, res); err != nil {
			return res, errors.Join(err, done(err))
		}
	}
	devprofile.Phase("execute")
	// Every node is as planned: the agents that keep intents learn it
	// (intent.go). An interrupt from now on changes nothing: the apply
	// is complete and is kept.
	err = c.keepIntents(context.WithoutCancel(ctx), false)
	devprofile.Phase("intents")
	return res, errors.Join(err, done(err))
}

// Destroy removes everything segchain installed on the plan's nodes.
func (c *Controller) Destroy(ctx context.Context, dryRun bool) (*Result, error) {
	rec, err := c.Recover(ctx, dryRun)
	res := &Result{Recovered: rec}
	if err != nil {
		return res, err
	}
	// Nodes are observed Concurrency at a time (parallel.go).
	names := c.nodes()
	res.Diffs = make([]Diff, len(names))
	if errs := c.each(ctx, names, func(ctx context.Context, i int, n string) error {
		a, err := c.agentFor(n)
		if err != nil {
			return err
		}
		planned := c.Plan.Nodes[n]
		got, err := a.Observe(ctx, planned)
		if err != nil {
			return err
		}
		orig, err := a.Originals(ctx)
		if err != nil {
			return err
		}
		res.Diffs[i] = Teardown(got, planned, orig)
		return nil
	}); len(errs) > 0 {
		res.Diffs = nil
		return nil, errs[0]
	}
	if dryRun {
		return res, nil
	}
	if _, err := c.execute(ctx, res); err != nil {
		return res, err
	}
	// Every op ran: the destroy is complete, an interrupt from now on
	// does not stop the agents from forgetting the node.
	ctx = context.WithoutCancel(ctx)
	if errs := c.each(ctx, names, func(ctx context.Context, _ int, n string) error {
		return c.Agents[n].Forget(ctx)
	}); len(errs) > 0 {
		return res, errs[0]
	}
	return res, c.keepIntents(ctx, true)
}

type journalEntry struct {
	node string
	op   agent.Op
}

// headendFirst orders nodes so that nodes steering traffic (rules, policies)
// come first; reversing it gives the order for adds.
func (c *Controller) headendFirst(diffs []Diff) []int {
	idx := make([]int, len(diffs))
	for i := range idx {
		idx[i] = i
	}
	isHeadend := func(d Diff) bool {
		n := c.Plan.Nodes[d.Node]
		return n != nil && len(n.Rules) > 0
	}
	sort.SliceStable(idx, func(i, j int) bool {
		return isHeadend(diffs[idx[i]]) && !isHeadend(diffs[idx[j]])
	})
	return idx
}

func (c *Controller) execute(ctx context.Context, res *Result) (*Result, error) {
	order := c.headendFirst(res.Diffs)
	reversed := make([]int, len(order))
	for i, j := range order {
		reversed[len(order)-1-i] = j
	}
	var journal []journalEntry
	record := func(node string, op agent.Op) { journal = append(journal, journalEntry{node: node, op: op}) }
	// Adds: endpoints, then headends; deletes: headends, then endpoints.
	failure := c.runPhases(ctx, res.Diffs, c.phases(res.Diffs, reversed), func(d Diff) []agent.Op { return d.Adds }, record, c.BGPStarted)
	if failure == nil {
		c.settleBGP(ctx, res.Diffs)
		failure = interrupted(ctx)
	}
	if failure == nil {
		failure = c.runPhases(ctx, res.Diffs, c.phases(res.Diffs, order), func(d Diff) []agent.Op { return d.Deletes }, record, nil)
	}
	if failure == nil {
		res.Applied = true
		return res, c.clearJournals(res.Diffs)
	}
	res.Errors = append(res.Errors, failure.Error())
	res.RolledBack = true
	res.Interrupted = errors.Is(failure, ErrInterrupted)
	var rbErrs []error
	// The rollback runs even when the command was cancelled (^C, a
	// node's timeout): it is what leaves the domain as it was.
	rctx := context.WithoutCancel(ctx)
	for i := len(journal) - 1; i >= 0; i-- {
		e := journal[i]
		if _, err := c.Agents[e.node].Execute(rctx, []agent.Op{e.op.Inverse()}); err != nil {
			rbErrs = append(rbErrs, fmt.Errorf("rollback: %w", err))
			res.Errors = append(res.Errors, "rollback: "+err.Error())
			continue
		}
		res.Undone++
	}
	if len(rbErrs) > 0 {
		res.RolledBack = false
		return res, fmt.Errorf("apply failed and rollback was incomplete: %w", errors.Join(append([]error{failure}, rbErrs...)...))
	}
	if err := c.clearJournals(res.Diffs); err != nil {
		// A node whose agent died keeps its journal (what it was
		// running when it died): reported, not hiding the failure.
		res.Errors = append(res.Errors, "journal: "+err.Error())
		return res, fmt.Errorf("apply failed, every node rolled back to its previous state: %w\n(journals left where they could not be cleared; the next apply or destroy undoes them first: %v)", failure, err)
	}
	if res.Interrupted {
		return res, fmt.Errorf("%w; every node rolled back to its previous state (%d change(s) undone)", failure, res.Undone)
	}
	return res, fmt.Errorf("apply failed, every node rolled back to its previous state: %w", failure)
}

// NodeStatus is one node's local SIDs with counters, named after the plan.
type NodeStatus struct {
	Node string      `json:"node"`
	SIDs []SIDStatus `json:"sids"`
	// Boundary is the drops of the node's boundary filter, per
	// interface and reason (only those that dropped something).
	Boundary []nodestate.BoundaryCounter `json:"boundary,omitempty"`
	// BGP are the sessions of the node's BGP speaker (routing: bgp).
	BGP   []nodestate.BGPSession `json:"bgp,omitempty"`
	Error string                 `json:"error,omitempty"`
	// State is in-sync, drift, not-applied (nothing of segchain's is on
	// the node) or unknown (Error).
	State string `json:"state"`
}

// SIDStatus is a local SID joined with what the plan says it is.
type SIDStatus struct {
	agent.SIDCounters
	Service string `json:"service,omitempty"`
}

// Status is a domain's chains and the per-SID counters of every node.
type Status struct {
	Domain string         `json:"domain"`
	Chains []ChainStatus  `json:"chains"`
	Nodes  []NodeStatus   `json:"nodes"`
	Drift  map[string]int `json:"drift,omitempty"` // node → pending changes (plan vs kernel)
	// Broken names the chains that cross a node where something the plan
	// installs is missing or different (a route an SF lost when its link
	// went down, a deleted SID ...): their traffic may be black-holed
	// until apply restores it.
	Broken []BrokenChain `json:"broken,omitempty"`
	// Faults are the broken eBPF objects observed per node (detached
	// programs, missing or foreign link pins, bad maps, orphans).
	Faults map[string][]string `json:"faults,omitempty"`
	// MTU are the chains whose hosts' full-size packets do not fit once
	// encapsulated, at the headend's way out or a later node's on the
	// traced path (Headroom; docs/deploy.md, "MTU"): a warning, not
	// drift. MTUNotes are the nodes it could not check (an agent older
	// than the MTUs RPC).
	MTU      []MTUWarning `json:"mtu,omitempty"`
	MTUNotes []string     `json:"mtu_notes,omitempty"`
}

// ChainStatus is a planned chain with the path its packets take now.
type ChainStatus struct {
	plan.Chain
	// Path is, per SID, the nodes the kernels' forwarding leads through
	// from the previous SID's node (the headend first) to the SID's node
	// (chainpath): what the routes installed now say, under routing:
	// static and bgp alike.
	Path []chainpath.Segment `json:"path"`
	// State is in-sync, drift (a node it crosses lacks something),
	// not-applied (none of its nodes holds anything of segchain's) or
	// unknown (a node it crosses could not be read).
	State string `json:"state"`
}

// Status reads counters, observed state and routes from every node,
// Concurrency nodes at a time (parallel.go). A node that cannot be read is
// reported with its error instead of failing the whole status.
func (c *Controller) Status(ctx context.Context) *Status {
	st := &Status{Domain: c.Plan.Domain, Drift: map[string]int{}, Faults: map[string][]string{}}
	names := map[string]string{}
	for _, s := range c.Plan.SIDs {
		names[s.Node+" "+s.SID.String()] = s.Service
	}
	nodes := c.nodes()
	st.Nodes = make([]NodeStatus, len(nodes))
	observed := make([]*nodestate.Node, len(nodes))
	tables := make([]chainpath.Table, len(nodes))
	c.each(ctx, nodes, func(ctx context.Context, i int, n string) error {
		ns := &st.Nodes[i]
		ns.Node = n
		a, err := c.agentFor(n)
		if err != nil {
			ns.Error = err.Error()
			tables[i].Err = err
			return nil
		}
		// Each node's routes are read once per status, for every chain
		// that crosses it.
		if rr := a.Caps().Routes; rr != nil {
			tables[i].Routes, tables[i].Err = rr.MainRoutes(ctx)
		} else {
			tables[i].Err = agent.ErrTooOld
		}
		var sids []agent.SIDCounters
		if sids, err = a.Counters(ctx); err == nil {
			for _, s := range sids {
				ns.SIDs = append(ns.SIDs, SIDStatus{SIDCounters: s, Service: names[n+" "+s.SID.String()]})
			}
			if br := a.Caps().Boundary; br != nil {
				if ns.Boundary, err = br.BoundaryCounters(ctx); err != nil {
					ns.Error = err.Error()
					err = nil
				}
			}
			got, oerr := a.Observe(ctx, c.Plan.Nodes[n])
			if oerr != nil {
				err = oerr
			} else {
				ns.BGP = got.BGPSessions
				observed[i] = got
			}
		}
		if err != nil {
			ns.Error = err.Error()
		}
		return nil
	})
	// Drift, broken chains and faults in node order, as before.
	byNode := map[string]chainpath.Table{}
	// state is each node's State for its chains; a node in sync that
	// holds nothing (the plan puts nothing there) says nothing of them.
	state := map[string]string{}
	broken := map[string]bool{}
	for i, n := range nodes {
		byNode[n] = tables[i]
		got := observed[i]
		if got == nil {
			st.Nodes[i].State = StateUnknown
			state[n] = StateUnknown
			continue
		}
		d := Compute(got, c.Plan.Nodes[n])
		st.Nodes[i].State = nodeState(got, d)
		if st.Nodes[i].State != StateInSync || !holdsNothing(got) {
			state[n] = st.Nodes[i].State
		}
		if !d.Empty() {
			st.Drift[n] = len(d.Adds) + len(d.Deletes)
			for _, b := range brokenBy(c.Plan.Chains, d) {
				st.Broken = append(st.Broken, b)
				broken[b.Chain] = true
			}
		}
		var f []string
		for _, k := range kinds.Registry().Kinds() {
			f = append(f, got.Faults[k.Name()]...)
		}
		if len(f) > 0 {
			st.Faults[n] = f
		}
	}
	tr := chainpath.New(c.Plan.Links, byNode)
	for _, ch := range c.Plan.Chains {
		st.Chains = append(st.Chains, ChainStatus{Chain: ch, Path: tr.Chain(ch.Ingress, ch.Hops),
			State: chainState(ch.Nodes, state, broken[ch.Name])})
	}
	paths := map[string][]chainpath.Segment{}
	for _, cs := range st.Chains {
		paths[cs.Chain.Name] = cs.Path
	}
	st.MTU, st.MTUNotes = c.Headroom(ctx, paths)
	return st
}

// Summary counts a result's ops the way plan prints them: "+" adds, "~"
// in-place changes, "-" deletes.
type Summary struct {
	Add    int `json:"add"`
	Change int `json:"change"`
	Delete int `json:"delete"`
}

// Summary counts the result's ops by kind of change.
func (r *Result) Summary() Summary {
	var s Summary
	for _, d := range r.Diffs {
		for _, op := range d.Ops() {
			switch op.String()[0] {
			case '+':
				s.Add++
			case '-':
				s.Delete++
			default:
				s.Change++
			}
		}
	}
	return s
}

// String is the summary as plan prints it.
func (s Summary) String() string {
	return fmt.Sprintf("%d to add, %d to change, %d to delete", s.Add, s.Change, s.Delete)
}
