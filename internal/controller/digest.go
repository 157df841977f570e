package controller

import (
	"context"
	"sort"
	"sync"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// Incremental observation (docs/scale.md): an agent that can
// (agent.Caps.Digest) reports digests of its node's state and of the
// intent it keeps instead of the state itself. Where the state's digest
// equals the plan's, the node has nothing to change: its state is not
// fetched, nor its kernel's features probed; where the intent's does
// too, and nothing ran there, it is not handed the intent again. Only
// equality is a shortcut: any difference (drift, an old agent, an
// agent that cannot be reached) falls back to observing in full.

// digests are the answers of one apply's agents, by node.
type digests struct {
	mu sync.Mutex
	m  map[string]agent.Digests
}

// wantDigest is nodestate.Digest of the plan's state of node n, computed
// once per controller: a no-op compares it with each agent's state and
// intent and sends it as the expected digest (three uses a node), and
// the session records it (the record of the apply, PlanDigest).
func (c *Controller) wantDigest(n string) string {
	want := c.Plan.Nodes[n]
	if want == nil {
		return ""
	}
	c.statsMu.Lock()
	d, ok := c.wantDg[want]
	c.statsMu.Unlock()
	if ok {
		return d
	}
	// Outside the lock: the nodes' digests are computed in parallel.
	d = nodestate.Digest(want, want)
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	if old, ok := c.wantDg[want]; ok {
		return old // another goroutine's, the same
	}
	if c.wantDg == nil {
		c.wantDg = map[*nodestate.Node]string{}
	}
	c.wantDg[want] = d
	c.stats.PlanDigests++
	return d
}

// PlanDigest is nodestate.Digest(want, want) of the plan's state of node
// n ("" when the plan has no such node), computed once per controller.
func (c *Controller) PlanDigest(n string) string { return c.wantDigest(n) }

func (d *digests) get(n string) (agent.Digests, bool) {
	if d == nil {
		return agent.Digests{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := d.m[n]
	return g, ok
}

func (d *digests) drop(n string) {
	if d != nil {
		d.mu.Lock()
		delete(d.m, n)
		d.mu.Unlock()
	}
}

// digestAll asks every node in scope whose agent can for its digests,
// Concurrency at a time, and, with full, for the state of those whose
// digest differs from the plan's; a node that cannot answer is left out
// (it is observed in full, which reports its error).
func (c *Controller) digestAll(ctx context.Context, names []string, full bool) *digests {
	d := &digests{m: map[string]agent.Digests{}}
	c.each(ctx, names, func(ctx context.Context, _ int, n string) error {
		a := c.Agents[n]
		if a == nil || a.Caps().Digest == nil {
			return nil
		}
		g, err := a.Caps().Digest.ObserveDigest(ctx, c.Plan.Nodes[n], c.wantDigest(n), full)
		if err == nil {
			d.mu.Lock()
			d.m[n] = g
			d.mu.Unlock()
		}
		c.noteKeptOAM(n, g.KeptOAM)
		return nil
	})
	return d
}

// noteKeptOAM records the digest of the OAM set node n's agent keeps, as
// it answered a digest request ("" on an error: unknown).
func (c *Controller) noteKeptOAM(n, dg string) {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	if c.keptOAM == nil {
		c.keptOAM = map[string]string{}
	}
	c.keptOAM[n] = dg
}

// KeptOAM is the digest of the OAM set node n's agent said it keeps when
// this controller last asked for its digests (agent.Digests.KeptOAM),
// "" when it was not asked or could not say. What an agent keeps changes
// only by the OAM service's Keep (or the agent's restart, after which it
// reports the empty set's): apply hands the set again only where this
// differs from the set's digest (oamsvc.Keep).
func (c *Controller) KeptOAM(n string) string {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	return c.keptOAM[n]
}

// inSync: the node's state digest equals its plan's.
func (c *Controller) inSync(d *digests, n string) bool {
	g, ok := d.get(n)
	want := c.Plan.Nodes[n]
	return ok && !g.Unfinished && want != nil && g.State == c.wantDigest(n)
}

// intentKept: the node's agent keeps the plan's intent.
func (c *Controller) intentKept(d *digests, n string) bool {
	g, ok := d.get(n)
	want := c.Plan.Nodes[n]
	return ok && want != nil && g.Intent != "" && g.Intent == c.wantDigest(n)
}

// Unchanged reports whether every node in scope is as planned, keeps the
// plan as its intent and has no unfinished journal, by the digests of
// their agents alone: an apply would change nothing, and hand nothing.
// It takes no lock or lease (it changes nothing); false when any node's
// agent cannot say (no agent.Caps.Digest, unreachable, an older agent).
// Diffs are then the nodes' empty diffs.
func (c *Controller) Unchanged(ctx context.Context) (bool, []Diff) {
	names := c.nodes()
	for _, n := range names {
		if a := c.Agents[n]; a == nil || a.Caps().Digest == nil {
			return false, nil
		}
	}
	d := c.digestAll(ctx, names, false)
	diffs := make([]Diff, len(names))
	for i, n := range names {
		if !c.inSync(d, n) || !c.intentKept(d, n) {
			return false, nil
		}
		diffs[i] = Diff{Node: n}
	}
	c.countDigests(len(names))
	return true, diffs
}

// KeptUnchanged is Unchanged without a plan: every node of expect (its
// intent's digest as of the last apply, whose inputs are this command's:
// docs/scale.md, "Session 16") is asked, by its agent's KeptDigester, to
// observe against the intent it keeps if that intent's digest is the one
// expected. True when every one did, its state's digest is that too and
// its journal has nothing unfinished: an apply would change nothing, and
// hand nothing. False at the first doubt — an agent without the
// capability (in-process, older), unreachable, keeping no intent or
// another, an unfinished journal, drift — and the caller then plans and
// applies as ever; drift says that an agent answered against the intent
// expected and its node differs from it (or its journal is unfinished). It takes no lock or lease and needs no Plan (the
// Agents of every node of expect); Diffs are the nodes' empty diffs.
func (c *Controller) KeptUnchanged(ctx context.Context, expect map[string]string) (ok, drift bool, diffs []Diff) {
	names := make([]string, 0, len(expect))
	for n, dg := range expect {
		if a := c.Agents[n]; a == nil || a.Caps().Kept == nil || dg == "" {
			return false, false, nil
		}
		names = append(names, n)
	}
	sort.Strings(names)
	var mu sync.Mutex
	ok = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.each(ctx, names, func(ctx context.Context, _ int, n string) error {
		g, err := c.Agents[n].Caps().Kept.ObserveKeptDigest(ctx, expect[n])
		c.noteKeptOAM(n, g.KeptOAM)
		if err != nil || !g.Kept || g.Unfinished || g.State != expect[n] || g.Intent != expect[n] {
			mu.Lock()
			ok = false
			// The node answered against the intent expected and
			// differs from it (or its journal is unfinished): the
			// plan's digests would say no as well.
			drift = drift || err == nil && g.Kept && g.Intent == expect[n]
			mu.Unlock()
			cancel() // the answer is no: the others need not be asked
		}
		return nil
	})
	if !ok {
		return false, drift, nil
	}
	diffs = make([]Diff, len(names))
	for i, n := range names {
		diffs[i] = Diff{Node: n}
	}
	c.statsMu.Lock()
	c.stats.Digest += len(names)
	c.stats.Kept += len(names)
	c.stats.PlanSkipped = true
	c.statsMu.Unlock()
	return true, false, diffs
}

// ObserveCounts is how many nodes a controller observed in full and how
// many by their digests alone (tests, benchmarks).
type ObserveCounts struct {
	Full   int `json:"full"`
	Digest int `json:"digest"`
	// PlanDigests is how many times the plan's digest of a node was
	// computed (once per node: wantDigest).
	PlanDigests int `json:"plan_digests"`
	// Kept is how many nodes were found unchanged against the intents
	// their agents keep (KeptUnchanged), PlanSkipped whether the command
	// did so without a plan (docs/scale.md, "Session 16").
	Kept        int  `json:"kept,omitempty"`
	PlanSkipped bool `json:"plan_skipped,omitempty"`
}

func (c *Controller) countDigests(n int) {
	c.statsMu.Lock()
	c.stats.Digest += n
	c.statsMu.Unlock()
}

func (c *Controller) countFull() {
	c.statsMu.Lock()
	c.stats.Full++
	c.statsMu.Unlock()
}

// Observed is how many nodes the controller observed so far, in full and
// by digest alone.
func (c *Controller) Observed() ObserveCounts {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	return c.stats
}
