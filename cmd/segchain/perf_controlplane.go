package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/cpbench"
	"github.com/segchain/segchain/internal/lab"
)

func newPerfControlPlaneCmd() *cobra.Command {
	var (
		sizes           []int
		output          string
		plotTo          string
		routing         string
		agentExe        string
		topology        string
		noSum           bool
		planOnly        bool
		perProc         int
		keepalive, hold int
		labPrefix       string
	)
	cmd := &cobra.Command{
		Use:   "control-plane [--topology line|clos|clos2|clos3] [--nodes 10,50,100] [-o json]",
		Short: "Measure apply through agents at scale (10/50/100 nodes)",
		Long: `For each size N, generates a domain of exactly N nodes (the same
generator as lab up --generate; docs/scale.md) with 4 chains and brings it
up as a lab with a real segchain agent per node (lab up --agents):

  line    hosts s and d, an ingress, N-4 NFV nodes with one End service
          each, an egress, in a line; each chain visits every 4th NFV node
  clos2   2-tier Clos: leaves (ingress, NFV leaves with one End service
          each, egress) linked to every one of 4 spines (routers)
  clos3   3-tier Clos: pods of up to 16 leaves and 4 spines, spine k of
          every pod linked to the 2 super-spines of plane k
  clos    clos3 above 64 nodes, else clos2

Clos chains visit 8 leaves spread over the fabric. A Clos domain
summarises each pod's block (routing.summaries: one static route per
block, or under --routing bgp the spines' FRR aggregates; --no-summaries
routes and announces every prefix to every node instead). It measures,
through the agents:

  from scratch   apply on empty nodes
  no-op          apply again (observes every node, changes nothing)
  one chain      apply with one chain's SID list changed (and how many
                 nodes that changes, from the plan)
  ... CO         the change back and a no-op with apply --changed-only
                 (only the nodes whose intent changed are contacted)
  changes/node   ops of the apply from scratch per node (max and mean)
  controller     the apply commands' peak RSS (getrusage maxrss)
  route slab     growth of the kernel's slab memory over the apply from
                 scratch (/proc/meminfo Slab: machine-wide, noisy)
  agent RSS      resident memory of the agents after these (max and mean),
                 and its anonymous part (heap, stacks: the rest is the
                 binary's pages, shared by all agents of a host), and
                 their proportional set size (Pss)

The agents are segchain-agent's when that binary sits next to this one and
is the same build (make build makes both), else this binary's own agent;
--agent-exe names one (the output says which ran).

Wall-clock times of the segchain commands (process start included), one
run each: a benchmark on a possibly loaded machine, not a test. The labs
(cpbench-XXXX-N) are removed afterwards. Root. See docs/benchmarks.md.`,
		Example: "  segchain perf control-plane --nodes 10,50\n  segchain perf control-plane -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			b := make([]byte, 2)
			rand.Read(b)
			if agentExe == "" {
				agentExe = sameBuildAgent(exe)
			}
			if (keepalive > 0 || hold > 0) && routing != "bgp" {
				return fmt.Errorf("perf control-plane: --bgp-keepalive and --bgp-hold need --routing bgp")
			}
			fab := lab.Fabric{Topology: topology, Routing: routing, Summaries: !noSum, Keepalive: keepalive, Hold: hold}
			if planOnly {
				return planFigures(cmd, fab, sizes, output)
			}
			res, err := cpbench.RunOptions(cmd.Context(), exe, labPrefix+hex.EncodeToString(b)+"-", sizes, cpbench.Options{Fabric: fab, AgentExe: agentExe, PerProcess: perProc}, cmd.ErrOrStderr())
			if plotTo != "" && len(res) > 0 {
				if perr := cpbench.WritePlot(res, plotTo); perr != nil {
					return perr
				}
			}
			if output == "json" {
				if werr := writeJSON(cmd.OutOrStdout(), res); werr != nil {
					return werr
				}
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', tabwriter.AlignRight)
			conv := ""
			if routing == "bgp" {
				conv = "CONVERGED\t"
			}
			fmt.Fprintln(tw, "NODES\tTOPOLOGY\tCHANGES\tPER NODE MAX\tMEAN\tLAB UP\tFROM SCRATCH\t"+conv+"NO-OP\tNO-OP CPU CTL/AGENTS\tONE CHAIN\tNODES CHANGED\tNO-OP CO\tONE CHAIN CO\tDESTROY\tCONTROLLER PEAK\tROUTE SLAB\tAGENT RSS MAX\tMEAN\tANON MAX\tANON MEAN\tPSS MAX\tPSS MEAN\tAGENT\t")
			for _, r := range res {
				c := ""
				if routing == "bgp" {
					c = secs(r.Converged) + "\t"
				}
				fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%.1f\t%s\t%s\t%s%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Nodes, r.Topology, r.Changes, r.ChangesPerNodeMax, r.ChangesPerNodeMean,
					secs(r.LabUp), secs(r.FromScratch), c,
					secs(r.NoOp), secs(r.NoOpControllerCPU)+"/"+secs(r.NoOpAgentsCPU), secs(r.OneChain), r.OneChainNodes, secs(r.NoOpChangedOnly), secs(r.OneChainChangedOnly), secs(r.Destroy), mib(r.ControllerPeakKiB), mib(r.RouteSlabKiB), mib(r.AgentRSSMaxKiB), mib(r.AgentRSSMeanKiB), mib(r.AgentRSSAnonMaxKiB), mib(r.AgentRSSAnonMeanKiB),
					mib(r.AgentPssMaxKiB), mib(r.AgentPssMeanKiB), r.AgentExe)
			}
			tw.Flush()
			return err
		},
	}
	cmd.Flags().IntSliceVar(&sizes, "nodes", []int{10, 50, 100}, "domain sizes (nodes, at least 5)")
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&routing, "routing", "", "routing.mode of the generated domains: static (default) or bgp (then CONVERGED: from the start of the apply until every leaf routes to every other leaf's locator over BGP, through its own or its pod's aggregate, with full ECMP; docs/scale.md)")
	cmd.Flags().StringVar(&topology, "topology", "line", "generated fabric: line, clos (clos3 above 64 nodes, else clos2), clos2 or clos3")
	cmd.Flags().BoolVar(&planOnly, "plan-only", false, "no lab: plan each size and print its figures (routes and ops per node, nodes a one-chain change touches, plan time and memory)")
	cmd.Flags().BoolVar(&noSum, "no-summaries", false, "Clos domains: no routing.summaries (every node routes every prefix; under bgp no aggregation)")
	cmd.Flags().StringVar(&plotTo, "plot", "", "also draw the times against the number of nodes to this file (.svg, .png)")
	cmd.Flags().StringVar(&labPrefix, "lab-prefix", "cp", "the labs' names begin with this, then a random suffix and the size")
	cmd.Flags().IntVar(&keepalive, "bgp-keepalive", 0, "under bgp: the fabric's BGP keepalive interval, seconds (routing.bgp.keepalive; default 1)")
	cmd.Flags().IntVar(&hold, "bgp-hold", 0, "under bgp: the fabric's BGP hold time, seconds (routing.bgp.hold; default 3): longer timers keep sessions up on a loaded host, and detect a silent failure that much later (docs/scale.md, session 18)")
	cmd.Flags().IntVar(&perProc, "agents-per-process", 0, "the lighter mode: the nodes' agents run K to a process (segchain agent group: each node its own listener on the host's loopback and its own mTLS identity) instead of one process per node (docs/scale.md)")
	cmd.Flags().StringVar(&agentExe, "agent-exe", "", "the agents' program (lab up --agent-exe; default: segchain-agent next to this binary if it is the same build, else this binary)")
	return cmd
}

