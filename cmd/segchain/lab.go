package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/oam"
)

// labDeps are what the lab verbs need from the rest of the program.
type labDeps struct {
	defaultDomain func() (*config.Domain, error)
	loadDomain    func(path string) (*config.Domain, error)
}

// newLabCmd wires the lab verbs to the program's domain loaders
// (defaultDomain and loadDomain in domain.go).
func newLabCmd() *cobra.Command {
	return newLabCmdWith(labDeps{defaultDomain: defaultDomain, loadDomain: loadDomain})
}

func newLabCmdWith(deps labDeps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Bring up and tear down lab networks in network namespaces",
		Long: `A lab is one network namespace per node of a domain file, named
sc-<lab>-<node>, joined by veth pairs as the file's links say. Addresses are
added without DAD and every peer address has a permanent neighbour entry, so
nothing depends on neighbour discovery. SRv6 (seg6_enabled) is on everywhere but
on sf nodes (an SR-unaware service function must not act on an SRH);
every node that is not a host forwards IPv4 and IPv6.

Each lab is recorded in /run/segchain/labs/<name>.json before anything is
created; 'lab down' deletes exactly the namespaces recorded there (their veths
go with them) and nothing else. A lab never adopts a namespace it did not
create: 'lab up' refuses when a target namespace already exists.

Every lab verb names its lab with --lab NAME (default: default, or the
value of $SEGCHAIN_LAB); --name is a deprecated alias.`,
		Example: `  segchain lab up                          # the built-in default (thesis Fig. 3.1)
  segchain lab up -f examples/default.yaml --lab demo
  segchain lab ls
  segchain lab exec s -- ip -6 route
  segchain lab addr r1
  segchain lab down --lab demo
  segchain lab down --all-owned             # every lab with a state file`,
	}
	cmd.AddCommand(newLabUpCmd(deps), newLabDownCmd(), newLabLsCmd(), newLabExecCmd(), newLabAddrCmd(),
		newLabSuperviseCmd(), newLabRestartAgentsCmd())
	return cmd
}

// labNameFlag registers --lab, the flag every verb uses to name a lab, and
// --name, its deprecated alias from before the verbs agreed on --lab.
func labNameFlag(cmd *cobra.Command, name *string, usage string) {
	cmd.Flags().StringVar(name, "lab", defaultLab(), usage)
	cmd.Flags().StringVar(name, "name", defaultLab(), usage)
	_ = cmd.Flags().MarkDeprecated("name", "use --lab")
}

