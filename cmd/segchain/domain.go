package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/chainpath"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/oam/oamsvc"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/session"
)

// domainFlags are shared by the verbs that act on a whole domain.
type domainFlags struct {
	file   string
	labNm  string
	output string
	noWait bool
	// nodeTimeout bounds each node's part of each apply phase.
	nodeTimeout time.Duration
	// changedOnly: apply --changed-only (session.Options.ChangedOnly).
	changedOnly bool
	// noOpFirst: apply (session.Options.NoOpFirst).
	noOpFirst bool
}

// registerLock adds --no-wait to a verb that changes nodes.
func (f *domainFlags) registerLock(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.noWait, "no-wait", false, noWaitUsage)
	cmd.Flags().DurationVar(&f.nodeTimeout, "node-timeout", 0, "bound each node's changes in each apply phase (0: none); a node that exceeds it fails the apply, which is rolled back everywhere")
}

func (f *domainFlags) register(cmd *cobra.Command, withOutput bool) {
	cmd.Args = domainArgs
	cmd.Flags().StringVarP(&f.file, "file", "f", "", "domain file (YAML); default: the built-in default domain (examples/default.yaml)")
	cmd.Flags().StringVar(&f.labNm, "lab", "", "run against the nodes of this lab (segchain lab up --lab NAME); with no -f, the file the lab was brought up from; default: each node's netns field")
	if withOutput {
		outputFlag(cmd, &f.output)
	}
}

// loadDomain reads the domain file, or the built-in default.
func loadDomain(path string) (*config.Domain, error) { return session.LoadDomain(path) }

// defaultDomain is the lab's built-in domain.
func defaultDomain() (*config.Domain, error) { return loadDomain("") }

// session opens the apply session of the flags (internal/session: the
// plan, the agents, journals, locks, leases and the lab's FRR hook); what
// it tells the user goes to cmd's stderr.
func (f *domainFlags) session(cmd *cobra.Command, dryRun bool) (*session.Session, error) {
	o := session.Options{File: f.file, NoWait: f.noWait, DryRun: dryRun, NodeTimeout: f.nodeTimeout, Log: cmd.ErrOrStderr(), ChangedOnly: f.changedOnly, NoOpFirst: f.noOpFirst && !dryRun}
	if f.labNm != "" {
		l, err := getLab(f.labNm)
		if err != nil {
			return nil, err
		}
		o.Lab = l
	}
	return session.Open(o)
}

// printRecovered tells what was found of commands killed half-way.
func printRecovered(w io.Writer, rec []controller.Recovery) {
	for _, r := range rec {
		fmt.Fprintf(w, "recovery: %s\n", r)
	}
}

func newValidateCmd() *cobra.Command {
	var file, output string
	cmd := &cobra.Command{
		Use:   "validate [-f FILE] [-o json]",
		Short: "Check a domain file and list every error with its path",
		Long: `Loads a domain file strictly: unknown fields, bad values and broken references
are all reported at once, each with its path (chains.web.services[1]) and
line:column. Exit status 1 when the file is invalid. With -o json:
{"file", "valid", "nodes", "services", "chains", "errors": [{"path", "line",
"col", "message"}]}. The JSON Schema of the format is docs/domain.schema.json.`,
		Example: "  segchain validate -f examples/default.yaml\n  segchain validate -f examples/hmac.yaml -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := validateFile(file)
			if output == "json" {
				if werr := writeJSON(cmd.OutOrStdout(), res); werr != nil {
					return werr
				}
				if err != nil {
					return &exitStatus{code: exitError} // the JSON said it all
				}
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d nodes, %d services, %d chains)\n",
				res.File, res.Nodes, res.Services, res.Chains)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "domain file (default: the built-in default domain)")
	outputFlag(cmd, &output)
	return cmd
}

// validation is validate's result (its -o json form).
type validation struct {
	File     string            `json:"file"`
	Valid    bool              `json:"valid"`
	Nodes    int               `json:"nodes"`
	Services int               `json:"services"`
	Chains   int               `json:"chains"`
	Errors   []validationError `json:"errors"`
}

