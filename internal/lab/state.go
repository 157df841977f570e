package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/nsutil"
)

// StateDir holds one JSON state file per lab.
const StateDir = "/run/segchain/labs"

var (
	// ErrExists is returned by Up when the lab or one of its namespaces
	// already exists.
	ErrExists = errors.New("already exists")
	// ErrNotFound is returned when no lab of that name has a state file.
	ErrNotFound = errors.New("no such lab")
)

// Lab is a lab as recorded in its state file.
type Lab struct {
	// mgmtMACs are the agents' management neighbours while the lab
	// comes up (agents.go).
	mgmtMACs []mgmtNeigh

	Name string `json:"name"`
	// Nodes maps node name to namespace name.
	Nodes   map[string]string `json:"nodes"`
	Created time.Time         `json:"created"`
	// File is the domain file the lab came from, if any.
	File string `json:"file,omitempty"`
	// Namespaces lists the namespaces this lab created (recorded just
	// before each is created, with O_EXCL semantics: a name that already
	// existed is never recorded). Down deletes exactly these.
	Namespaces []string `json:"namespaces"`
	// Links lists the veth pairs created, as "node:iface" endpoints.
	Links []LinkState `json:"links,omitempty"`
	// Complete is true once Up finished.
	Complete bool `json:"complete"`
	// Agents (lab up --agents) are the running agent of each node, on
	// the management network Mgmt, with certificates in AgentPKI
	// (agents.go).
	Agents   map[string]*AgentState `json:"agents,omitempty"`
	Mgmt     *Mgmt                  `json:"mgmt,omitempty"`
	AgentPKI string                 `json:"agent_pki,omitempty"`
	// Supervisor runs the agents (supervise.go).
	Supervisor *SupervisorState `json:"supervisor,omitempty"`
	// FRR (routing: bgp) are the routers' FRR instances: node → the
	// directory holding everything of it (frr.go).
	FRR map[string]string `json:"frr,omitempty"`
}

// LinkState is a created link with its endpoints' addresses.
type LinkState struct {
	A      string   `json:"a"`
	B      string   `json:"b"`
	AAddrs []string `json:"a_addrs,omitempty"`
	BAddrs []string `json:"b_addrs,omitempty"`
}

// Netns returns the namespace name of a node.
func (l *Lab) Netns(node string) (string, error) {
	ns, ok := l.Nodes[node]
	if !ok {
		return "", fmt.Errorf("lab %s: no node %q (nodes: %s)", l.Name, node, strings.Join(l.NodeNames(), ", "))
	}
	return ns, nil
}

// NodeNames returns the lab's node names, sorted.
func (l *Lab) NodeNames() []string {
	names := make([]string, 0, len(l.Nodes))
	for n := range l.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func statePath(name string) string { return filepath.Join(StateDir, name+".json") }

// create writes the first state file, failing with ErrExists if the lab has
// one already. The file appears complete or not at all: it is written under
// a temporary name and hard-linked into place (link fails if it exists).
func (l *Lab) create() error {
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := writeTemp(l.Name, b)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, statePath(l.Name)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("lab %s: state file %s: %w (run `segchain lab down --lab %s`)",
				l.Name, statePath(l.Name), ErrExists, l.Name)
		}
		return fmt.Errorf("write lab state: %w", err)
	}
	return nil
}

// save atomically replaces the state file.
func (l *Lab) save() error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := writeTemp(l.Name, b)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, statePath(l.Name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write lab state: %w", err)
	}
	return nil
}

// writeTemp writes a lab's state to a new file next to its state file and
// returns its name. The name is unique to this call (os.CreateTemp), not
// only to the process: two writers in one process (concurrent Up of the
// same lab) would otherwise share it and link or rename each other's
// half-written or already removed file.
func writeTemp(name string, b []byte) (string, error) {
	f, err := os.CreateTemp(StateDir, name+".json.*.new")
	if err != nil {
		return "", fmt.Errorf("write lab state: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write lab state: %w", err)
	}
	return f.Name(), nil
}

// Get reads the state of one lab.
func Get(name string) (*Lab, error) {
	if !labNameRE.MatchString(name) {
		return nil, fmt.Errorf("lab name %q must match [a-z0-9-]{1,16}", name)
	}
	b, err := os.ReadFile(statePath(name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("lab %s: %w", name, ErrNotFound)
		}
		return nil, fmt.Errorf("read lab state: %w", err)
	}
	var l Lab
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("parse lab state %s: %w", statePath(name), err)
	}
	l.fillPIDs()
	return &l, nil
}

// List returns every lab that has a state file, sorted by name.
func List() ([]*Lab, error) {
	ents, err := os.ReadDir(StateDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list labs: %w", err)
	}
	var labs []*Lab
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() || !labNameRE.MatchString(name) {
			continue
		}
		l, err := Get(name)
		if err != nil {
			if errors.Is(err, ErrNotFound) { // removed meanwhile
				continue
			}
			return nil, err
		}
		labs = append(labs, l)
	}
	return labs, nil
}

// Down deletes the namespaces a lab created (their veths go with them) and
// its state file. It touches nothing that is not recorded in the state file.
func Down(name string) error {
	l, err := Get(name)
	if err != nil {
		return err
	}
	return l.down()
}

func (l *Lab) down() error {
	var errs []error
	var left []string
	// Agents first: none may act on a namespace being removed.
	if err := l.StopAgents(); err != nil {
		errs = append(errs, fmt.Errorf("stop agents: %w", err))
	}
	if err := l.StopFRR(); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range l.Namespaces {
		if !nsutil.Exists(ns) {
			continue
		}
		// eBPF state is pinned in bpffs, outside the namespace: it would
		// outlive the namespace if not removed first.
		if err := local.Purge(ns); err != nil {
			errs = append(errs, err)
		}
		if err := nsutil.Delete(ns); err != nil {
			errs = append(errs, err)
			left = append(left, ns)
		}
	}
	if len(errs) > 0 {
		// Keep the state file so a later `lab down` can retry.
		l.Namespaces = left
		if err := l.save(); err != nil {
			errs = append(errs, err)
		}
		return fmt.Errorf("lab %s down: %w", l.Name, errors.Join(errs...))
	}
	if err := os.Remove(statePath(l.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lab %s down: remove state: %w", l.Name, err)
	}
	os.Remove(GeneratedPath(l.Name)) // lab up --generate's domain file, if any
	// The records of the lab's applies: a lab brought up again under the
	// same name holds nothing, and apply --changed-only must not believe
	// otherwise. (A lab whose name extends this one's loses its records
	// too: its next --changed-only apply contacts every node.)
	if old, err := filepath.Glob(filepath.Join(AppliedDir, "lab-"+l.Name+"-*.json")); err == nil {
		for _, f := range old {
			os.Remove(f)
		}
	}
	return nil
}
