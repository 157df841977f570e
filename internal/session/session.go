package session

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/segchain/segchain/examples"
	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/agent/rpc/client"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/devprofile"
	"github.com/segchain/segchain/internal/frr"
	"github.com/segchain/segchain/internal/journal"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// Options say what a session works on and how.
type Options struct {
	// File is the domain file. "" is, with Lab, the file the lab was
	// brought up from, else the built-in default domain
	// (examples/default.yaml).
	File string
	// Domain, if set, is the domain itself (File is not read).
	Domain *config.Domain
	// Lab, if set, is the lab whose nodes the domain's nodes are: their
	// namespaces, their agents when it was brought up with --agents,
	// and its routers' FRR, kept in step with every apply. Without it a
	// node is its netns field or its nodes.NAME.agent.
	Lab *lab.Lab
	// Agents, if set, are the nodes' agents (tests' fakes): the session
	// then keeps no journal and takes no lock or lease, and preflights
	// the agents that can be (agent.Caps.Preflight).
	Agents map[string]agent.Agent
	// NoWait fails at once on a node lock another command holds
	// (--no-wait) instead of waiting for it.
	NoWait bool
	// DryRun: Apply and Destroy only say what they would change (segchain
	// plan, destroy --dry-run) and take no lock.
	DryRun bool
	// NodeTimeout bounds each node's part of each apply phase (0: none).
	NodeTimeout time.Duration
	// Log is told what the session waits for (another command's lock, an
	// agent reconciling) and notes about the domain file; nil: discarded.
	Log io.Writer
	// ChangedOnly restricts Apply to the nodes whose intent changed since
	// the last successful apply recorded (scope.go): the others are not
	// contacted at all, so drift on them goes unnoticed (apply without it,
	// or the agents' --reconcile, mends that).
	ChangedOnly bool
	// AppliedDir is where the records of applies are kept ("":
	// AppliedDir). Sessions of tests' fake Agents keep none unless set.
	AppliedDir string
	// NoOpFirst: the caller will Apply (segchain apply). When this
	// command's inputs are those of the last recorded apply (noop.go),
	// Open makes no plan and Apply first checks the agents against the
	// intents they keep; it plans only if one differs or cannot say.
	// Every other method plans first.
	NoOpFirst bool
	// identity, if set, replaces the build's identity in the input
	// digest (tests: another build).
	identity string
}

// Session is one domain's agents, journals, locks and hooks.
type Session struct {
	// Domain and Plan are what the session applies.
	Domain *config.Domain
	Plan   *plan.Plan
	// Lab is Options.Lab.
	Lab *lab.Lab

	opts Options
	log  io.Writer
	ctl  *controller.Controller
	// netns maps each in-process node to its namespace; remote each node
	// programmed through its agent.
	netns  map[string]string
	remote map[string]*client.Client
	// only, if set, is the apply's scope (--changed-only): the only
	// nodes given an agent.
	only map[string]bool
	// intentDg are the plan's nodes' IntentDigest (intents), computed
	// once, by planCtl: the controller, made before the scope (ctl is
	// set once it is complete).
	intentDg map[string]string
	planCtl  *controller.Controller
	// tickets are the remote agents' TLS session tickets (tickets.go).
	tickets *tickets
	// early are the agents dialled while planning (warm.go).
	early *early
	// src is the domain file as read; input the digest of the plan's
	// inputs (noop.go), "" when it cannot be said; kept, when Open made
	// no plan, the record whose intents Apply checks first.
	src   *domainSource
	input string
	// nudger asks the lab's routers to dial the speakers an apply
	// starts (lab.Nudger), made at the first (it knows the routers the
	// lab ran then: a router a later apply of watch starts is not
	// nudged, its sessions open at its connect timer); nudgeMu guards it.
	nudgeMu sync.Mutex
	nudger  *lab.Nudger
	kept    *Applied
	// unparsed: Domain is made of what the record keeps (unparsed.go),
	// not parsed; keptFRR is what it kept of FRR speakers.
	unparsed, keptFRR bool
}

// remoteConcurrency is how many nodes a controller works on at once when
// every node is remote (in-process nodes share this process and go one
// at a time).
const remoteConcurrency = 16