type validationError struct {
	Path    string `json:"path"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Message string `json:"message"`
}

// validateFile loads and plans a domain file; the error is the load's or
// plan's, the result lists it per field.
func validateFile(file string) (*validation, error) {
	res := &validation{File: orDefault(file), Errors: []validationError{}}
	d, err := loadDomain(file)
	if err == nil {
		_, err = plan.Build(d)
	}
	if err != nil {
		var list config.ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				res.Errors = append(res.Errors, validationError{Path: e.Path, Line: e.Line, Col: e.Col, Message: e.Msg})
			}
		} else {
			res.Errors = append(res.Errors, validationError{Message: err.Error()})
		}
		return res, err
	}
	res.Valid, res.Nodes, res.Services, res.Chains = true, len(d.Nodes), len(d.Services), len(d.Chains)
	return res, nil
}

func orDefault(file string) string {
	if file == "" {
		return "built-in default domain"
	}
	return file
}

func newPlanCmd() *cobra.Command {
	var f domainFlags
	var detailed bool
	cmd := &cobra.Command{
		Use:   "plan [-f FILE] [--lab NAME] [-o json] [--detailed-exitcode]",
		Short: "Show what apply would change on every node",
		Long: `Computes every node's desired state from the domain file (SIDs, static
routes, headend policies, classification rules, HMAC keys, sysctls), reads
what segchain installed on each node and prints the per-node diff:
  + added   - removed   ~ changed in place
and a summary: N to add, N to change, N to delete. Nothing is changed.

Plan catches what apply would reject: each node's kernel is probed and a
behaviour it lacks (End.DT4, End.DT46 and vrftable need VRF devices) is an
error; a SID made by hand (segchain sid add) at a SID the domain wants is a
conflict. Both make plan fail before anything changes.

With --lab and no -f, the domain is the file the lab was brought up from.
With -o json, the plan's nodes, chains and SIDs, the diffs and the summary
are printed.

Exit status: 0 on success, 1 on error. With --detailed-exitcode (as
terraform's): 0 no changes, 1 error, 2 changes pending.`,
		Example: "  segchain plan --lab default\n  segchain plan --lab default --detailed-exitcode || echo \"status $?\"\n  segchain plan --lab default -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			s, err := f.session(cmd, true)
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := s.Apply(cmd.Context())
			if res == nil {
				return err
			}
			sum := res.Summary()
			if f.output == "json" {
				// Conflicts and unsupported behaviours are in the diffs
				// too; the exit status says they block.
				if werr := writeJSON(cmd.OutOrStdout(), struct {
					Plan      *plan.Plan            `json:"plan"`
					Diffs     []controller.Diff     `json:"diffs"`
					Summary   controller.Summary    `json:"summary"`
					Recovered []controller.Recovery `json:"recovered,omitempty"`
				}{s.Plan, res.Diffs, sum, res.Recovered}); werr != nil {
					return werr
				}
				if err != nil {
					return err
				}
				return pendingExit(detailed, res.Changes(), "change(s) pending")
			}
			if err != nil {
				return err
			}
			printWarnings(cmd.OutOrStdout(), s.Plan.Warnings)
			// The blocks static routing summarised (routing.summaries).
			for _, sm := range s.Plan.Summaries {
				fmt.Fprintln(cmd.OutOrStdout(), sm)
			}
			printRecovered(cmd.OutOrStdout(), res.Recovered)
			printDiffs(cmd.OutOrStdout(), res.Diffs)
			if res.Changes() == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no changes: every node matches the domain")
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "plan: %s; run segchain apply to make them\n", sum)
			}
			return pendingExit(detailed, res.Changes(), "change(s) pending")
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 0 when nothing would change, 2 when changes are pending, 1 on error")
	return cmd
}

// printWarnings lists what the domain leaves unprotected.
func printWarnings(w io.Writer, warnings []string) {
	for _, m := range warnings {
		fmt.Fprintf(w, "warning: %s\n", m)
	}
}

// summaryPast is a summary as apply reports what it did.
func summaryPast(s controller.Summary) string {
	return fmt.Sprintf("%d added, %d changed, %d deleted", s.Add, s.Change, s.Delete)
}

