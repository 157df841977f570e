package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/segchain/segchain/internal/controller"
)

// printDrift ends status' text with what differs from the domain: one
// line per node not applied or drifted (with its broken eBPF objects),
// then the chains that cross them. Unless verbose, a broken chain is one
// line naming its nodes and how many objects each lacks; verbose lists
// them (as -o json's broken[].missing does).
func printDrift(w io.Writer, st *controller.Status, verbose bool) {
	if len(st.Drift) == 0 {
		return
	}
	state := map[string]string{}
	for _, n := range st.Nodes {
		state[n.Node] = n.State
	}
	nodes := make([]string, 0, len(st.Drift))
	for n := range st.Drift {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	fmt.Fprintln(w)
	for _, n := range nodes {
		if state[n] == controller.StateNotApplied {
			fmt.Fprintf(w, "not applied: node %s holds nothing of segchain's (%d change(s) pending); run segchain apply\n", n, st.Drift[n])
			continue
		}
		fmt.Fprintf(w, "drift: node %s has %d pending change(s); run segchain plan\n", n, st.Drift[n])
		for _, f := range st.Faults[n] {
			fmt.Fprintf(w, "  broken: %s\n", f)
		}
	}
	if verbose {
		for _, b := range st.Broken {
			fmt.Fprintln(w, b)
		}
		return
	}
	// A chain none of whose nodes is applied said so under PATH.
	skip := map[string]bool{}
	for _, ch := range st.Chains {
		skip[ch.Name] = ch.State == controller.StateNotApplied
	}
	var order []string
	where := map[string][]string{}
	for _, b := range st.Broken {
		if skip[b.Chain] {
			continue
		}
		if where[b.Chain] == nil {
			order = append(order, b.Chain)
		}
		what := fmt.Sprintf("%d missing or different", len(b.Missing))
		if state[b.Node] == controller.StateNotApplied {
			what = "not applied"
		}
		where[b.Chain] = append(where[b.Chain], fmt.Sprintf("node %s (%s)", b.Node, what))
	}
	for _, ch := range order {
		fmt.Fprintf(w, "chain %s broken: %s; run segchain apply (status -v lists what is missing)\n", ch, strings.Join(where[ch], ", "))
	}
}
