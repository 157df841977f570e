package plan

import (
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/kinds"
)

// Render writes the plan in a stable, human-readable form: chains with
// their SID lists, then every node's desired state. Golden files use it.
func (p *Plan) Render(w io.Writer) {
	fmt.Fprintf(w, "domain %s\n", p.Domain)
	for _, m := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", m)
	}
	for _, m := range p.Notes {
		fmt.Fprintf(w, "note: %s\n", m)
	}
	for _, s := range p.Summaries {
		fmt.Fprintf(w, "%s\n", s)
	}
	for _, c := range p.Chains {
		fmt.Fprintf(w, "chain %s: %s at %s table %d match %s\n", c.Name, c.Mode, c.Ingress, c.Table, c.Match)
		for _, h := range c.Hops {
			fmt.Fprintf(w, "  %s %s %s %s\n", h.SID, h.Node, h.Service, h.Behavior)
		}
		if len(c.Segments) > 0 {
			fmt.Fprintf(w, "  pushed as %s %s\n", c.Encap, joinAddrs(c.Segments))
		}
	}
	names := make([]string, 0, len(p.Nodes))
	for n := range p.Nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		n := p.Nodes[name]
		fmt.Fprintf(w, "node %s\n", name)
		if n.TunSrc != "" {
			fmt.Fprintf(w, "  tunsrc %s\n", n.TunSrc)
		}
		for _, s := range n.Sysctls {
			fmt.Fprintf(w, "  %s\n", s)
		}
		for _, k := range n.HMACKeys {
			fmt.Fprintf(w, "  %s\n", k)
		}
		for _, r := range n.Routes {
			fmt.Fprintf(w, "  route %s\n", r)
		}
		for _, r := range n.Rules {
			fmt.Fprintf(w, "  %s\n", r)
		}
		reg := kinds.Registry()
		for _, k := range reg.Kinds() {
			for _, x := range nodestate.ServicesOf(n.Services, k.Name()) {
				for _, l := range k.Lines(x) {
					fmt.Fprintf(w, "  %s\n", l)
				}
			}
		}
		if n.Boundary != nil {
			fmt.Fprintf(w, "  %s\n", n.Boundary)
		}
		renderBGP(w, n.BGP, "")
		renderBGP(w, p.FRR[name], " (FRR)")
	}
}

func renderBGP(w io.Writer, b *nodestate.BGP, tag string) {
	for i, l := range b.Lines() {
		if i == 0 {
			fmt.Fprintf(w, "  %s%s\n", l, tag)
		} else {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}