func newLabUpCmd(deps labDeps) *cobra.Command {
	var file, name, output string
	var agents bool
	var agentExe, generate string
	cmd := &cobra.Command{
		Use:   "up [-f DOMAIN.yaml | --generate TOPOLOGY:N] [--lab NAME] [--agents [--agent-exe PATH]]",
		Short: "Create a lab from a domain file (default: the built-in domain)",
		Long: `Create one namespace per node of the domain and a veth pair per link,
with the link addresses the domain derives (fc00:xy::x/64 style). On any
failure everything created so far is removed again. Prints the node to
namespace table, or the lab state with -o json.

With --agents, every node also gets a management interface (mgmt0) on a
lab bridge in the host namespace (its own ULA /64, outside the data plane)
and a real 'segchain agent' process serving it over gRPC + mutual TLS with
certificates of a lab CA; plan, apply, destroy and status --lab then
program the nodes through their agents. The agents run under a supervisor
process of the lab (as systemd runs segchain-agent in production): an
agent that exits is restarted with backoff (0.2 s doubling to 10 s);
'lab ls' shows each agent's state, pid, address, log and metrics endpoint;
'lab restart-agents' restarts them. 'lab down' stops the supervisor, then
every agent of the lab (one started by hand included).
--agent-exe runs 'PATH agent ...' instead of this binary's agent: the
segchain-agent binary (make build) is the same agent, linking only its own
packages. See docs/agents.md.

A domain with routing: bgp implies --agents (each SR node's BGP speaker
runs in its agent; --agents=false starts none, for agents served
otherwise: segchain agent group, docs/scale.md) and starts FRR (zebra, bgpd, bfdd with bfd) in every
router node, with the configuration segchain generates; 'lab down' stops
it. 'apply --lab' keeps the routers' FRR in step with the domain it
applies (started for bgp, restarted when its configuration changes,
stopped after a switch to static). 'lab exec ROUTER -- vtysh ...' reaches
that node's FRR. See docs/routing.md.

--generate TOPOLOGY:N generates the domain instead of reading one: a line
(line:N) or a Clos fabric of exactly N nodes (clos:N, clos2:N, clos3:N:
leaves hosting one End service each, spines and super-spines as routers,
4 chains spread over the leaves, each pod's block summarised under static
routing). The file is kept as /run/segchain/labs/NAME.generated.yaml
(apply --lab NAME uses it; lab down removes it). See docs/scale.md.`,
		Example: `  segchain lab up
  segchain lab up -f examples/default.yaml --lab demo -o json
  segchain lab up --generate clos:12 --lab fab`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var d *config.Domain
			var err error
			if generate != "" {
				if file != "" {
					return fmt.Errorf("lab up: -f and --generate: give one")
				}
				if file, err = lab.WriteGenerated(generate, name); err != nil {
					return err
				}
			}
			if file == "" {
				d, err = deps.defaultDomain()
			} else {
				d, err = deps.loadDomain(file)
				if abs, aerr := filepath.Abs(file); aerr == nil {
					file = abs
				}
			}
			if err != nil {
				return err
			}
			l, err := lab.UpDomain(d, lab.UpOptions{Name: name, File: file, Agents: agents, AgentExe: agentExe,
				NoAgents: cmd.Flags().Changed("agents") && !agents}, cmd.ErrOrStderr())
			if err != nil {
				if generate != "" {
					os.Remove(file)
				}
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), l)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lab %s is up\n", l.Name)
			return printLabNodes(cmd.OutOrStdout(), l, false)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "domain file (default: the built-in default domain)")
	labNameFlag(cmd, &name, "lab name, [a-z0-9-]{1,16}")
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&generate, "generate", "", "generate the domain: line:N, clos:N, clos2:N or clos3:N (exactly N nodes; docs/scale.md)")
	cmd.Flags().BoolVar(&agents, "agents", false, "run a segchain agent in every node, reached over a management network (mTLS)")
	cmd.Flags().StringVar(&agentExe, "agent-exe", "", "with --agents: the program to run as 'PATH agent ...' (default: this segchain; segchain-agent is the lighter agent binary)")
	return cmd
}

// printLabNodes prints NODE NAMESPACE [EXISTS] for a lab.
func printLabNodes(w io.Writer, l *lab.Lab, exists bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if exists {
		fmt.Fprintln(tw, "NODE\tNAMESPACE\tEXISTS")
	} else {
		fmt.Fprintln(tw, "NODE\tNAMESPACE")
	}
	for _, n := range l.NodeNames() {
		if exists {
			fmt.Fprintf(tw, "%s\t%s\t%v\n", n, l.Nodes[n], nsutil.Exists(l.Nodes[n]))
		} else {
			fmt.Fprintf(tw, "%s\t%s\n", n, l.Nodes[n])
		}
	}
	return tw.Flush()
}

func newLabDownCmd() *cobra.Command {
	var name string
	var all bool
	cmd := &cobra.Command{
		Use:   "down [--lab NAME | --all-owned]",
		Short: "Delete a lab's namespaces and its state file",
		Long: `Delete exactly the namespaces recorded in the lab's state file (veths
die with them), then the state file. Namespaces the lab did not create are
never touched. With --all-owned, do this for every lab that has a state file.
Then the O-flag sampling lock files of namespaces that no longer exist and
that no process holds (a sampler killed before its lab went down) are
removed from /run/segchain/sample.`,
		Example: `  segchain lab down
  segchain lab down --lab demo
  segchain lab down --all-owned`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !all {
				if err := lab.Down(name); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "lab %s is down\n", name)
				return sweepSampleLocks(cmd.ErrOrStderr())
			}
			if cmd.Flags().Changed("lab") || cmd.Flags().Changed("name") {
				return errors.New("--lab and --all-owned are exclusive")
			}
			labs, err := lab.List()
			if err != nil {
				return err
			}
			var errs []error
			for _, l := range labs {
				if err := lab.Down(l.Name); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "lab %s is down\n", l.Name)
			}
			errs = append(errs, sweepSampleLocks(cmd.ErrOrStderr()))
			return errors.Join(errs...)
		},
	}
	labNameFlag(cmd, &name, "lab name")
	cmd.Flags().BoolVar(&all, "all-owned", false, "take down every lab that has a state file")
	return cmd
}

