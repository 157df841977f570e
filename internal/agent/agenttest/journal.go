package agenttest

import (
	"slices"
	"sort"
	"sync"

	"github.com/segchain/segchain/internal/agent"
)

// Journal is an agent.Journal in memory, safe for the controller's
// parallel use.
type Journal struct {
	// Who names the command a node's journal was started by (taken at
	// its first Record after a Clear).
	Who string

	mu      sync.Mutex
	ops     map[string][]agent.Op
	who     map[string]string
	cleared []string
}

// NewJournal is an empty journal whose commands are "pid 1 (segchain
// apply)".
func NewJournal() *Journal {
	return &Journal{Who: "pid 1 (segchain apply)", ops: map[string][]agent.Op{}, who: map[string]string{}}
}

// Record implements agent.Journal.
func (j *Journal) Record(node string, op agent.Op) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.ops[node]; !ok {
		j.who[node] = j.Who
	}
	j.ops[node] = append(j.ops[node], op)
	return nil
}

// Clear implements agent.Journal.
func (j *Journal) Clear(node string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.ops, node)
	delete(j.who, node)
	j.cleared = append(j.cleared, node)
	return nil
}

// Unfinished implements agent.Journal.
func (j *Journal) Unfinished(node string) ([]agent.Op, string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ops, ok := j.ops[node]
	if !ok {
		return nil, "", nil
	}
	return slices.Clone(ops), j.who[node], nil
}

// Leave puts a journal of node on record as a command named who left it
// when it was killed.
func (j *Journal) Leave(node, who string, ops ...agent.Op) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ops[node] = slices.Clone(ops)
	j.who[node] = who
}

// Nodes returns the nodes that have a journal, sorted.
func (j *Journal) Nodes() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for n := range j.ops {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Cleared returns the nodes whose journal was cleared, in order.
func (j *Journal) Cleared() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.cleared)
}