// sameBuildAgent is segchain-agent next to exe when it reports this
// build's version and commit, else "" (exe's own agent).
func sameBuildAgent(exe string) string {
	p := filepath.Join(filepath.Dir(exe), "segchain-agent")
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		return ""
	}
	v := buildVersion()
	if strings.TrimSpace(string(out)) != "segchain-agent "+v.Version+" "+v.Commit {
		return ""
	}
	return p
}

func mib(kib int) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// planFigures is perf control-plane --plan-only: each size planned, no lab.
func planFigures(cmd *cobra.Command, fab lab.Fabric, sizes []int, output string) error {
	var res []cpbench.PlanResult
	for _, n := range sizes {
		f := fab
		f.Nodes = n
		r, err := cpbench.Plan(f)
		if err != nil {
			return fmt.Errorf("%d nodes: %w", n, err)
		}
		res = append(res, r)
	}
	if output == "json" {
		return writeJSON(cmd.OutOrStdout(), res)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "NODES\tTOPOLOGY\tSUMMARIES\tROUTES\tROUTES/NODE MAX\tLEAF MAX\tOPS/NODE MAX\tMEAN\tONE CHAIN NODES\tPLAN\tALLOCATED\t")
	for _, r := range res {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%.1f\t%d\t%s\t%s\t\n", r.Nodes, r.Topology, r.Summaries, r.Routes, r.RoutesMax, r.LeafRoutesMax,
			r.OpsMax, r.OpsMean, r.OneChainNodes, secs(r.Plan), mib(int(r.AllocKiB)))
	}
	return tw.Flush()
}