func printDiffs(w io.Writer, diffs []controller.Diff) {
	for _, d := range diffs {
		if d.Empty() {
			fmt.Fprintf(w, "node %s: no changes\n", d.Node)
			continue
		}
		fmt.Fprintf(w, "node %s: %d change(s)\n", d.Node, len(d.Adds)+len(d.Deletes))
		for _, op := range d.Ops() {
			fmt.Fprintf(w, "  %s\n", op.String())
		}
	}
}

func newApplyCmd() *cobra.Command {
	var f domainFlags
	cmd := &cobra.Command{
		Use:   "apply [-f FILE] [--lab NAME] [-o json]",
		Short: "Program every node of the domain (idempotent, make-before-break, all-or-nothing)",
		Long: `Brings every node to the state the domain file describes, through netlink.
Everything is added on every node before anything is removed, and endpoints
before the headend policies that steer traffic into them, so changing a chain
does not drop packets. If any change fails, every change already made on every
node is undone and the domain is left as it was. A second apply of an
unchanged file changes nothing and says so.

Commands that change nodes (apply, destroy, sid and fw edits) take one lock
per node, always in the same order, so they run one after another; a second
command prints "waiting for lock on node X held by pid P (COMMAND) since T"
and waits, or with --no-wait fails at once.

Interrupted (Ctrl-C: SIGINT, or SIGTERM), apply starts no new change, lets
the ones running finish, undoes every change it made on every node (local
and through agents), says so on stderr ("apply interrupted: rolled back N
change(s) …") and exits 130 (SIGINT) or 143 (SIGTERM); if every change was
already made, the apply is kept and it exits 0. A second interrupt exits at
once (same status), leaving each node's journal: the next apply or destroy
undoes it first. See docs/apply.md.

Every successful apply records the digest of each node's intent
(/run/segchain/applied/). With --changed-only, apply contacts only the
nodes whose intent differs from that record (every node when there is
none): a one-chain change locks, observes and changes just the nodes the
chain's change touches. Drift on the other nodes goes unnoticed then (a
plain apply, or the agents' --reconcile, mends it); destroy, watch and a
failed apply drop the record, and an apply drops it before its first change
(one killed mid-way leaves none). See docs/scale.md.

A plain apply whose inputs are those of the last successful apply (the
segchain build, the domain file's bytes, every file it names, the lab)
makes no plan, and does not parse the file again: each agent observes its
node against the intent it keeps, and when every node is in sync with it
apply says "not planned" (-o json:
"not_planned": true). Any difference, drift included, and it plans and
applies as ever. See docs/apply.md, "A no-op without a plan".

After the apply, each node's agent is handed what it keeps of the
chains' OAM (chains[].oam: O-flag sampling, the native-SID echo
responder; docs/oam.md "Kept by apply"); destroy hands it nothing.`,
		Example: "  segchain lab up && segchain apply --lab default\n  segchain lab up -f examples/hmac.yaml --lab demo && segchain apply --lab demo\n  segchain apply --lab demo --changed-only",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			f.noOpFirst = true // a no-op needs no plan (docs/scale.md)
			s, err := f.session(cmd, false)
			if err != nil {
				return err
			}
			defer s.Close()
			// ^C (SIGINT) or SIGTERM: no new change, undo this apply's
			// (interrupt.go).
			ctx, intr, stop := onInterrupt(cmd.Context(), cmd.ErrOrStderr(),
				"apply stops starting changes and undoes those it made")
			defer stop()
			res, err := s.Apply(ctx)
			err = intr.verdict("apply", res, err)
			if f.output == "json" && res != nil && err == nil {
				err = keepOAM(ctx, cmd.ErrOrStderr(), s, false)
				if err == nil {
					warnMTU(ctx, cmd.ErrOrStderr(), s, res)
				}
			}
			if f.output == "json" && res != nil {
				if perr := writeJSON(cmd.OutOrStdout(), res); perr != nil {
					return perr
				}
				return err
			}
			if res != nil {
				printRecovered(cmd.OutOrStdout(), res.Recovered)
				printDiffs(cmd.OutOrStdout(), res.Diffs)
			}
			if err != nil {
				return err
			}
			if err := keepOAM(ctx, cmd.ErrOrStderr(), s, false); err != nil {
				return err
			}
			if res.Changes() == 0 && res.NotPlanned {
				fmt.Fprintln(cmd.OutOrStdout(), "no changes: the domain is already applied (unchanged since the last apply: every node keeps its intent; not planned)")
			} else if res.Changes() == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no changes: the domain is already applied")
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "applied %d change(s): %s\n", res.Changes(), summaryPast(res.Summary()))
			}
			warnMTU(ctx, cmd.ErrOrStderr(), s, res)
			return nil
		},
	}
	f.register(cmd, true)
	f.registerLock(cmd)
	cmd.Flags().BoolVar(&f.changedOnly, "changed-only", false, "contact only the nodes whose intent changed since the last recorded apply (docs/scale.md)")
	return cmd
}

