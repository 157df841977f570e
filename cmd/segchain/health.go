package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/health"
)

func newHealthCmd() *cobra.Command {
	var labName string
	var dur time.Duration
	cmd := &cobra.Command{
		Use:   "health [--lab NAME]",
		Short: "Check the instances of service-function pools and steer flows away from failed ones (runs until Ctrl-C)",
		Long: `Runs the health checks of every pool selector apply installed on the lab's
nodes (docs/pools.md): per instance, the domain's health kind (srv6: an
in-band probe along the instance's SID list through its proxy and SF and the
chain's egress, back to the headend; carrier; echo; tcp) every interval, and
after fall failures in a row (rise successes) writes the instance's
liveness straight into the headend's pinned map: the data path moves the
instance's flows at once, with no control-plane round trip. One log line
per transition (stderr); status shows each instance's health, packets and
last transition, and status --check exits 2 while an instance is down.
It follows re-applies (pools added, changed, removed) and keeps running
until interrupted (or --for). Through agents (lab up --agents) every agent runs the
checks of its own node itself: this command is for labs without agents.

Exit status: 0 when interrupted or --for ran out, 1 on error.`,
		Example: "  segchain health --lab default --for 2s\n  segchain status --lab default --check",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if labName == "" {
				labName = defaultLab()
			}
			l, err := getLab(labName)
			if err != nil {
				return err
			}
			if len(l.Nodes) == 0 {
				return errors.New("the lab has no nodes")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if dur > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, dur)
				defer cancel()
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			health.RunNodes(ctx, l.Nodes, log)
			return nil
		},
	}
	cmd.Flags().StringVar(&labName, "lab", "", "lab whose nodes to check (default: default, or $"+labEnv+")")
	cmd.Flags().DurationVar(&dur, "for", 0, "stop after this long (default: run until interrupted)")
	return cmd
}