// sweepSampleLocks removes the sampling lock files the namespaces just
// deleted left (a sampler killed before them: docs/oam.md), saying which.
func sweepSampleLocks(w io.Writer) error {
	gone, err := oam.SweepSampleLocks()
	for _, p := range gone {
		fmt.Fprintf(w, "removed the stale sampling lock %s\n", p)
	}
	if err != nil {
		return fmt.Errorf("sampling locks: %w", err)
	}
	return nil
}

func newLabLsCmd() *cobra.Command {
	var output, name string
	cmd := &cobra.Command{
		Use:     "ls [--lab NAME] [-o json]",
		Aliases: []string{"list"},
		Short:   "List labs, their nodes, namespaces and agents",
		Long: `List every lab that has a state file (or only --lab NAME), with each node's
namespace and whether that namespace still exists. A lab marked incomplete
was interrupted while coming up; 'lab down' cleans it up.

For a lab with agents (lab up --agents), each agent's state as the lab's
supervisor records it: starting (its process runs, its port does not
accept connections yet), running (with its pid and since when), backoff (it
exited: restarted at the time shown; RESTARTS counts them, LAST EXIT says
how it ended), stopped, dead (no supervisor runs and its process is gone:
'segchain lab restart-agents --lab NAME' starts them again), unsupervised
(alive, but the supervisor is not running); its gRPC address, its
/metrics endpoint and its log file. -o json: agents.NODE.{addr, metrics,
log, pid, state, gen, restarts, since, last_exit, next_start} and
supervisor.{pid, running, log}.`,
		Example: `  segchain lab ls
  segchain lab ls --lab demo
  segchain lab ls -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var labs []*lab.Lab
			var err error
			if name != "" {
				var l *lab.Lab
				if l, err = lab.Get(name); err == nil {
					labs = []*lab.Lab{l}
				}
			} else {
				labs, err = lab.List()
			}
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				out := []lab.Listing{}
				for _, l := range labs {
					out = append(out, l.Listing())
				}
				return writeJSON(w, out)
			}
			if len(labs) == 0 {
				fmt.Fprintln(w, "no labs")
				return nil
			}
			for i, l := range labs {
				if i > 0 {
					fmt.Fprintln(w)
				}
				state := ""
				if !l.Complete {
					state = " (incomplete: run segchain lab down --lab " + l.Name + ")"
				}
				fmt.Fprintf(w, "lab %s, created %s%s%s\n", l.Name, l.Created.Format(time.RFC3339),
					map[bool]string{true: ", from " + l.File, false: ""}[l.File != ""], state)
				if err := printLabNodes(w, l, true); err != nil {
					return err
				}
				if err := printLabAgents(w, l.Listing()); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "lab", "", "only this lab (default: every lab)")
	outputFlag(cmd, &output)
	return cmd
}

// printLabAgents prints a lab's agents and their supervisor (nothing for
// a lab without agents).
func printLabAgents(w io.Writer, x lab.Listing) error {
	if len(x.Agents) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	if s := x.Supervisor; s != nil {
		run := "running"
		if !s.Running {
			run = "NOT RUNNING: agents are not restarted; segchain lab restart-agents --lab " + x.Name + " starts it"
		}
		fmt.Fprintf(w, "supervisor pid %d %s (log %s)\n", s.PID, run, s.Log)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tSTATE\tPID\tSINCE\tRESTARTS\tADDRESS\tMETRICS\tLOG\tLAST EXIT")
	names := make([]string, 0, len(x.Agents))
	for n := range x.Agents {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := x.Agents[n]
		state, pid, since := a.State, "-", "-"
		if a.PID > 0 {
			pid = fmt.Sprint(a.PID)
		}
		if !a.Since.IsZero() {
			since = a.Since.UTC().Format(time.TimeOnly)
		}
		if a.State == lab.AgentBackoff && !a.NextStart.IsZero() {
			state += " (restart at " + a.NextStart.UTC().Format("15:04:05.0") + ")"
		}
		last := a.LastExit
		if last == "" {
			last = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\thttp://%s/metrics\t%s\t%s\n", n, state, pid, since, a.Restarts, a.Addr, a.Metrics, a.Log, last)
	}
	return tw.Flush()
}

// newLabSuperviseCmd is the lab's agent supervisor, started detached by
// lab up --agents (hidden: not for people to run).
func newLabSuperviseCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:    "supervise --lab NAME",
		Short:  "Run and restart a lab's agents (started by lab up --agents)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := lab.Get(name)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return l.Supervise(ctx, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&name, "lab", "", "lab name")
	return cmd
}

func newLabRestartAgentsCmd() *cobra.Command {
	var name, agentExe string
	cmd := &cobra.Command{
		Use:   "restart-agents [--lab NAME] [NODE...]",
		Short: "Restart a lab's agents (all, or the nodes named) and their supervisor if it is not running",
		Long: `Restarts the agents of the nodes named (every node when none) of a lab
brought up with --agents, through the lab's supervisor, and waits until
each answers. The supervisor itself is started again first if it is not
running (killed, or the host's /run survived a crash of it). An agent that
merely crashed needs none of this: the supervisor restarts it by itself
(segchain lab ls shows it). --agent-exe runs another agent binary from now
on (e.g. a freshly built segchain-agent).`,
		Example: `  segchain lab restart-agents --lab demo nfv1
  segchain lab restart-agents --lab demo`,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.Get(name)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			if err := l.RestartAgents(self, agentExe, args...); err != nil {
				return err
			}
			if l, err = lab.Get(name); err != nil {
				return err
			}
			return printLabAgents(cmd.OutOrStdout(), l.Listing())
		},
	}
	labNameFlag(cmd, &name, "lab name")
	cmd.Flags().StringVar(&agentExe, "agent-exe", "", "run 'PATH agent ...' from now on (default: the program the lab's agents ran)")
	return cmd
}

func newLabExecCmd() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "exec [--lab NAME] NODE -- CMD [ARGS...]",
		Short: "Run a command inside a lab node's namespace",
		Long: `Run CMD inside the node's namespace (through 'ip netns exec', so /sys
matches the namespace too) with stdin, stdout and stderr attached. The exit
status of CMD is the exit status of segchain.`,
		Example: `  segchain lab exec s -- ip -6 neigh
  segchain lab exec --lab demo r1 -- tcpdump -ni eth0 -c 5`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return errors.New("usage: segchain lab exec NODE -- CMD [ARGS...]")
			}
			l, err := lab.Get(name)
			if err != nil {
				return err
			}
			ns, err := l.Netns(args[0])
			if err != nil {
				return err
			}
			c := exec.Command("ip", append([]string{"netns", "exec", ns}, l.ExecArgv(args[0], args[1:])...)...)
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, cmd.OutOrStdout(), cmd.ErrOrStderr()
			err = c.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code := ee.ExitCode()
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = 128 + int(ws.Signal()) // as shells report it
				}
				os.Exit(code)
			}
			if err != nil {
				return fmt.Errorf("exec in %s: %w", ns, err)
			}
			return nil
		},
	}
	labNameFlag(cmd, &name, "lab name")
	return cmd
}

func newLabAddrCmd() *cobra.Command {
	var name, output string
	cmd := &cobra.Command{
		Use:   "addr [--lab NAME] NODE [-o json]",
		Short: "Show a lab node's interfaces and addresses",
		Example: `  segchain lab addr r1
  segchain lab addr --lab demo nfv1 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			l, err := lab.Get(name)
			if err != nil {
				return err
			}
			ifs, err := l.Ifaces(args[0])
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), ifs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "IFACE\tSTATE\tMAC\tADDRESSES")
			for _, i := range ifs {
				var as []string
				for _, a := range i.Addrs {
					as = append(as, a.String())
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", i.Name, map[bool]string{true: "UP", false: "DOWN"}[i.Up],
					i.MAC, strings.Join(as, " "))
			}
			return tw.Flush()
		},
	}
	labNameFlag(cmd, &name, "lab name")
	outputFlag(cmd, &output)
	return cmd
}