func newDestroyCmd() *cobra.Command {
	var f domainFlags
	var dry bool
	cmd := &cobra.Command{
		Use:   "destroy [-f FILE] [--lab NAME] [--dry-run] [-o json]",
		Short: "Remove exactly what segchain installed on the domain's nodes",
		Long: `Removes every route and rule the domain installed (they carry protocol ` + fmt.Sprint(nodestate.Proto) + `,
or ` + fmt.Sprint(nodestate.ProtoLegacy) + ` when an older segchain installed them), the domain's HMAC keys
and tunnel source, and restores the sysctls segchain changed to the values
they had before. Routes, rules and keys that the domain did not install are
left alone: that includes SIDs made by hand with segchain sid add (protocol
` + fmt.Sprint(nodestate.ProtoManual) + `), which segchain sid del/flush remove.
With --lab and no -f, the domain is the file the lab was brought up from.
With -o json, the diffs and their summary are printed.
Interrupted (SIGINT, SIGTERM), destroy stops and puts back what it removed,
as apply does (exit 130/143; a second interrupt exits at once and leaves
the journals for the next command).`,
		Example: "  segchain destroy --lab default --dry-run -o json\n  segchain destroy --lab default",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			s, err := f.session(cmd, dry)
			if err != nil {
				return err
			}
			defer s.Close()
			ctx, intr, stop := onInterrupt(cmd.Context(), cmd.ErrOrStderr(),
				"destroy stops starting changes and undoes those it made")
			defer stop()
			res, err := s.Destroy(ctx)
			err = intr.verdict("destroy", res, err)
			if f.output == "json" && res != nil {
				if perr := writeJSON(cmd.OutOrStdout(), struct {
					*controller.Result
					DryRun  bool               `json:"dry_run"`
					Summary controller.Summary `json:"summary"`
				}{res, dry, res.Summary()}); perr != nil {
					return perr
				}
				return err
			}
			if res != nil {
				printRecovered(cmd.OutOrStdout(), res.Recovered)
				printDiffs(cmd.OutOrStdout(), res.Diffs)
			}
			if err != nil {
				return err
			}
			if dry {
				fmt.Fprintf(cmd.OutOrStdout(), "%d change(s) would be made (%s)\n", res.Changes(), res.Summary())
			} else {
				if err := keepOAM(ctx, cmd.ErrOrStderr(), s, true); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "removed: %d change(s)\n", res.Changes())
			}
			return nil
		},
	}
	f.register(cmd, true)
	f.registerLock(cmd)
	cmd.Flags().BoolVar(&dry, "dry-run", false, "only show what would be removed")
	return cmd
}

