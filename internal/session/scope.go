package session

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// AppliedDir holds, per domain (and lab), the digest of every node's
// intent as of the last successful apply: apply --changed-only contacts
// only the nodes whose intent differs from it.
const AppliedDir = lab.AppliedDir

// Applied is the record of the last successful apply of a domain.
type Applied struct {
	Domain string `json:"domain"`
	// Nodes maps each node to the digest of its intent (IntentDigest).
	// Before session 14 it was a digest of the intent's JSON: such a
	// record differs on every node, so the first --changed-only apply
	// after an upgrade contacts every node (and the record is rewritten).
	Nodes map[string]string `json:"nodes"`
	// OAM is the digest of the chains' kept OAM (OAMDigest), which apply
	// hands the agents outside their intent.
	OAM string `json:"oam,omitempty"`
	// Input is the digest of everything the plan was a function of
	// (the build, the domain file's bytes, the files it names, the lab:
	// inputDigest, noop.go), "" when it could not be said: a command
	// whose inputs have this digest would make the same plan, so a no-op
	// apply checks the agents against the intents they keep without
	// planning (docs/scale.md, "Session 16").
	Input string `json:"input,omitempty"`
}

// OAMDigest is the digest of every chain's chains[].oam ("" when no chain
// has one): a change of it reaches nodes whose intent stays the same, so
// apply --changed-only then contacts every node.
func OAMDigest(d *config.Domain) string {
	oams := map[string]*config.ChainOAM{}
	for name, c := range d.Chains {
		if c != nil && c.OAM != nil && *c.OAM != (config.ChainOAM{}) {
			oams[name] = c.OAM
		}
	}
	if len(oams) == 0 {
		return ""
	}
	b, _ := json.Marshal(oams) // map keys sorted
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:12])
}

// IntentDigest is the digest of a node's desired state: nodestate.Digest
// of it against itself, the digest the controller compares with the
// agents' (the state they observe, the intent they keep). It covers what
// an apply would change on the node — HMAC keys' secrets included, which
// the intent's JSON (the record's digest before session 14) leaves out:
// a secret read from a file that changed went unseen by --changed-only —
// and is the controller's own (Controller.PlanDigest): a no-op computes
// each node's once, where the JSON was 6 % of its CPU at 250 nodes.
func IntentDigest(n *nodestate.Node) string { return nodestate.Digest(n, n) }

// records: the session keeps the record of its applies (not a test's
// fake agents', unless it names a directory).
func (s *Session) records() bool { return s.opts.Agents == nil || s.opts.AppliedDir != "" }

// appliedPath is where the record of the session's domain (in its lab,
// if any) is kept.
func (s *Session) appliedPath() string {
	name := "domain-" + s.Domain.Name // the plan's Domain
	if s.Lab != nil {
		name = "lab-" + s.Lab.Name + "-" + s.Domain.Name
	}
	return filepath.Join(cmp.Or(s.opts.AppliedDir, AppliedDir), name+".json")
}

// ChangedNodes are the plan's nodes whose intent differs from the record
// (all of them when there is none), sorted.
func ChangedNodes(p *plan.Plan, rec *Applied) []string {
	return changedNodes(intentDigests(p, func(n string) string { return IntentDigest(p.Nodes[n]) }), rec)
}

func changedNodes(digests map[string]string, rec *Applied) []string {
	var out []string
	for n, d := range digests {
		if rec == nil || rec.Nodes[n] != d {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// intentDigests is digest (IntentDigest) of every node of p, on every
// core: a no-op apply needs them before it asks its agents.
func intentDigests(p *plan.Plan, digest func(node string) string) map[string]string {
	names := make([]string, 0, len(p.Nodes))
	for n := range p.Nodes {
		names = append(names, n)
	}
	dg := make([]string, len(names))
	workers := min(runtime.GOMAXPROCS(0), len(names)/64+1)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(names); i += workers {
				dg[i] = digest(names[i])
			}
		}(w)
	}
	wg.Wait()
	out := make(map[string]string, len(names))
	for i, n := range names {
		out[n] = dg[i]
	}
	return out
}

// intents is intentDigests of the session's plan, computed once: a
// command reads the record and writes it again, and each needs every
// node's. They are the controller's digests of the plan (PlanDigest),
// which it also compares with the agents': each node's is computed once
// per command.
func (s *Session) intents() map[string]string {
	if s.intentDg == nil {
		s.intentDg = intentDigests(s.Plan, s.planCtl.PlanDigest)
	}
	return s.intentDg
}

func readApplied(path string) (*Applied, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var a Applied
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it, or apply without --changed-only)", path, err)
	}
	return &a, nil
}

// changedScope is the nodes whose intent changed since the last recorded
// apply (all of them without a record): only those are given an agent,
// locked, leased, preflighted, observed and changed.
func (s *Session) changedScope() (map[string]bool, error) {
	rec, err := readApplied(s.appliedPath())
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.OAM != OAMDigest(s.Domain) {
		fmt.Fprintln(s.log, "segchain: --changed-only: chains[].oam changed since the last apply: every node")
		rec = nil
	}
	scope := map[string]bool{}
	for _, n := range changedNodes(s.intents(), rec) {
		scope[n] = true
	}
	fmt.Fprintf(s.log, "segchain: --changed-only: %d of %d node(s) changed since the last apply\n", len(scope), len(s.Plan.Nodes))
	return scope, nil
}

// narrow restricts the controller to the scope (s.only): the agents the
// caller handed (Options.Agents) too, the session's own were made for
// the scope alone.
func (s *Session) narrow() {
	s.ctl.Scope = s.only
	// A new map: the caller's (Options.Agents) stays whole.
	agents := map[string]agent.Agent{}
	for n, a := range s.ctl.Agents {
		if s.only[n] {
			agents[n] = a
		}
	}
	s.ctl.Agents = agents
}

// recordApplied writes the record after a successful apply (every node as
// planned: the nodes in scope were just brought there, the others were
// by the apply recorded before). A record that says so already is left
// as it is (a no-op apply writes nothing).
func (s *Session) recordApplied() error {
	rec := &Applied{Domain: s.Plan.Domain, Nodes: s.intents(), OAM: OAMDigest(s.Domain), Input: s.input}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(s.appliedPath()); err == nil && bytes.Equal(old, b) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.appliedPath()), 0o755); err != nil {
		return err
	}
	path := s.appliedPath()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// forgetApplied removes the record (after a destroy, or a failed apply:
// the next --changed-only apply then contacts every node).
func (s *Session) forgetApplied() {
	os.Remove(s.appliedPath())
	if s.src != nil {
		os.Remove(s.keptInputsPath(s.src.path)) // what a no-op kept of it (unparsed.go)
	}
}
