package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/oam"
)

func newGraphCmd() *cobra.Command {
	var f domainFlags
	var format string
	var noCounters bool
	var chains []string
	cmd := &cobra.Command{
		Use:   "graph --lab NAME [-f FILE] [--format svg|dot] [--chain NAME,...] [--no-counters] [-o json]",
		Short: "Draw the domain: nodes by role, links, every chain's path through its services",
		Long: `graph writes a picture of the lab's domain to standard output: the nodes
by role (hosts, headends, routers, NFV nodes, SR-unaware SFs), the links in
grey, and each chain in its own colour as an arrowed path through its
services, the SF behind a proxy included. A chain traced with segchain
trace is drawn as its last probe went (and labelled with the probe's
arrival time at each hop, in µs, its broken hop in red); the others along
the shortest paths between their hops. Each SID is labelled with its
packet counter (read from the nodes; --no-counters: the plan only). With
--chain, only the chains named are in colour and the rest grey. Nodes no
coloured chain crosses are greyed.

--format svg (default) is a standalone SVG; --format dot is Graphviz
input (dot -Tpng). -o json prints the graph's model: nodes with their
layout layer and row, links, chains with their path, times and broken hop.
Layout: nodes in columns by their distance from the first chain's source
host, wrapped into bands of 12 columns (a long line of nodes stays on a
page). See docs/oam.md.`,
		Example: "  segchain graph --lab default > domain.svg\n  segchain graph --lab default --format dot",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(f.output); err != nil {
				return err
			}
			if format != "svg" && format != "dot" {
				return fmt.Errorf("--format %q: svg or dot", format)
			}
			if f.labNm == "" {
				return errors.New("graph draws a lab: name it with --lab NAME")
			}
			s, err := f.session(cmd, true)
			if err != nil {
				return err
			}
			defer s.Close()
			c := s.Controller()
			d := oam.Domain{Config: s.Domain, Plan: s.Plan, Netns: s.Lab.Nodes}
			var counters map[string][]agent.SIDCounters
			if !noCounters {
				counters = map[string][]agent.SIDCounters{}
				for _, n := range c.Counters(context.Background()) {
					for _, s := range n.SIDs {
						counters[n.Node] = append(counters[n.Node], s.SIDCounters)
					}
				}
			}
			traces, err := oam.LoadReports(oam.TraceDir(f.labNm))
			if err != nil {
				return fmt.Errorf("last traces: %w", err)
			}
			g := oam.BuildGraph(d, counters, traces, oam.GraphOptions{Highlight: chains})
			switch {
			case f.output == "json":
				return writeJSON(cmd.OutOrStdout(), g)
			case format == "dot":
				_, err = fmt.Fprint(cmd.OutOrStdout(), g.DOT())
			default:
				_, err = fmt.Fprint(cmd.OutOrStdout(), g.SVG())
			}
			return err
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&format, "format", "svg", "picture format: svg or dot (Graphviz)")
	cmd.Flags().BoolVar(&noCounters, "no-counters", false, "do not read the nodes' per-SID counters")
	cmd.Flags().StringSliceVar(&chains, "chain", nil, "draw only these chains in colour, the others grey (comma-separated or repeated)")
	return cmd
}
