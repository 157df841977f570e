package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// counted is an in-memory node that counts the calls it gets.
type counted struct {
	*agenttest.Agent
	mu    *sync.Mutex
	calls map[string]int
}

func (c counted) hit() {
	c.mu.Lock()
	c.calls[c.Name]++
	c.mu.Unlock()
}
func (c counted) Observe(ctx context.Context, want *nodestate.Node) (*nodestate.Node, error) {
	c.hit()
	return c.Agent.Observe(ctx, want)
}
func (c counted) Execute(ctx context.Context, ops []agent.Op) (int, error) {
	c.hit()
	return c.Agent.Execute(ctx, ops)
}

// fabricDomain is a small generated 2-tier Clos domain (changed: one
// chain lost a service).
func fabricDomain(t *testing.T, changed bool) *config.Domain {
	t.Helper()
	y, err := lab.Fabric{Topology: "clos2", Nodes: 16, Summaries: true, PodLeaves: 4, Changed: changed}.YAML()
	if err != nil {
		t.Fatal(err)
	}
	d, err := config.Parse([]byte(y), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// apply runs one apply session over the fakes and returns the nodes it
// contacted, sorted.
func applyCounting(t *testing.T, d *config.Domain, agents map[string]agent.Agent, dir string, changedOnly bool, calls map[string]int) []string {
	t.Helper()
	for k := range calls {
		delete(calls, k)
	}
	s, err := Open(Options{Domain: d, Agents: agents, AppliedDir: dir, ChangedOnly: changedOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []string
	for n := range calls {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// apply --changed-only contacts only the nodes whose intent changed since
// the last recorded apply: none after an unchanged apply, exactly the
// nodes a one-chain change changes after one, every node without a record
// and the one node whose recorded digest differs.
func TestChangedOnlyContactsChangedNodes(t *testing.T) {
	d0, d1 := fabricDomain(t, false), fabricDomain(t, true)
	var mu sync.Mutex
	calls := map[string]int{}
	agents := map[string]agent.Agent{}
	for n := range d0.Nodes {
		agents[n] = counted{Agent: agenttest.New(n), mu: &mu, calls: calls}
	}
	dir := t.TempDir()
	if got := applyCounting(t, d0, agents, dir, true, calls); len(got) != len(d0.Nodes) {
		t.Fatalf("first apply (no record) contacted %d of %d nodes", len(got), len(d0.Nodes))
	}
	if got := applyCounting(t, d0, agents, dir, true, calls); len(got) != 0 {
		t.Fatalf("unchanged apply --changed-only contacted %v, want none", got)
	}
	if got := applyCounting(t, d0, agents, dir, false, calls); len(got) != len(d0.Nodes) {
		t.Fatalf("a plain apply contacted %d of %d nodes", len(got), len(d0.Nodes))
	}
	// The one-chain change: the nodes whose desired state changes (the
	// controller's diff of the two plans) are exactly those contacted.
	p0, err := plan.Build(d0)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := plan.Build(d1)
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for n := range p1.Nodes {
		if !controller.Compute(p0.Nodes[n], p1.Nodes[n]).Empty() {
			changed = append(changed, n)
		}
	}
	sort.Strings(changed)
	got := applyCounting(t, d1, agents, dir, true, calls)
	if len(changed) == 0 || len(changed) >= len(d1.Nodes) || !equal(got, changed) {
		t.Fatalf("one-chain change contacted %v, want the nodes it changes %v", got, changed)
	}
	// A record whose digest of one node differs from its intent: that
	// node is contacted (observed in full), no other.
	path := filepath.Join(dir, "domain-"+d1.Name+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec Applied
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Nodes["sp0"] = "stale"
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := applyCounting(t, d1, agents, dir, true, calls); !equal(got, []string{"sp0"}) {
		t.Fatalf("after sp0's digest changed, contacted %v, want [sp0]", got)
	}
	// chains[].oam is handed to the agents outside their intent: a change
	// of it (added, then removed) contacts every node, once.
	var chain string
	for name := range d1.Chains {
		chain = name
		break
	}
	for _, o := range []*config.ChainOAM{{Sample: 100}, nil} {
		d1.Chains[chain].OAM = o
		if got := applyCounting(t, d1, agents, dir, true, calls); len(got) != len(d1.Nodes) {
			t.Fatalf("chains[].oam set to %+v: contacted %d of %d nodes", o, len(got), len(d1.Nodes))
		}
		if got := applyCounting(t, d1, agents, dir, true, calls); len(got) != 0 {
			t.Fatalf("unchanged chains[].oam: contacted %v, want none", got)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A no-op apply --changed-only leaves the record of the last apply as it
// is (no write: it already says what is applied); an apply that changes
// the plan writes it again. (A plain no-op through agents that report
// digests: internal/cpbench TestPrivilegedDigestsObserveOnlyDrift.)
func TestNoOpKeepsRecord(t *testing.T) {
	d0, d1 := fabricDomain(t, false), fabricDomain(t, true)
	var mu sync.Mutex
	calls := map[string]int{}
	agents := map[string]agent.Agent{}
	for n := range d0.Nodes {
		agents[n] = counted{Agent: agenttest.New(n), mu: &mu, calls: calls}
	}
	dir := t.TempDir()
	applyCounting(t, d0, agents, dir, false, calls)
	path := filepath.Join(dir, "domain-"+d0.Name+".json")
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	applyCounting(t, d0, agents, dir, true, calls)
	if st, err := os.Stat(path); err != nil || !st.ModTime().Equal(old) {
		t.Fatalf("no-op apply --changed-only wrote the record again (%v)", err)
	}
	applyCounting(t, d1, agents, dir, true, calls)
	if st, err := os.Stat(path); err != nil || st.ModTime().Equal(old) {
		t.Fatalf("a one-chain change did not write the record (%v)", err)
	}
}

// A secret read from a file is part of the record's digest: after the
// key file changes, apply --changed-only contacts the nodes that install
// that key (and changes the key there); before, the record was the
// intent's JSON, which leaves secrets out, and no node was contacted.
func TestChangedOnlySeesSecretChange(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../examples/hmac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "hmac.yaml")
	key := filepath.Join(dir, "secrets", "k1.key")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		path, text string
	}{{file, string(b)}, {key, "first-secret-of-this-test-32-bytes-long\n"}} {
		if err := os.WriteFile(w.path, []byte(w.text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	load := func() *config.Domain {
		t.Helper()
		d, err := config.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := load()
	var mu sync.Mutex
	calls := map[string]int{}
	agents := map[string]agent.Agent{}
	for n := range d.Nodes {
		agents[n] = counted{Agent: agenttest.New(n), mu: &mu, calls: calls}
	}
	records := t.TempDir()
	applyCounting(t, d, agents, records, true, calls)
	if got := applyCounting(t, load(), agents, records, true, calls); len(got) != 0 {
		t.Fatalf("unchanged apply --changed-only contacted %v", got)
	}
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	var keyed []string
	for n, st := range p.Nodes {
		if len(st.HMACKeys) > 0 {
			keyed = append(keyed, n)
		}
	}
	sort.Strings(keyed)
	if len(keyed) == 0 {
		t.Fatal("no node installs the key")
	}
	if err := os.WriteFile(key, []byte("second-secret-of-this-test-32-bytes-long\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := applyCounting(t, load(), agents, records, true, calls); !equal(got, keyed) {
		t.Fatalf("apply --changed-only after the key file changed contacted %v, want the nodes with the key %v", got, keyed)
	}
	if got := applyCounting(t, load(), agents, records, true, calls); len(got) != 0 {
		t.Fatalf("the next apply --changed-only contacted %v", got)
	}
}
