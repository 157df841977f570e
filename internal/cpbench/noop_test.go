package cpbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/session"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// A no-op needs no plan (docs/scale.md, "Session 16"), against real
// agents over gRPC in a 16-node Clos fabric in namespaces: after an
// apply, a no-op apply (as segchain apply opens it) makes no plan and
// asks each agent to observe against the intent it keeps; a route
// deleted by hand is still found (the agent's digest against its kept
// intent differs), the command then plans and mends that node alone; an
// agent handed another intent makes the command plan and hand it the
// plan's again; an edited domain file (a comment: the same plan) makes
// it plan; each time the next no-op skips the plan again.
func TestPrivilegedNoOpWithoutPlan(t *testing.T) {
	y, err := lab.Fabric{Topology: "clos3", Nodes: 16, Summaries: true, PodLeaves: 2, Spines: 2, Supers: 1}.YAML()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "fabric.yaml")
	if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	l := labenv.New(t, labenv.Options{Domain: d, Prefix: "s16a"}).Lab
	ex, agents, _ := realAgents(t, p, l)
	records := t.TempDir()
	type outcome struct {
		notPlanned bool
		kept, full int
		changed    []string
		executed   map[string]int
	}
	apply := func(what string) outcome {
		t.Helper()
		s, err := session.Open(session.Options{File: file, Agents: agents, AppliedDir: records, NoOpFirst: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.Apply(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var o outcome
		for _, df := range res.Diffs {
			if !df.Empty() {
				o.changed = append(o.changed, df.Node)
			}
		}
		obs := s.Controller().Observed()
		o.notPlanned, o.kept, o.full, o.executed = res.NotPlanned, obs.Kept, obs.Full, ex.take()
		if res.NotPlanned != (s.Plan == nil) || res.NotPlanned != obs.PlanSkipped {
			t.Fatalf("%s: not planned %v, yet the session's plan is %v and the controller's plan skipped %v", what, res.NotPlanned, s.Plan != nil, obs.PlanSkipped)
		}
		return o
	}
	noOp := func(what string) {
		t.Helper()
		if o := apply(what); !o.notPlanned || o.kept != len(p.Nodes) || o.full != 0 || len(o.changed) != 0 || len(o.executed) != 0 {
			t.Fatalf("%s: not planned %v (want true), %d node(s) kept (want %d), %d observed in full, changed %v, executed on %v",
				what, o.notPlanned, o.kept, len(p.Nodes), o.full, o.changed, o.executed)
		}
	}
	if o := apply("apply from scratch"); o.notPlanned || len(o.changed) != len(p.Nodes) {
		t.Fatalf("apply from scratch: not planned %v, changed %d node(s), want %d", o.notPlanned, len(o.changed), len(p.Nodes))
	}
	noOp("no-op apply")
	noOp("second no-op apply")

	// Drift of the kernel's state: a leaf loses one of its summary routes.
	leaf := "l1"
	lost, restored := loseSummaryRoute(t, p, l, leaf)
	if o := apply("apply after drift"); o.notPlanned || o.full != 1 || fmt.Sprint(o.changed) != "["+leaf+"]" || len(o.executed) != 1 || o.executed[leaf] == 0 {
		t.Fatalf("apply after %s lost %s: not planned %v (want false), %d node(s) observed in full (want 1), changed %v, executed on %v (want %s alone)",
			leaf, lost, o.notPlanned, o.full, o.changed, o.executed, leaf)
	}
	if !restored() {
		t.Fatalf("%s's route %s not restored", leaf, lost)
	}
	noOp("no-op apply after the repair")

	// Drift of the intent: the leaf's agent is handed another intent (a
	// route fewer) than the last apply's.
	other := *p.Nodes[leaf]
	other.Routes = other.Routes[1:]
	if err := agents[leaf].(counted).Client.SetIntent(context.Background(), &other); err != nil {
		t.Fatal(err)
	}
	if o := apply("apply after another intent was handed"); o.notPlanned || len(o.changed) != 0 || len(o.executed) != 0 {
		t.Fatalf("apply after %s's agent was handed another intent: not planned %v (want false), changed %v, executed on %v",
			leaf, o.notPlanned, o.changed, o.executed)
	}
	noOp("no-op apply after the intent was handed again")

	// The domain file edited (a comment: the same plan, other bytes).
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "# edited")
	f.Close()
	if o := apply("apply after the file was edited"); o.notPlanned || len(o.changed) != 0 || len(o.executed) != 0 {
		t.Fatalf("apply after the domain file was edited: not planned %v (want false), changed %v, executed on %v", o.notPlanned, o.changed, o.executed)
	}
	noOp("no-op apply after the edit")
}
