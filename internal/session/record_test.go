package session

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/config"
)

// recordWatcher is an in-memory node that notes, each time it is
// changed, whether a record of the last apply exists at that moment.
type recordWatcher struct {
	*agenttest.Agent
	path string
	mu   *sync.Mutex
	seen *[]string
}

func (r recordWatcher) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	if _, err := os.Stat(r.path); err == nil {
		r.mu.Lock()
		*r.seen = append(*r.seen, r.Name)
		r.mu.Unlock()
	}
	return r.Agent.Execute(ctx, ops)
}

// While an apply changes nodes, no record may claim the previous intent:
// an apply killed (-9) there leaves its nodes anywhere between the two
// intents, and a later apply --changed-only of the previous file would
// then compare it with that record, find nothing changed and contact no
// node (its journal never undone). The record is dropped before the
// first change and written again only after a successful apply.
func TestNoRecordWhileChanging(t *testing.T) {
	d0, d1 := fabricDomain(t, false), fabricDomain(t, true)
	dir := t.TempDir()
	path := filepath.Join(dir, "domain-"+d0.Name+".json")
	var mu sync.Mutex
	var seen []string
	agents := map[string]agent.Agent{}
	for n := range d0.Nodes {
		agents[n] = recordWatcher{Agent: agenttest.New(n), path: path, mu: &mu, seen: &seen}
	}
	for _, step := range []struct {
		name string
		dom  *config.Domain
	}{{"first", d0}, {"changed", d1}, {"back", d0}} {
		s, err := Open(Options{Domain: step.dom, Agents: agents, AppliedDir: dir, ChangedOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("%s apply: no record after it succeeded: %v", step.name, err)
		}
		if len(seen) > 0 {
			t.Fatalf("%s apply: nodes %v were changed while the record of the previous apply still claimed them", step.name, seen)
		}
	}
}