func newStatusCmd() *cobra.Command {
	var f domainFlags
	var check, verbose bool
	var w statusWatch
	cmd := &cobra.Command{
		Use:   "status [-f FILE] [--lab NAME] [-o json] [-v] [--check | --watch [--interval D] [--count N]]",
		Short: "Show chains, their SID lists and per-SID counters on every node",
		Long: `For every chain: its headend, mode, classifier and SID list (node, service,
behaviour of each segment) and the path its packets take now: from the
headend, for each SID, the nodes the kernels' forwarding leads through to
the SID's node (each node's IPv6 main table, whoever installed the routes:
apply's static routes, BGP, FRR, connected routes), equal-cost branches in
braces, e.g.
  web  ingress → {r1 → nfv1 | r2 → nfv2} → egress (fc00:4::d6 End.DX6)
and below it what stops a branch (unreachable at NODE, loop, path unknown
at NODE: agent too old). -o json: chains[].path, per SID {sid, node,
behavior, hops (the nodes of each branch, the start first), problems}.
For every node: each local SID with its
behaviour, the service it implements and its counters (packets, bytes,
errors), and whether the node has drifted from the plan: pending changes,
and the eBPF objects found broken (a proxy or firewall program not attached
to an interface, a link pin missing, detached or running a foreign program,
a pinned map missing or of another layout, orphaned pins), and the chains
that cross a drifted node.
Under routing: bgp, every node's BGP sessions: state, prefixes received,
why a session is down (NOTE: no carrier on DEV, bfd down on DEV, a
NOTIFICATION), and with routing.bgp.bfd a BFD column (up, down, init,
admin-down). See docs/routing.md.
Chains with chains[].oam.sample: the kept O-flag sampling, paired here
from the sightings each node's agent keeps: the marker's counts and per
hop the sampled packets seen and their latency from the previous hop and
from the headend, p50/p99 (-o json: sampling[]; docs/oam.md).
With --lab and no -f, the domain is the file the lab was brought up from.

At each chain's headend, whether its hosts' full-size packets still fit
once the chain's SRv6 headers are added: where they do not, a line
  mtu: chain web at ingress: 1500 (eth-s) + 96 bytes of SRv6 headers > 1500 (eth-r1): ...
(-o json: mtu[]; a headend whose agent predates the MTUs RPC: mtu_notes[]).
Linux drops such packets with no Packet Too Big to their sender
(docs/deploy.md, "MTU"). A warning, not drift: --check does not exit 2
for it; apply prints the same lines on stderr.

Each node's state is in-sync, drift, not-applied (nothing of segchain's is
on it: never applied, destroyed, or all of it lost) or unknown (could not
be read); each chain's likewise from the nodes it crosses (-o json:
nodes[].state, chains[].state). A node or chain not applied is one line; a
broken chain is one line naming its nodes and how many objects each lacks.
-v lists the objects (as -o json's broken[].missing does) and every path
problem.

--watch samples the per-SID counters every --interval and shows packet,
byte and drop rates (counter deltas over the measured time; a counter
that went back, e.g. a SID re-created, counts from zero): on a terminal
the screen is redrawn in place, otherwise one line per SID and sample is
appended; -o json prints one JSON object per sample (JSON lines). Ctrl-C
stops it with exit status 0; --count N stops after N samples.

Exit status: 0 on success, 1 on error. With --check: 0 every node matches
the domain, 1 error, 2 drift or not applied (some node has pending changes
or broken eBPF objects, or a pool instance is down: docs/pools.md). The table of every verb's exit statuses is in
docs/apply.md.`,
		Example: "  segchain status --lab default\n  segchain status --lab default --check\n  segchain status --lab default -v\n  segchain status --lab default -o json\n  segchain status --lab default --watch --interval 1s --count 3",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if err := w.check(cmd); err != nil {
				return err
			}
			if w.on && check {
				return errors.New("--check and --watch: choose one")
			}
			s, err := f.session(cmd, true)
			if err != nil {
				return err
			}
			defer s.Close()
			if w.on {
				return w.run(cmd, s.Controller(), f.output)
			}
			st := s.Status(cmd.Context())
			sm := oamsvc.Status(cmd.Context(), s) // chains[].oam.sample (statusoam.go)
			if f.output == "json" {
				if err := writeJSON(cmd.OutOrStdout(), statusJSON{st, sm}); err != nil {
					return err
				}
			} else {
				printStatus(cmd.OutOrStdout(), st, verbose)
				printSampling(cmd.OutOrStdout(), sm)
			}
			return statusExit(check, st)
		},
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&check, "check", false, "exit 2 when any node has drifted from the domain or holds nothing of it (not applied), for CI and monitoring")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list what each broken chain's nodes lack, and every path problem of a chain not applied")
	w.register(cmd)
	return cmd
}

