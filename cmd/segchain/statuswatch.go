package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/controller"
)

// statusWatch is status --watch: per-SID rates from counters sampled
// every interval.
type statusWatch struct {
	on       bool
	interval time.Duration
	count    int
}

func (w *statusWatch) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&w.on, "watch", false, "sample the per-SID counters every --interval and show packet, byte and drop rates until Ctrl-C")
	cmd.Flags().DurationVar(&w.interval, "interval", 2*time.Second, "with --watch, the time between samples")
	cmd.Flags().IntVar(&w.count, "count", 0, "with --watch, stop after this many samples (0: until Ctrl-C)")
}

// check rejects --interval and --count without --watch: they would be
// ignored.
func (w *statusWatch) check(cmd *cobra.Command) error {
	if w.on {
		return nil
	}
	for _, f := range []string{"interval", "count"} {
		if cmd.Flags().Changed(f) {
			return fmt.Errorf("--%s is for --watch", f)
		}
	}
	return nil
}

// sidRate is one SID's counters at a sample and their rates since the
// sample before (status --watch -o json: sids[]).
type sidRate struct {
	Node     string `json:"node"`
	SID      string `json:"sid"`
	Behavior string `json:"behavior"`
	Service  string `json:"service,omitempty"`
	// Counted is false for a SID whose behaviour keeps no counters.
	Counted bool   `json:"counted"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	Drops   uint64 `json:"drops"` // the SID's errors: packets it dropped
	// The rates: counter deltas over the measured time between samples.
	PacketsPerS float64 `json:"packets_per_s"`
	BytesPerS   float64 `json:"bytes_per_s"`
	DropsPerS   float64 `json:"drops_per_s"`
	// Reset: a counter went back (the SID was re-created, its program
	// reloaded) or the SID is new since the sample before; its rate counts
	// from zero.
	Reset bool `json:"reset,omitempty"`
}

// watchSample is one interval of status --watch (one JSON line).
type watchSample struct {
	Time    time.Time `json:"time"`
	Elapsed float64   `json:"elapsed_s"` // measured time since the sample before
	Domain  string    `json:"domain"`
	SIDs    []sidRate `json:"sids"`
	// Errors are the nodes that could not be read, with why.
	Errors map[string]string `json:"errors,omitempty"`
}

// counterSample is what one read of every node's counters gave.
type counterSample struct {
	at    time.Time
	nodes []controller.NodeStatus
}

func sidKey(node, sid, behavior string) string { return node + " " + sid + " " + behavior }

// delta is cur-prev for a monotonic counter; a counter that went back was
// reset, and counts from zero.
func delta(prev, cur uint64) (uint64, bool) {
	if cur < prev {
		return cur, true
	}
	return cur - prev, false
}

// rates turns two samples into per-SID rates over the time measured
// between them.
func rates(domain string, prev, cur counterSample) watchSample {
	out := watchSample{Time: cur.at, Elapsed: cur.at.Sub(prev.at).Seconds(), Domain: domain, SIDs: []sidRate{}}
	before := map[string]sidRate{}
	for _, n := range prev.nodes {
		for _, s := range n.SIDs {
			before[sidKey(n.Node, s.SID.String(), s.Behavior)] = sidRate{Packets: s.Packets, Bytes: s.Bytes, Drops: s.Errors}
		}
	}
	for _, n := range cur.nodes {
		if n.Error != "" {
			if out.Errors == nil {
				out.Errors = map[string]string{}
			}
			out.Errors[n.Node] = n.Error
			continue
		}
		for _, s := range n.SIDs {
			r := sidRate{Node: n.Node, SID: s.SID.String(), Behavior: s.Behavior, Service: s.Service, Counted: s.Counted,
				Packets: s.Packets, Bytes: s.Bytes, Drops: s.Errors}
			if s.Counted {
				p, seen := before[sidKey(n.Node, r.SID, r.Behavior)]
				dp, r1 := delta(p.Packets, r.Packets)
				db, r2 := delta(p.Bytes, r.Bytes)
				dd, r3 := delta(p.Drops, r.Drops)
				r.Reset = !seen || r1 || r2 || r3
				if out.Elapsed > 0 {
					r.PacketsPerS = float64(dp) / out.Elapsed
					r.BytesPerS = float64(db) / out.Elapsed
					r.DropsPerS = float64(dd) / out.Elapsed
				}
			}
			out.SIDs = append(out.SIDs, r)
		}
	}
	return out
}

// isTerminal reports whether w is a terminal (the screen is then redrawn
// in place).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// clearHome moves the cursor home and clears the screen (ANSI).
const clearHome = "\x1b[H\x1b[2J"

// run samples until Ctrl-C (SIGINT or SIGTERM: exit status 0), ctx's end
// or count samples.
func (w *statusWatch) run(cmd *cobra.Command, c *controller.Controller, output string) error {
	if w.interval <= 0 {
		return fmt.Errorf("--interval %s: want a positive duration", w.interval)
	}
	if w.count < 0 {
		return fmt.Errorf("--count %d: want 0 (until Ctrl-C) or more", w.count)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := cmd.OutOrStdout()
	tty := output != "json" && isTerminal(out)
	read := func() counterSample {
		nodes := c.Counters(ctx)
		return counterSample{at: time.Now(), nodes: nodes}
	}
	prev := read()
	if tty {
		fmt.Fprintf(out, "%sdomain %s: sampling every %s (Ctrl-C to stop)\n", clearHome, c.Plan.Domain, w.interval)
	}
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for n := 0; w.count == 0 || n < w.count; n++ {
		select {
		case <-ctx.Done():
			return watchEnd(cmd.Context())
		case <-tick.C:
		}
		cur := read()
		if ctx.Err() != nil {
			return watchEnd(cmd.Context()) // a sample cut short says nothing
		}
		s := rates(c.Plan.Domain, prev, cur)
		prev = cur
		var err error
		switch {
		case output == "json":
			err = json.NewEncoder(out).Encode(s)
		case tty:
			fmt.Fprint(out, clearHome)
			err = printRatesScreen(out, s, w.interval)
		default:
			err = printRatesLines(out, s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// watchEnd is the exit of a watch stopped by a signal (nil: status 0) or
// by its parent context (its error).
func watchEnd(parent context.Context) error {
	if err := parent.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// printRatesScreen is one terminal screen: a table of every SID.
func printRatesScreen(w io.Writer, s watchSample, every time.Duration) error {
	fmt.Fprintf(w, "domain %s  %s  every %s (measured %.2fs)  Ctrl-C to stop\n\n", s.Domain, s.Time.Format("15:04:05"), every, s.Elapsed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSID\tBEHAVIOR\tSERVICE\tPKT/S\tDROP/S\tBYTES/S\tPACKETS\tDROPS")
	for _, r := range s.SIDs {
		if !r.Counted {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t-\t-\t-\t-\t-\n", r.Node, r.SID, r.Behavior, r.Service)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f\t%.1f\t%.0f\t%d\t%d\n", r.Node, r.SID, r.Behavior, r.Service,
			r.PacketsPerS, r.DropsPerS, r.BytesPerS, r.Packets, r.Drops)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range sortedKeys(s.Errors) {
		fmt.Fprintf(w, "node %s: error: %s\n", n, s.Errors[n])
	}
	return nil
}

// printRatesLines appends one self-describing line per SID (and per node
// that could not be read) for logs and pipes: no escape codes.
func printRatesLines(w io.Writer, s watchSample) error {
	ts := s.Time.Format(time.RFC3339)
	for _, r := range s.SIDs {
		svc := r.Service
		if svc == "" {
			svc = "-"
		}
		var err error
		if r.Counted {
			_, err = fmt.Fprintf(w, "%s %s %s %s %s pkt/s=%.1f drop/s=%.1f bytes/s=%.0f packets=%d drops=%d\n",
				ts, r.Node, r.SID, r.Behavior, svc, r.PacketsPerS, r.DropsPerS, r.BytesPerS, r.Packets, r.Drops)
		} else {
			_, err = fmt.Fprintf(w, "%s %s %s %s %s not counted\n", ts, r.Node, r.SID, r.Behavior, svc)
		}
		if err != nil {
			return err
		}
	}
	for _, n := range sortedKeys(s.Errors) {
		if _, err := fmt.Fprintf(w, "%s %s error: %s\n", ts, n, s.Errors[n]); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
