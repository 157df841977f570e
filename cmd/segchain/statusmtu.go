package main

import (
	"context"
	"fmt"
	"io"

	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/session"
)

// printMTU ends status' text with the chains whose hosts' full-size
// packets no longer fit once encapsulated, at their headend or a node
// further on (a line each, controller.MTUWarning), and the nodes that
// could not be checked.
// They are warnings: status --check does not fail for them.
func printMTU(w io.Writer, st *controller.Status) {
	if len(st.MTU) == 0 && len(st.MTUNotes) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, m := range st.MTU {
		fmt.Fprintln(w, m)
	}
	for _, n := range st.MTUNotes {
		fmt.Fprintln(w, n)
	}
}

// warnMTU is apply's headroom check once the apply succeeded: each chain
// that does not fit is a warning on w (never a failure), each node that
// could not say a note. Apply traces no path: the headends and the SIDs'
// nodes are checked, not the transit routers (status checks those). A no-op apply that made no plan (docs/scale.md)
// checks nothing: the apply that last changed the nodes warned, and status
// checks every time.
func warnMTU(ctx context.Context, w io.Writer, s *session.Session, res *controller.Result) {
	if res == nil || res.NotPlanned || s.Controller() == nil {
		return
	}
	warnings, notes := s.Controller().Headroom(ctx, nil)
	for _, m := range warnings {
		fmt.Fprintf(w, "segchain: warning: %s\n", m)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "segchain: note: %s\n", n)
	}
}