// statusExit is status --check's verdict: a node that could not be read is
// an error, drift the controller observed (st.Drift) is exit status 2.
func statusExit(check bool, st *controller.Status) error {
	if !check {
		return nil
	}
	for _, n := range st.Nodes {
		if n.Error != "" {
			return fmt.Errorf("node %s: %s", n.Node, n.Error)
		}
	}
	pending, bare := 0, 0
	for _, n := range st.Drift {
		pending += n
	}
	for _, n := range st.Nodes {
		if n.State == controller.StateNotApplied {
			bare++
		}
	}
	if bare > 0 {
		return pendingExit(true, pending, fmt.Sprintf("pending change(s): not applied on %d of %d node(s), run segchain apply", bare, len(st.Nodes)))
	}
	if d := degradedPools(st); pending == 0 && len(d) > 0 {
		return pendingExit(true, len(d), "pool instance(s) down: "+strings.Join(d, ", "))
	}
	return pendingExit(true, pending, "pending change(s): drift from the domain")
}

// detailLine renders an eBPF SID's per-direction counters and its
// non-zero drop reasons: "in 10 out 9 not-returned 0 drops in 0 out 1:
// cache-empty 1" (not-returned: an SR proxy's packets the SF kept).
func detailLine(d map[string]uint64) string {
	if len(d) == 0 {
		return ""
	}
	var b strings.Builder
	if _, ok := d["in-packets"]; ok {
		fmt.Fprintf(&b, "in %d out %d", d["in-packets"], d["out-packets"])
	}
	if n, ok := d["not-returned"]; ok {
		fmt.Fprintf(&b, " not-returned %d", n)
	}
	if _, ok := d["in-drops"]; ok {
		fmt.Fprintf(&b, " drops in %d out %d", d["in-drops"], d["out-drops"])
	}
	var reasons []string
	for k, v := range d {
		if r, ok := strings.CutPrefix(k, "drop-"); ok && v > 0 {
			reasons = append(reasons, fmt.Sprintf("%s %d", r, v))
		}
	}
	sort.Strings(reasons)
	if len(reasons) > 0 {
		if b.Len() == 0 {
			b.WriteString("drops")
		}
		b.WriteString(": " + strings.Join(reasons, ", "))
	}
	return strings.TrimSpace(b.String())
}

// serveMode is how a userspace service's packets reach it, read from its
// `sid show` line (route): the XDP mode per interface (generic with the
// reason native was refused), the AF_XDP mode, the binding's MTU and how
// its sent frames are forwarded (fwd fib|stack), so that a fallback is
// seen in status, not only in sid show.
func serveMode(behavior, route string) string {
	if behavior != "userspace" && behavior != "End.ASM" {
		return ""
	}
	f := strings.Fields(route)
	var parts []string
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "xdp", "xsk", "mtu", "fwd":
			parts = append(parts, f[i]+" "+f[i+1])
			i++
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "mode: " + strings.Join(parts, " ")
}

