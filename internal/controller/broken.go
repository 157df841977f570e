package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/segchain/segchain/internal/plan"
)

// BrokenChain is a chain crossing a node that lacks (or has a different
// version of) something the plan installs there.
type BrokenChain struct {
	Chain string `json:"chain"`
	Node  string `json:"node"`
	// Missing are the pending adds and changes of the node
	// ("route ::/0 via fc00:27::2 dev eth-nfv1 (missing)").
	Missing []string `json:"missing"`
}

// String is the status line: "chain web broken: node sf1: route ... (missing); run segchain apply".
func (b BrokenChain) String() string {
	return fmt.Sprintf("chain %s broken: node %s: %s; run segchain apply", b.Chain, b.Node, strings.Join(b.Missing, ", "))
}

// brokenBy lists the chains whose packets cross d's node when d has adds
// (something missing or changed; extra objects alone break nothing).
func brokenBy(chains []plan.Chain, d Diff) []BrokenChain {
	if len(d.Adds) == 0 {
		return nil
	}
	missing := make([]string, 0, len(d.Adds))
	for _, op := range d.Adds {
		line, _, _ := strings.Cut(op.String(), "\n")
		if rest, ok := strings.CutPrefix(line, "+ "); ok {
			line = rest + " (missing)"
		} else {
			line = strings.TrimPrefix(line, "~ ") + " (differs)"
		}
		missing = append(missing, line)
	}
	var out []BrokenChain
	for _, ch := range chains {
		if slices.Contains(ch.Nodes, d.Node) {
			out = append(out, BrokenChain{Chain: ch.Name, Node: d.Node, Missing: missing})
		}
	}
	return out
}
