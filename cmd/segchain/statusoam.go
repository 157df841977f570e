package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/oam/oamsvc"
	"github.com/segchain/segchain/internal/session"
)

// The kept OAM of chains[].oam (docs/oam.md, "Kept by apply"): apply and
// destroy hand it to the agents, status shows the kept sampling's per-hop
// latency (paired here from every node's sightings).

// keepOAM runs after a successful apply (destroy: drop) and says on w
// which nodes could not keep it.
func keepOAM(ctx context.Context, w io.Writer, s *session.Session, destroy bool) error {
	r, err := oamsvc.Keep(ctx, s, destroy)
	if err != nil {
		return fmt.Errorf("chains[].oam: %w", err)
	}
	if !destroy && len(r.Unkept) > 0 {
		fmt.Fprintf(w, "chains[].oam: not kept on %s (no agent: in a lab without agents, segchain trace --sample runs the sampling)\n", strings.Join(r.Unkept, ", "))
	}
	return nil
}

// statusJSON is status -o json with the kept sampling.
type statusJSON struct {
	*controller.Status
	Sampling []oam.KeptChain `json:"sampling,omitempty"`
}

// printSampling shows each kept sampling: the marker's counts and per hop
// the packets paired and their STEP and AT quantiles.
func printSampling(w io.Writer, sm []oam.KeptChain) {
	if len(sm) == 0 {
		return
	}
	fmt.Fprintln(w, "\nsampling (chains[].oam.sample):")
	for _, c := range sm {
		fmt.Fprintf(w, "  %s 1 in %d: %d packets, %d marked", c.Chain, c.Rate, c.Packets, c.Marked)
		if c.HMAC > 0 {
			fmt.Fprintf(w, ", %d not marked (HMAC)", c.HMAC)
		}
		fmt.Fprintf(w, "; of the last %d marked, %d not seen at every hop\n", c.Window, c.Incomplete)
		for _, p := range c.Problems {
			fmt.Fprintf(w, "    problem: %s\n", p)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    #\tHOP\tNODE\tSID\tPACKETS\tSTEP p50 µs\tp99\tAT p50 µs\tp99")
		for i, h := range c.Hops {
			q := func(x *oam.Quantiles) (string, string) {
				if x == nil {
					return "-", "-"
				}
				return fmt.Sprintf("%.1f", x.P50), fmt.Sprintf("%.1f", x.P99)
			}
			s50, s99 := q(h.StepUS)
			a50, a99 := q(h.AtUS)
			sid := h.SID
			if sid == "" {
				sid = "-"
			}
			fmt.Fprintf(tw, "    %d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", i, h.Kind, h.Node, sid, h.Packets, s50, s99, a50, a99)
		}
		tw.Flush()
	}
}
