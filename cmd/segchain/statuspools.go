package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/segchain/segchain/internal/controller"
)

// printPools shows every pool selector: each instance's health, packets
// and last transition (docs/pools.md). The selector reports itself as a
// local SID of behaviour "pool" (internal/pool/datapath's Counters).
func printPools(w io.Writer, nodes []controller.NodeStatus) {
	first := true
	for _, n := range nodes {
		for _, s := range n.SIDs {
			if s.Behavior != "pool" {
				continue
			}
			if first {
				fmt.Fprintln(w, "\npools:")
				first = false
			}
			parts := strings.Split(s.Route, " | ")
			name := strings.Fields(parts[0])
			pname := ""
			if len(name) > 1 {
				pname = name[1]
			}
			fmt.Fprintf(w, "  %s at %s (%s): moved %d bypass %d drop %d errors %d\n", pname, n.Node, s.SID,
				s.Detail["moved"], s.Detail["bypass"], s.Detail["drop"], s.Errors)
			var reasons []string
			for k, v := range s.Detail {
				if r, ok := strings.CutPrefix(k, "drop-"); ok && v > 0 {
					reasons = append(reasons, fmt.Sprintf("%s %d", r, v))
				}
			}
			if len(reasons) > 0 {
				sort.Strings(reasons)
				fmt.Fprintf(w, "    dropped by reason: %s\n", strings.Join(reasons, ", "))
			}
			var inst []string
			for k := range s.Detail {
				if x, ok := strings.CutPrefix(k, "inst-"); ok {
					inst = append(inst, x)
				}
			}
			sort.Strings(inst)
			health := map[string]string{}
			if len(parts) > 1 {
				for _, h := range strings.Split(strings.TrimPrefix(parts[1], "health "), "; ") {
					if f := strings.Fields(h); len(f) > 0 {
						health[f[0]] = strings.TrimSpace(strings.TrimPrefix(h, f[0]))
					}
				}
			}
			for _, x := range inst {
				fmt.Fprintf(w, "    %-12s packets %-10d %s\n", x, s.Detail["inst-"+x], health[x])
			}
			if len(parts) > 2 {
				fmt.Fprintf(w, "    (%s)\n", parts[2])
			}
		}
	}
}

// degradedPools lists the pool instances that are down ("pool/instance at
// node"): status --check fails while any is.
func degradedPools(st *controller.Status) []string {
	var out []string
	for _, n := range st.Nodes {
		for _, s := range n.SIDs {
			if s.Behavior != "pool" {
				continue
			}
			for k, v := range s.Detail {
				if x, ok := strings.CutPrefix(k, "up-"); ok && v == 0 {
					out = append(out, fmt.Sprintf("%s at %s", x, n.Node))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