// Open loads the domain, plans it and builds one agent per node: a
// node's remote agent if it has one (the lab's --agents, or
// nodes.NAME.agent), else an in-process agent in its namespace (the
// lab's, or nodes.NAME.netns). Nothing is locked or changed yet.
func Open(o Options) (*Session, error) {
	tuneGC()
	s := &Session{Lab: o.Lab, opts: o, log: o.Log, netns: map[string]string{}, remote: map[string]*client.Client{}}
	if s.log == nil {
		s.log = io.Discard
	}
	d := o.Domain
	if d == nil {
		path := DomainFile(o.Lab, o.File, s.log)
		// A no-op needs no parse either (unparsed.go).
		if o.NoOpFirst && !o.DryRun && !o.ChangedOnly && s.records() && s.openUnparsed(path) {
			d = s.Domain
			devprofile.Phase("inputs kept (not parsed)")
		} else {
			var err error
			if d, s.src, err = loadDomainSource(path); err != nil {
				return nil, err
			}
			devprofile.Phase("load")
		}
	}
	s.Domain = d
	// A plain command contacts every node: dial them while planning.
	if o.Agents == nil && !o.ChangedOnly {
		s.dialEarly()
	}
	if !s.unparsed {
		s.input = s.inputDigest() // (openUnparsed computed it)
	}
	devprofile.Phase("input digest")
	// A no-op needs no plan (noop.go): Apply asks the agents first.
	if rec := s.keptEligible(); rec != nil {
		ok, err := s.openKept(rec)
		if err != nil {
			s.Close()
			return nil, err
		}
		if ok {
			devprofile.Phase("agents dialled (no plan)")
			return s, nil
		}
	}
	if err := s.plan(); err != nil {
		return nil, err
	}
	return s, nil
}

// plan plans the domain and builds the controller: its agents, journals,
// locks and hooks (the rest of Open). A domain opened unparsed
// (unparsed.go) is parsed first.
func (s *Session) plan() error {
	if err := s.parse(); err != nil {
		s.Close()
		return err
	}
	o, d := s.opts, s.Domain
	p, err := plan.Build(d)
	if err != nil {
		s.Close()
		return err
	}
	devprofile.Phase("plan")
	s.Domain, s.Plan = d, p
	// The inputs read again after the plan: a file that changed while
	// the command planned leaves the record without them (the next
	// apply plans).
	if s.input != "" && s.inputDigest() != s.input {
		s.input = ""
	}
	s.kept = nil
	c := &controller.Controller{Plan: p, Agents: o.Agents, NodeTimeout: o.NodeTimeout}
	s.planCtl = c
	// --changed-only: the scope first, so that only its nodes' agents
	// are dialled (scope.go).
	if o.ChangedOnly && s.records() {
		if s.only, err = s.changedScope(); err != nil {
			return err
		}
		devprofile.Phase("changed-only scope")
	}
	if o.Agents == nil {
		if err := s.agents(c); err != nil {
			s.Close()
			return err
		}
	}
	devprofile.Phase("agents dialled")
	if o.Lab != nil {
		c.Outside = routersInStep(o.Lab, d)
		c.BGPStarted = s.nudge
	}
	// Every apply of watch takes the locks, leases and preflight apply's
	// does (Apply); exactly once.
	c.Lock = s.lock
	s.ctl = c
	if s.only != nil {
		s.narrow()
	}
	return nil
}

// planned makes the plan Open left out (NoOpFirst) for a method other
// than Apply's no-op.
func (s *Session) planned() error {
	if s.Plan != nil {
		return nil
	}
	return s.plan()
}

// agents fills c with one agent per planned node and the journals.
func (s *Session) agents(c *controller.Controller) error {
	d, l := s.Domain, s.Lab
	var err error
	if s.early != nil {
		// Dialled while planning (warm.go).
		s.remote, s.tickets, err = s.early.remote, s.early.tickets, s.early.err
		if err == nil {
			err = s.early.use()
		}
	} else {
		s.remote, s.tickets, err = remoteAgents(d, l, s.only)
	}
	if err != nil {
		return err
	}
	c.Agents = map[string]agent.Agent{}
	var missing []string
	for _, name := range s.Domain.NodeNames() { // the plan's nodes
		if s.only != nil && !s.only[name] {
			continue
		}
		if rc := s.remote[name]; rc != nil {
			c.Agents[name] = rc
			continue
		}
		ns := d.Nodes[name].Netns
		if l != nil {
			if ns, err = l.Netns(name); err != nil {
				return err
			}
		}
		if ns == "" {
			missing = append(missing, name)
			continue
		}
		c.Agents[name] = local.NewLocal(name, ns)
		s.netns[name] = ns
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("no namespace for node(s) %s: use --lab NAME or set nodes.<name>.netns in the domain file",
			strings.Join(missing, ", "))
	}
	// The undo journal is kept per node id (the netns identity, as for
	// the locks); a node whose namespace cannot be read has none.
	ids := map[string]string{}
	for name, ns := range s.netns {
		if key, err := NodeKey(ns); err == nil {
			ids[name] = key
		}
	}
	c.Journal = journal.New("", ids)
	if len(s.remote) > 0 {
		// A remote node's journal is kept on its agent.
		who := holderName()
		c.Journal = &client.Journal{Local: c.Journal, Remote: s.remote, Who: who}
		for _, rc := range s.remote {
			rc.JournalOnExecute(who)
		}
	}
	if len(s.remote) == len(c.Agents) {
		c.Concurrency = remoteConcurrency
	}
	return nil
}

