package controller

import (
	"errors"
	"fmt"
	"strings"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/kinds"
)

// ErrConflict is returned (wrapped) by Apply, dry run included, when the
// domain wants an object that something else owns on a node.
var ErrConflict = errors.New("conflict with state the domain does not own")

// Conflicts lists the desired routes that would replace a route the domain
// does not own (observed.Foreign: a SID made by hand with segchain sid add
// or by another tool) — same destination, table and metric, so the
// kernel's replace would silently take it over.
func Conflicts(observed, desired *nodestate.Node) []string {
	if len(observed.Foreign) == 0 {
		return nil
	}
	foreign := map[string]nodestate.ForeignRoute{}
	for _, f := range observed.Foreign {
		foreign[f.Route.Key()] = f
	}
	var out []string
	want := append([]nodestate.Route(nil), desired.Routes...)
	for _, k := range kinds.Registry().Kinds() {
		for _, s := range nodestate.ServicesOf(desired.Services, k.Name()) {
			want = append(want, nodestate.Route{Dst: s.SID, Seg6Local: &nodestate.Seg6Local{Action: k.ServiceBehavior(s)}, Owner: k.Noun()})
		}
	}
	for _, r := range want {
		f, ok := foreign[r.Key()]
		if !ok {
			continue
		}
		who := fmt.Sprintf("installed by another tool (route protocol %d): remove it with ip -6 route del", f.Protocol)
		if nodestate.HandMade(f.Protocol) {
			who = fmt.Sprintf("made by hand (segchain sid add): remove it with segchain sid del %s", f.Route.Dst)
		}
		what := r.String()
		if r.Owner != "" {
			what += " for " + r.Owner
		}
		out = append(out, fmt.Sprintf("sid %s: the domain wants %s, but %s is %s, or change the domain",
			r.Dst, what, f.Route.String(), who))
	}
	return out
}

// ErrUnsupported is returned (wrapped) by Apply, dry run included, when a
// node's kernel lacks a feature the domain needs there.
var ErrUnsupported = errors.New("the kernel lacks what the domain needs")

// blockers joins what stops an apply before it starts, every node's
// conflicts and unsupported features, into one error.
func (r *Result) blockers() error {
	var errs []error
	for _, b := range []struct {
		err  error
		pick func(Diff) []string
	}{
		{ErrUnsupported, func(d Diff) []string { return d.Unsupported }},
		{ErrConflict, func(d Diff) []string { return d.Conflicts }},
	} {
		var lines []string
		for _, d := range r.Diffs {
			for _, c := range b.pick(d) {
				lines = append(lines, "node "+d.Node+": "+c)
			}
		}
		if len(lines) > 0 {
			errs = append(errs, fmt.Errorf("%w:\n  %s", b.err, strings.Join(lines, "\n  ")))
		}
	}
	return errors.Join(errs...)
}
