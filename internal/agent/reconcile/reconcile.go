package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// WhoPrefix starts the name a reconcile gives itself (the lease holder
// other controllers are told about, and its journals' header).
const WhoPrefix = "segchain agent --reconcile"

// Who names node's reconcile in this process.
func Who(node string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s of node %s (pid %d on host %s)", WhoPrefix, node, os.Getpid(), host)
}

// Settle is how long a reconcile triggered by a link coming up waits for
// more links (a flap brings several up at once): segchain watch's.
const Settle = controller.Settle

// Timeout bounds one reconcile (observe, lock, lease, apply).
const Timeout = 2 * time.Minute

// Action is what one check decides.
type Action int

const (
	// Idle: nothing to check against (no intent yet, or it is
	// suspended while a controller changes the node).
	Idle Action = iota
	// InSync: the node is as its intent says.
	InSync
	// Repair: the node drifted; re-apply the intent.
	Repair
	// Skip: the node drifted, but re-applying is not for the agent to
	// do (a conflict with another owner, a kernel that cannot, a
	// controller's unfinished apply): only reported.
	Skip
)

func (a Action) String() string {
	return [...]string{"idle", "in sync", "repair", "skip"}[a]
}

// Decide is the reconcile's decision for one check: in is the stored
// intent (nil: none), d what the node's observed state lacks or has too
// much against it (controller.Compute, with Unsupported when probed),
// journal who wrote the node's unfinished journal ("" when there is none).
// The reason says why, for the log.
func Decide(in *Intent, d *controller.Diff, journal string) (Action, string) {
	switch {
	case in == nil:
		return Idle, "no intent: no apply has handed this agent one yet"
	case in.Superseded != "":
		return Idle, "intent suspended until a controller hands a new one: " + in.Superseded
	case d == nil || d.Empty():
		return InSync, "the node is as its intent"
	case len(d.Conflicts) > 0:
		return Skip, "conflicts with objects of another owner: " + strings.Join(d.Conflicts, "; ")
	case len(d.Unsupported) > 0:
		return Skip, "the node's kernel cannot install: " + strings.Join(d.Unsupported, "; ")
	case journal != "" && !strings.HasPrefix(journal, WhoPrefix):
		return Skip, "unfinished journal of " + journal + ": the next apply or destroy recovers it"
	}
	return Repair, fmt.Sprintf("%d change(s) drifted", len(d.Adds)+len(d.Deletes))
}

// Reconciler keeps one node at its last applied intent.
type Reconciler struct {
	Node  string
	Store *Store
	// Agent is the node's own implementation: observed through, and
	// asked the feature probe and room checks apply asks.
	Agent agent.Agent
	// Journal is the node's apply journal on this host (the agent's).
	Journal controller.Journal
	// Begin takes the node's lock (without waiting) and the agent's own
	// lease, and returns the agent to change the node through (its
	// Execute journals each op first: agent.Caps.JournalsEachOp) and the
	// function that gives both back. A controller's lease or a busy lock
	// is an error: the reconcile is skipped.
	Begin func(ctx context.Context) (agent.Agent, func(), error)
	// Interval between checks (link-up events trigger one at once).
	Interval time.Duration
	Log      *slog.Logger
	// Count, if set, counts the checks that found drift, by result:
	// "applied", "failed" or "skipped" (metrics).
	Count func(result string)
	// Checked, if set, is told every check's decision (metrics: a
	// test can wait for checks to have run instead of sleeping).
	Checked func(Action)

	last string // the last idle or skip reason logged (not repeated)
	// retry: the last check left the node drifted for a reason that may
	// pass by itself (the lock or the lease busy, observe or the
	// re-apply failed): Run checks again after a backoff, not only at
	// the next interval or link event.
	retry bool
}

// Backoff bounds of the retries after a check that left the node drifted
// (Reconciler.retry): RetryMin, doubling up to RetryMax (or the interval,
// if shorter). A node that stays broken is retried every RetryMax, never
// in a busy loop.
const (
	RetryMin = 500 * time.Millisecond
	RetryMax = 30 * time.Second
)

func (r *Reconciler) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

func (r *Reconciler) count(result string) {
	if r.Count != nil {
		r.Count(result)
	}
}

// note logs msg once per distinct reason, then at debug level.
func (r *Reconciler) note(level slog.Level, msg, reason string, args ...any) {
	if reason == r.last {
		level = slog.LevelDebug
	}
	r.last = reason
	r.log().Log(context.Background(), level, msg, append([]any{"reason", reason}, args...)...)
}

