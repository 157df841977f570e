package session

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/agenttest"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
)

// inSync is an in-memory node whose agent says, to a kept-intent digest
// request, that it keeps the intent expected and its node is in sync
// with it (the controller's side of the no-op without a plan is what is
// tested here; the agent's is in internal/cpbench).
type inSync struct {
	*agenttest.Agent
	mu    *sync.Mutex
	asked *int
}

func (a inSync) Caps() agent.Caps { return agent.Caps{Kept: a} }

func (a inSync) ObserveKeptDigest(_ context.Context, expect string) (agent.Digests, error) {
	a.mu.Lock()
	*a.asked++
	a.mu.Unlock()
	return agent.Digests{Kept: true, State: expect, Intent: expect}, nil
}

// copyExample copies examples/NAME and the files it names into a new
// directory: the domain file's path there.
func copyExample(t *testing.T, name string, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range append([]string{name}, files...) {
		b, err := os.ReadFile(filepath.Join("../../examples", f))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, name)
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// editRecord rewrites the record of the apply through edit.
func editRecord(t *testing.T, path string, edit func(a *Applied)) {
	t.Helper()
	a, err := readApplied(path)
	if err != nil || a == nil {
		t.Fatalf("record %s: %v", path, err)
	}
	edit(a)
	b, _ := json.Marshal(a)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A no-op apply skips the plan only when everything the plan is a
// function of is as it was at the last recorded apply: the domain file's
// bytes, every file it names (an HMAC secret, a netfilter rule set), the
// build, the record itself (present, readable, naming every node of the
// domain and no other); a dry run and --changed-only always plan.
// Without the input digest (or with it ignored) the changed cases skip
// the plan too.
func TestNoOpWithoutPlanOnlyForSameInputs(t *testing.T) {
	type env struct {
		file, records, record, inputs string
		o                             Options
	}
	cases := []struct {
		name    string
		example string
		files   []string
		change  func(t *testing.T, e *env)
		skip    bool // the plan is skipped
		parsed  bool // and the domain parsed all the same (unparsed.go)
	}{
		{name: "unchanged", skip: true},
		{name: "unchanged netfilter domain", example: "netfilter.yaml", files: []string{"netfilter.nft"}, skip: true},
		{name: "domain file edited", change: func(t *testing.T, e *env) { appendFile(t, e.file, "\n# edited\n") }},
		{name: "secret file changed", change: func(t *testing.T, e *env) {
			if err := os.WriteFile(filepath.Join(filepath.Dir(e.file), "secrets", "k1.key"), []byte("another-secret-of-this-test-32-bytes-long\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "nft rule set changed", example: "netfilter.yaml", files: []string{"netfilter.nft"}, change: func(t *testing.T, e *env) {
			appendFile(t, filepath.Join(filepath.Dir(e.file), "netfilter.nft"), "\n# edited\n")
		}},
		{name: "another build", change: func(t *testing.T, e *env) { e.o.identity = "another build" }},
		{name: "record missing", change: func(t *testing.T, e *env) { os.Remove(e.record) }},
		{name: "record corrupted", change: func(t *testing.T, e *env) {
			if err := os.WriteFile(e.record, []byte(`{"domain":`), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "record without inputs", change: func(t *testing.T, e *env) { editRecord(t, e.record, func(a *Applied) { a.Input = "" }) }},
		{name: "node missing from record", change: func(t *testing.T, e *env) {
			editRecord(t, e.record, func(a *Applied) {
				for n := range a.Nodes {
					delete(a.Nodes, n)
					break
				}
			})
		}},
		{name: "node only in record", change: func(t *testing.T, e *env) {
			editRecord(t, e.record, func(a *Applied) { a.Nodes["gone"] = a.Nodes[slices.Sorted(mapKeys(a.Nodes))[0]] })
		}},
		{name: "inputs not kept", skip: true, parsed: true, change: func(t *testing.T, e *env) { os.Remove(e.inputs) }},
		{name: "inputs kept corrupted", skip: true, parsed: true, change: func(t *testing.T, e *env) {
			if err := os.WriteFile(e.inputs, []byte(`{"input":`), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "inputs kept without the files named", skip: true, parsed: true, change: func(t *testing.T, e *env) {
			editInputs(t, e.inputs, func(k *keptInputs) { k.Files = nil })
		}},
		{name: "inputs kept with another digest", skip: true, parsed: true, change: func(t *testing.T, e *env) {
			editInputs(t, e.inputs, func(k *keptInputs) { k.Input = "another" })
		}},
		{name: "dry run", change: func(t *testing.T, e *env) { e.o.DryRun = true }},
		{name: "changed-only", change: func(t *testing.T, e *env) { e.o.ChangedOnly = true }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			example, files := tc.example, tc.files
			if example == "" {
				example, files = "hmac.yaml", []string{"secrets/k1.key"}
			}
			e := &env{file: copyExample(t, example, files...), records: t.TempDir()}
			d, err := LoadDomain(e.file)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			asked := 0
			agents := map[string]agent.Agent{}
			for n := range d.Nodes {
				agents[n] = inSync{Agent: agenttest.New(n), mu: &mu, asked: &asked}
			}
			e.record = filepath.Join(e.records, "domain-"+d.Name+".json")
			e.o = Options{File: e.file, Agents: agents, AppliedDir: e.records, NoOpFirst: true}
			// The first apply plans (no record) and records its inputs.
			s, err := Open(e.o)
			if err != nil {
				t.Fatal(err)
			}
			if s.Plan == nil {
				t.Fatal("the first apply (no record) made no plan")
			}
			if _, err := s.Apply(context.Background()); err != nil {
				t.Fatal(err)
			}
			s.Close()
			e.inputs = s.keptInputsPath(s.src.path)
			if _, err := os.Stat(e.inputs); err != nil {
				t.Fatalf("the apply kept no inputs: %v", err)
			}
			if tc.change != nil {
				tc.change(t, e)
			}
			s, err = Open(e.o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if skipped := s.Plan == nil; skipped != tc.skip {
				t.Fatalf("plan skipped: %v, want %v", skipped, tc.skip)
			}
			if !tc.skip {
				if s.unparsed {
					t.Fatal("planned an unparsed domain")
				}
				return
			}
			if s.unparsed == tc.parsed {
				t.Fatalf("domain left unparsed: %v, want %v", s.unparsed, !tc.parsed)
			}
			res, err := s.Apply(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !res.NotPlanned || res.Changes() != 0 || len(res.Diffs) != len(d.Nodes) || asked != len(d.Nodes) {
				t.Fatalf("no-op without a plan: not planned %v, %d change(s), %d diff(s), %d agent(s) asked, want every one of %d",
					res.NotPlanned, res.Changes(), len(res.Diffs), asked, len(d.Nodes))
			}
			if o := s.Controller().Observed(); !o.PlanSkipped || o.Kept != len(d.Nodes) {
				t.Fatalf("observed %+v, want the plan skipped and %d node(s) kept", o, len(d.Nodes))
			}
		})
	}
}

// editInputs rewrites the inputs kept for a no-op without a parse.
func editInputs(t *testing.T, path string, edit func(k *keptInputs)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var k keptInputs
	if err := json.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	edit(&k)
	if b, err = json.Marshal(k); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// An agent that does not keep the intent expected (another, or none)
// makes the no-op plan and apply as ever: the intent handed again.
func TestNoOpPlansWhenIntentDiffers(t *testing.T) {
	file := copyExample(t, "hmac.yaml", "secrets/k1.key")
	d, err := LoadDomain(file)
	if err != nil {
		t.Fatal(err)
	}
	records := t.TempDir()
	var mu sync.Mutex
	asked := 0
	agents := map[string]agent.Agent{}
	for n := range d.Nodes {
		agents[n] = inSync{Agent: agenttest.New(n), mu: &mu, asked: &asked}
	}
	odd := slices.Sorted(func(yield func(string) bool) {
		for n := range d.Nodes {
			if !yield(n) {
				return
			}
		}
	})[0]
	unparsed := false
	apply := func() *Session {
		t.Helper()
		s, err := Open(Options{File: file, Agents: agents, AppliedDir: records, NoOpFirst: true})
		if err != nil {
			t.Fatal(err)
		}
		unparsed = s.unparsed
		if _, err := s.Apply(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Close()
		return s
	}
	apply()
	agents[odd] = otherIntent{agents[odd].(inSync)}
	// Opened without a parse (the inputs are the record's), it parses
	// the file before it plans.
	if s := apply(); s.Plan == nil || !unparsed || s.unparsed || len(s.Domain.Chains) == 0 {
		t.Fatalf("node %s keeps another intent: planned %v, opened unparsed %v, parsed then %v (%d chains)",
			odd, s.Plan != nil, unparsed, !s.unparsed, len(s.Domain.Chains))
	}
	agents[odd] = agents[odd].(otherIntent).inSync
	if s := apply(); s.Plan != nil {
		t.Fatal("every node keeps its intent again: the no-op planned")
	}
}

// otherIntent keeps another intent than the one expected.
type otherIntent struct{ inSync }

func (a otherIntent) Caps() agent.Caps { return agent.Caps{Kept: a} }

func (a otherIntent) ObserveKeptDigest(_ context.Context, expect string) (agent.Digests, error) {
	return agent.Digests{Intent: "another"}, nil
}

// domainFiles finds every file a domain names, a service kind's block's
// included.
func TestDomainFiles(t *testing.T) {
	d := &config.Domain{
		Dir:      "/etc/segchain",
		Security: config.Security{HMAC: map[string]*config.HMACKey{"k": {SecretFile: "k.key"}}},
		Services: map[string]*config.Service{
			"fw": {Firewall: &config.Firewall{RulesFile: "/abs/fw.rules"}},
		},
	}
	got := domainFiles(d)
	want := []string{"/abs/fw.rules", "/etc/segchain/k.key"}
	if !slices.Equal(got, want) {
		t.Fatalf("domainFiles = %v, want %v", got, want)
	}
	nf, err := LoadDomain(copyExample(t, "netfilter.yaml", "netfilter.nft"))
	if err != nil {
		t.Fatal(err)
	}
	if got := domainFiles(nf); len(got) != 1 || filepath.Base(got[0]) != "netfilter.nft" {
		t.Fatalf("netfilter domain's files: %v, want its rule set", got)
	}
}

// Everything plan.Build and config's loader read besides the Domain is
// in the input digest (inputDigest's comment lists it): the files they
// open are the domain file and the files the domain names by a "_file"
// or "ruleset" key, and they read no environment. A new file read or
// environment variable in a package the plan depends on fails this test
// until inputDigest covers it and the list below names it.
func TestPlanInputsKnown(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}={{.Dir}}{{end}}", "../plan").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	known := map[string]int{
		"internal/config/load.go":             1, // the domain file
		"internal/config/resolve.go":          1, // security.hmac.*.secret_file
		"internal/config/limits.go":           1, // the domain file's size
		"internal/service/firewall/config.go": 1, // rules_file
		"internal/service/netfilter/kind.go":  1, // ruleset
		// Reference files and ParseFile: config uses neither (it parses
		// the bytes it was given: yamlpos.go).
		"github.com/goccy/go-yaml/decode.go":        1,
		"github.com/goccy/go-yaml/parser/parser.go": 1,
	}
	re := regexp.MustCompile(`\bos\.(ReadFile|Open|OpenFile|ReadDir|Stat|Lstat|Getenv|LookupEnv|Environ|Getwd|Hostname)\(|\btime\.Now\(|math/rand|crypto/rand`)
	got := map[string]int{}
	for _, line := range strings.Fields(string(out)) {
		pkg, dir, _ := strings.Cut(line, "=")
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(re.FindAll(b, -1)); n > 0 {
				got[strings.TrimPrefix(pkg, "github.com/segchain/segchain/")+"/"+filepath.Base(f)] = n
			}
		}
	}
	if !maps.Equal(got, known) {
		t.Fatalf("files of the plan's dependencies that read files, the environment, the clock or randomness: %v, want %v: add the new input to inputDigest (noop.go) and here", got, known)
	}
}

// TestDestroyForgetsKeptInputs: what a no-op keeps of a domain it does
// not parse goes with the record: a destroy removes both (before, the
// inputs file stayed, one per domain file and lab, for good).
func TestDestroyForgetsKeptInputs(t *testing.T) {
	file, records := copyExample(t, "hmac.yaml", "secrets/k1.key"), t.TempDir()
	d, err := LoadDomain(file)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	asked := 0
	agents := map[string]agent.Agent{}
	for n := range d.Nodes {
		agents[n] = inSync{Agent: agenttest.New(n), mu: &mu, asked: &asked}
	}
	o := Options{File: file, Agents: agents, AppliedDir: records, NoOpFirst: true}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	inputs := s.keptInputsPath(s.src.path)
	if _, err := os.Stat(inputs); err != nil {
		t.Fatalf("the apply kept no inputs: %v", err)
	}
	o.NoOpFirst = false
	if s, err = Open(o); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(records, "*"))
	if len(left) != 0 {
		t.Errorf("after destroy the records' directory holds %v, want nothing", left)
	}
}

// TestKeptInputsNamedAsTheLabsRecords: a lab's kept inputs carry the
// prefix lab down removes the lab's records by (lab-NAME-).
func TestKeptInputsNamedAsTheLabsRecords(t *testing.T) {
	s := &Session{Lab: &lab.Lab{Name: "s17x"}, opts: Options{AppliedDir: "/r"}}
	if p := s.keptInputsPath("/d/default.yaml"); !strings.HasPrefix(p, "/r/lab-s17x-") {
		t.Errorf("a lab's kept inputs at %s, want /r/lab-s17x-…", p)
	}
}