// nudge tells the lab's routers that node's speaker started (Nudger).
func (s *Session) nudge(node string, b *nodestate.BGP) {
	s.nudgeMu.Lock()
	if s.nudger == nil {
		s.nudger = s.Lab.NewNudger()
	}
	n := s.nudger
	s.nudgeMu.Unlock()
	n.Started(node, b)
}

// Close closes the connections to remote agents (and sends the lab's
// routers what they still have to be told: nudge).
func (s *Session) Close() {
	s.nudgeMu.Lock()
	if s.nudger != nil {
		devprofile.Phase("nudges pending")
		s.nudger.Close()
		asked, failed := s.nudger.Asked()
		devprofile.Phase(fmt.Sprintf("nudges: %d asked, %d failed", asked, failed))
	}
	s.nudger = nil
	s.nudgeMu.Unlock()
	if s.early != nil {
		s.early.stop()
		if s.remote == nil {
			s.remote = s.early.remote
		}
	}
	// All at once: a close dials nothing, and what it waits for is
	// mostly grpc-go's own goroutines (the GOAWAY written, the resolver
	// and balancer shut down); 64 at a time (each), closing 1,000
	// agents' connections was ~0.4 s of a no-op's wall clock
	// (docs/scale.md, "Session 17"). One after the other took seconds.
	var wg sync.WaitGroup
	for _, rc := range s.remote {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = rc.Close()
		}()
	}
	wg.Wait()
}

// Controller is the session's controller, for what reads nodes without
// changing them (Diff, Counters); its changes go through the session.
func (s *Session) Controller() *controller.Controller { return s.ctl }

// Apply brings every node to the plan (controller.Apply) holding every
// node's lock and lease, the remote agents preflighted once; with
// DryRun it only computes the changes (segchain plan) and locks nothing.
func (s *Session) Apply(ctx context.Context) (*controller.Result, error) {
	var res *controller.Result
	var err error
	drift := false
	if s.Plan == nil {
		// Open made no plan: the agents first (noop.go).
		var ok bool
		if res, ok, drift, err = s.keptNoOp(ctx); ok {
			return res, err // the record says so already: not rewritten
		}
		if err := s.plan(); err != nil {
			return nil, err
		}
	}
	if !drift {
		// (After drift found against the kept intents, which are the
		// plan's, the plan's digests would say no again: not asked.)
		res, err = s.unchanged(ctx)
	}
	if res == nil {
		if !s.opts.DryRun && s.records() {
			// No record while nodes change: an apply killed mid-way
			// leaves them between two intents, which only a full apply
			// sorts out.
			s.forgetApplied()
		}
		res, err = s.change(ctx, s.ctl.Apply)
	}
	if !s.opts.DryRun && s.records() {
		// The record of what is applied, for apply --changed-only.
		if err == nil {
			if rerr := s.recordApplied(); rerr != nil {
				fmt.Fprintf(s.log, "segchain: note: could not record the apply (%v): the next apply --changed-only contacts every node\n", rerr)
				s.forgetApplied()
			} else {
				s.keepInputs() // for a no-op without a parse (unparsed.go)
			}
		} else {
			s.forgetApplied()
		}
	}
	return res, err
}

// unchanged is the apply of a domain whose every node is as planned and
// keeps the plan as its intent, by their agents' digests alone
// (controller.Unchanged): the apply has nothing to do, so it takes no
// lock or lease and needs no other call to any agent (one round trip per
// node instead of seven). nil when that cannot be said (a node differs,
// has an unfinished journal, or its agent cannot report digests): the
// apply then runs as ever, locked, observing again under the leases.
// A dry run, or a lab whose routers run FRR (kept in step under the
// locks), always takes the full path.
func (s *Session) unchanged(ctx context.Context) (*controller.Result, error) {
	if s.opts.DryRun || s.Lab != nil && (len(s.Lab.FRR) > 0 || len(s.Plan.FRR) > 0) {
		return nil, nil
	}
	// The record of the last apply (scope.go) says whether the plan
	// changed since: then it is no no-op, and asking every agent first
	// would only add a round trip per node to the apply (a hint: without
	// a record the agents are asked).
	if s.records() {
		if rec, err := readApplied(s.appliedPath()); err == nil && rec != nil && len(changedNodes(s.intents(), rec)) > 0 {
			return nil, nil
		}
	}
	ok, diffs := s.ctl.Unchanged(ctx)
	devprofile.Phase("digests (unlocked)")
	if !ok {
		return nil, nil
	}
	res := &controller.Result{Diffs: diffs}
	if s.ctl.Outside != nil {
		done, err := s.ctl.Outside()
		if err != nil {
			return res, err
		}
		return res, done(nil)
	}
	return res, nil
}