// printBoundary lists the drops of every node's boundary filter per
// interface and reason.
func printBoundary(w io.Writer, nodes []controller.NodeStatus) {
	var rows []string
	for _, n := range nodes {
		for _, c := range n.Boundary {
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d", n.Node, c.Iface, c.Direction, c.Reason, c.Packets, c.Bytes))
		}
	}
	fmt.Fprintln(w)
	if len(rows) == 0 {
		fmt.Fprintln(w, "boundary: no drops")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BOUNDARY NODE\tIFACE\tDIR\tREASON\tPACKETS\tBYTES")
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	tw.Flush()
}

// printBGP lists every node's BGP sessions (routing: bgp); nothing when no
// node has a speaker.
func printBGP(w io.Writer, nodes []controller.NodeStatus) {
	var rows []string
	// A BFD column only when some session runs BFD (routing.bgp.bfd).
	withBFD := false
	for _, n := range nodes {
		for _, s := range n.BGP {
			withBFD = withBFD || s.BFD != ""
		}
	}
	for _, n := range nodes {
		for _, s := range n.BGP {
			state := s.State
			if s.Admin != "" {
				state += " (admin " + s.Admin + ")"
			}
			since := "-"
			if s.Since > 0 {
				since = (time.Duration(s.Since) * time.Second).String()
			}
			bfd := ""
			if withBFD {
				bfd = "-\t"
				if s.BFD != "" {
					bfd = s.BFD + "\t"
				}
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\tAS%d\t%s\t%s%s\t%d\t%s", n.Node, s.Node, s.Peer, s.ASN, state, bfd, since, s.Received, s.Note))
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if withBFD {
		fmt.Fprintln(tw, "BGP NODE\tPEER\tADDRESS\tASN\tSTATE\tBFD\tSINCE\tRECEIVED\tNOTE")
	} else {
		fmt.Fprintln(tw, "BGP NODE\tPEER\tADDRESS\tASN\tSTATE\tSINCE\tRECEIVED\tNOTE")
	}
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	tw.Flush()
}

// printPaths shows the path each chain takes now, one line per chain
// (chainpath.Render), what stops or bends it below; a chain not applied
// is one line unless verbose.
func printPaths(w io.Writer, chains []controller.ChainStatus, verbose bool) {
	if len(chains) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH CHAIN\tNODES (SID BEHAVIOR)")
	for _, ch := range chains {
		if ch.State == controller.StateNotApplied && !verbose {
			// Every hop is unreachable: nothing was installed.
			fmt.Fprintf(tw, "%s\tnot applied\n", ch.Name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\n", ch.Name, chainpath.Render(ch.Ingress, ch.Path))
		for _, seg := range ch.Path {
			for _, p := range seg.Problems {
				fmt.Fprintf(tw, "\t  ! %s\n", p)
			}
		}
	}
	tw.Flush()
}

// printStatus is status' text. Unless verbose, a node or chain not
// applied is one line, and a broken chain one line naming its nodes (the
// objects each lacks are listed with -v and in -o json).
func printStatus(w io.Writer, st *controller.Status, verbose bool) {
	fmt.Fprintf(w, "domain %s\n\n", st.Domain)
	for _, ch := range st.Chains {
		fmt.Fprintf(w, "chain %s: %s at %s, table %d, match %s\n", ch.Name, ch.Mode, ch.Ingress, ch.Table, ch.Match)
		for i, h := range ch.Hops {
			fmt.Fprintf(w, "  %d. %-28s %-8s %-20s %s%s\n", i+1, h.SID, h.Node, h.Service, h.Behavior, usidForm(ch.Chain, h.SID))
		}
		printPushed(w, ch.Chain)
	}
	printPaths(w, st.Chains, verbose)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSID\tBEHAVIOR\tSERVICE\tPACKETS\tBYTES\tERRORS")
	for _, n := range st.Nodes {
		if n.Error != "" {
			fmt.Fprintf(tw, "%s\t(error: %s)\t\t\t\t\t\n", n.Node, n.Error)
			continue
		}
		for _, s := range n.SIDs {
			svc := s.Service
			switch {
			case s.Owned:
			case s.Origin == "hand-made":
				svc = "(hand-made: segchain sid add)"
			default:
				svc = "(not segchain's)"
			}
			if !s.Counted {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\t-\n", n.Node, s.SID, s.Behavior, svc)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\n", n.Node, s.SID, s.Behavior, svc, s.Packets, s.Bytes, s.Errors)
			if d := detailLine(s.Detail); d != "" {
				fmt.Fprintf(tw, "\t  %s\t\t\t\t\t\n", d)
			}
			if m := serveMode(s.Behavior, s.Route); m != "" {
				fmt.Fprintf(tw, "\t  %s\t\t\t\t\t\n", m)
			}
		}
	}
	tw.Flush()
	printPools(w, st.Nodes)
	printBGP(w, st.Nodes)
	printBoundary(w, st.Nodes)
	printDrift(w, st, verbose)
	printMTU(w, st)
}