// Run checks at start, every Interval, and Settle after links come up
// (linkUps may be nil), until ctx ends. A check that leaves the node
// drifted for a reason that may pass (the node's lock or the agent's lease
// held by someone else, a failed observe or re-apply) is retried after
// RetryMin, doubling up to RetryMax: a link that comes up while a local
// segchain command holds the lock is still repaired when it lets go.
func (r *Reconciler) Run(ctx context.Context, linkUps <-chan string) {
	iv := r.Interval
	if iv <= 0 {
		iv = 30 * time.Second
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	maxBackoff := min(RetryMax, iv)
	backoff := RetryMin
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	// after schedules the retry of a check that left drift behind, with
	// a doubling backoff; a check that did not resets it.
	after := func() {
		if !r.retry {
			retry.Stop()
			backoff = RetryMin
			return
		}
		r.log().Info("reconcile: retry scheduled", "after", backoff)
		retry.Reset(backoff)
		backoff = min(2*backoff, maxBackoff)
	}
	r.log().Info("reconcile: on", "interval", iv)
	r.Once(ctx, "start")
	after()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Once(ctx, "interval")
			after()
		case <-retry.C:
			r.Once(ctx, "retry")
			after()
		case name, ok := <-linkUps:
			if !ok {
				linkUps = nil
				continue
			}
			names := []string{name}
			settle := time.NewTimer(Settle)
		gather:
			for {
				select {
				case n, ok := <-linkUps:
					if !ok {
						linkUps = nil
						break gather
					}
					names = append(names, n)
				case <-settle.C:
					break gather
				case <-ctx.Done():
					settle.Stop()
					return
				}
			}
			r.Once(ctx, "link up: "+strings.Join(names, ","))
			after()
		}
	}
}

// Once checks the node against its intent and, on drift, re-applies it.
// It returns what it decided (Repair: it re-applied, or tried; Skip also
// when the lock or lease was not to be had).
func (r *Reconciler) Once(ctx context.Context, trigger string) (act Action) {
	if r.Checked != nil {
		defer func() { r.Checked(act) }()
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	r.retry = false
	in := r.Store.Get()
	if in == nil || in.Superseded != "" {
		act, why := Decide(in, nil, "")
		r.note(slog.LevelInfo, "reconcile: idle", why, "trigger", trigger)
		return act
	}
	got, err := r.Agent.Observe(ctx, in.Want)
	if err != nil {
		r.note(slog.LevelWarn, "reconcile: observe failed", err.Error(), "trigger", trigger)
		r.retry = true
		return Skip
	}
	d := controller.Compute(got, in.Want)
	var who string
	if !d.Empty() {
		if _, who, err = r.Journal.Unfinished(r.Node); err != nil {
			r.note(slog.LevelWarn, "reconcile: journal unreadable", err.Error(), "trigger", trigger)
			r.count("skipped")
			return Skip
		}
	}
	act, why := Decide(in, &d, who)
	switch act {
	case InSync:
		r.last = ""
		r.log().Debug("reconcile: in sync", "trigger", trigger)
		return act
	case Skip:
		r.note(slog.LevelWarn, "reconcile: drift left alone", why, "trigger", trigger, "drift", OpLines(d.Ops()))
		r.count("skipped")
		return act
	}
	a, end, err := r.Begin(ctx)
	if err != nil {
		// A controller applying (its lease) or a local segchain command
		// (the lock) wins; the next check looks again.
		r.note(slog.LevelWarn, "reconcile: skipped", err.Error(), "trigger", trigger, "drift", OpLines(d.Ops()))
		r.count("skipped")
		r.retry = true
		return Skip
	}
	defer end()
	if r.Store.Get() != in {
		// A controller handed a new intent before this one took the
		// lease: the next check works from it.
		r.log().Info("reconcile: skipped, the intent changed meanwhile", "trigger", trigger)
		r.retry = true
		return Skip
	}
	r.last = ""
	r.log().Warn("reconcile: drift", "trigger", trigger, "intent_by", in.By, "intent_at", in.At, "nothing", in.Nothing(), "drift", OpLines(d.Ops()))
	// The controller's own apply, for this one node: recovery of its own
	// unfinished journal, observe, diff, feature and room checks,
	// make-before-break order, rollback on failure.
	c := &controller.Controller{
		Plan:    &plan.Plan{Domain: "intent of node " + r.Node, Nodes: map[string]*nodestate.Node{r.Node: in.Want}},
		Agents:  map[string]agent.Agent{r.Node: a},
		Journal: r.Journal,
	}
	start := time.Now()
	res, err := c.Apply(ctx, false)
	var applied []string
	var recovered []string
	if res != nil {
		for _, d := range res.Diffs {
			applied = append(applied, OpLines(d.Ops())...)
		}
		for _, rc := range res.Recovered {
			recovered = append(recovered, rc.String())
		}
	}
	if err != nil {
		r.log().Error("reconcile: re-apply failed", "trigger", trigger, "err", err, "rolled_back", res != nil && res.RolledBack,
			"recovered", recovered, "duration", time.Since(start))
		r.count("failed")
		r.retry = true
		return Repair
	}
	r.log().Info("reconcile: re-applied the intent", "trigger", trigger, "changes", len(applied), "applied", applied,
		"recovered", recovered, "duration", time.Since(start))
	r.count("applied")
	return Repair
}

// OpLines renders ops one line each, as plan prints their first line.
func OpLines(ops []agent.Op) []string {
	out := make([]string, 0, len(ops))
	for _, op := range ops {
		s := op.String()
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[:i]
		}
		out = append(out, s)
	}
	return out
}
