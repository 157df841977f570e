package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/segchain/segchain/internal/metrics"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/oam/oamsvc"
)

// serveSampling serves m on addr until the returned stop.
func serveSampling(m *metrics.Sampling, addr string) (net.Addr, func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(l) }()
	return l.Addr(), func() { hs.Close() }, nil
}

// sampleExport is what both continuous exports keep: the metrics they
// serve and the totals they print at the end.
type sampleExport struct {
	m                    *metrics.Sampling
	at                   net.Addr
	total                oam.SampleCounts
	complete, incomplete uint64
}

// startExport serves a new sampleExport on addr and gives the context it
// runs in (until interrupted, or for dur > 0); stop ends both.
func startExport(cmd *cobra.Command, addr string, dur time.Duration) (*sampleExport, context.Context, func(), error) {
	e := &sampleExport{m: metrics.NewSampling()}
	at, stopServe, err := serveSampling(e.m, addr)
	if err != nil {
		return nil, nil, nil, err
	}
	e.at = at
	ctx, cancel := cmd.Context(), context.CancelFunc(func() {})
	if dur > 0 {
		ctx, cancel = context.WithTimeout(ctx, dur)
	}
	return e, ctx, func() { cancel(); stopServe() }, nil
}

// window exports one window of sightings and adds it to the totals.
func (e *sampleExport) window(w oam.SampleWindow) {
	w.Export(e.m)
	e.total = w.Counts
	if len(w.Hops) > 0 {
		e.complete += w.Hops[0].Packets
	}
	e.incomplete += w.Incomplete
}

// followKept is trace --metrics-listen ADDR without --sample: the chain's
// kept sampling (chains[].oam.sample) read from its agents and paired
// here, served for Prometheus until interrupted or for dur (> 0).
func followKept(cmd *cobra.Command, d oam.Domain, chain, addr string, dur time.Duration) error {
	k, ok := d.Remote.(*oamsvc.Client)
	if !ok {
		// No agents (a lab's namespaces): nothing keeps the sampling
		// between commands; run the chain's declared rate here instead.
		rate, err := oam.DeclaredRate(d, chain)
		if err != nil {
			return err
		}
		if rate == 0 {
			return fmt.Errorf("chain %s declares no sampling (chains[].oam.sample): give --sample N", chain)
		}
		return sampleContinuous(cmd, d, chain, rate, addr, dur)
	}
	e, ctx, stop, err := startExport(cmd, addr, dur)
	if err != nil {
		return err
	}
	defer stop()
	err = oam.FollowKept(ctx, d, k, chain, oam.ContinuousOptions{
		Started: func() {
			fmt.Fprintf(cmd.ErrOrStderr(), "exporting %s's kept sampling: http://%s/metrics\n", chain, e.at)
		},
		Window: e.window})
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "kept sampling of %s: %d packets, %d marked since apply; %d seen at every hop, %d incomplete while exported\n",
		chain, e.total.Seen, e.total.Marked, e.complete, e.incomplete)
	return nil
}

// sampleContinuous is trace --sample N --metrics-listen ADDR: continuous
// sampling of chain served for Prometheus on addr, until interrupted or
// for dur (> 0).
func sampleContinuous(cmd *cobra.Command, d oam.Domain, chain string, rate uint32, addr string, dur time.Duration) error {
	e, ctx, stop, err := startExport(cmd, addr, dur)
	if err != nil {
		return err
	}
	defer stop()
	err = oam.SampleContinuous(ctx, d, chain, oam.ContinuousOptions{Rate: rate,
		Started: func() {
			fmt.Fprintf(cmd.ErrOrStderr(), "sampling %s, 1 in %d, continuously: http://%s/metrics\n", chain, rate, e.at)
		},
		Window: e.window})
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "sampled %s: %d packets, %d marked, %d seen at every hop, %d incomplete, %d not marked (HMAC)\n",
		chain, e.total.Seen, e.total.Marked, e.complete, e.incomplete, e.total.HMAC)
	return nil
}