// Destroy removes what the domain installed on its nodes
// (controller.Destroy), locked as Apply; with DryRun it only says what.
func (s *Session) Destroy(ctx context.Context) (*controller.Result, error) {
	if err := s.planned(); err != nil {
		return nil, err
	}
	if !s.opts.DryRun && s.records() {
		s.forgetApplied()
	}
	return s.change(ctx, s.ctl.Destroy)
}

// change runs an apply or a destroy: under the locks and leases, the
// agents preflighted once, or as a dry run, preflighted and unlocked.
func (s *Session) change(ctx context.Context, run func(context.Context, bool) (*controller.Result, error)) (*controller.Result, error) {
	if s.opts.DryRun {
		if err := s.preflight(ctx); err != nil {
			return nil, err
		}
		return run(ctx, true)
	}
	release, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return run(ctx, false)
}

// Watch applies now and again whenever an interface of a node comes up
// (controller.Watch), each apply locked, leased and preflighted as
// Apply's; it returns when ctx ends.
func (s *Session) Watch(ctx context.Context, report func(trigger []string, res *controller.Result, err error)) error {
	if err := s.planned(); err != nil {
		return err
	}
	if s.records() {
		s.forgetApplied() // watch's applies keep no record
	}
	return s.ctl.Watch(ctx, report)
}

// Status is every chain's and node's state (controller.Status), with a
// lab's FRR routers' BGP sessions read through vtysh.
func (s *Session) Status(ctx context.Context) *controller.Status {
	if s.planned() != nil {
		// Open defers the plan only for Apply (NoOpFirst); a plan that
		// fails here failed for Open's callers before.
		return &controller.Status{Domain: s.Domain.Name}
	}
	st := s.ctl.Status(ctx)
	s.labRouters(st)
	return st
}

// labRouters adds the sessions of a lab's FRR routers (routing: bgp) to
// status: their agents have no speaker, FRR answers through vtysh.
func (s *Session) labRouters(st *controller.Status) {
	l := s.Lab
	if l == nil || len(s.Plan.FRR) == 0 {
		return
	}
	for i := range st.Nodes {
		n := &st.Nodes[i]
		dir, ok := l.FRRDir(n.Node)
		if !ok {
			continue
		}
		ns, err := l.Netns(n.Node)
		if err == nil {
			n.BGP, err = frr.Sessions(ns, dir, s.Plan.FRR[n.Node])
		}
		if err != nil && n.Error == "" {
			n.Error = "FRR: " + err.Error()
		}
	}
}

// routersInStep keeps a lab's routers running FRR as domain d's routing
// wants, around every apply (lab.SyncRouting): started or changed before
// it, stopped after it, put back if it fails.
func routersInStep(l *lab.Lab, d *config.Domain) func() (func(error) error, error) {
	return func() (func(error) error, error) {
		rc, err := l.SyncRouting(d)
		if err != nil {
			return nil, err
		}
		return func(applyErr error) error {
			if applyErr != nil {
				return rc.Undo()
			}
			return rc.Commit()
		}, nil
	}
}

// LoadDomain reads the domain file, or the built-in default ("").
func LoadDomain(path string) (*config.Domain, error) {
	d, _, err := loadDomainSource(path)
	return d, err
}

// loadDomainSource is LoadDomain with the bytes it parsed (config.Load's
// read, kept for the input digest: noop.go).
func loadDomainSource(path string) (*config.Domain, *domainSource, error) {
	if path == "" {
		d, err := config.Parse(examples.Default, ".")
		return d, &domainSource{data: examples.Default}, err
	}
	d, data, err := config.LoadSource(path)
	if err != nil {
		return nil, nil, config.InFile(path, err)
	}
	abs, aerr := filepath.Abs(path)
	if aerr != nil {
		return d, nil, nil // no input digest: the full path
	}
	return d, &domainSource{path: abs, data: data}, nil
}

// DomainFile picks the domain file of a verb run with a lab: the file the
// lab was brought up from unless file names one ("" is the built-in
// default domain). When file names another file than the lab's, it is
// used and note says so, since the lab's nodes and links may not match it.
func DomainFile(l *lab.Lab, file string, note io.Writer) string {
	if l == nil {
		return file
	}
	if file == "" {
		return l.File
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		abs = file
	}
	if abs != l.File {
		from := l.File
		if from == "" {
			from = "built-in default domain"
		}
		fmt.Fprintf(note, "segchain: note: lab %s was brought up from %s; using -f %s\n", l.Name, from, file)
	}
	return file
}
