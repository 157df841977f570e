package chainpath

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// MaxBranches bounds the equal-cost branches followed per segment: a mesh
// of ECMP routes multiplies them.
const MaxBranches = 32

// Table is what reading one node's main table gave.
type Table struct {
	Routes []nodestate.FIBRoute
	Err    error
}

// Segment is the path to one SID of a chain: from the node the previous
// SID (or the headend) left the packets at, to the SID's node.
type Segment struct {
	SID      netip.Addr `json:"sid"`
	Node     string     `json:"node"`
	Behavior string     `json:"behavior"`
	// Hops lists, per equal-cost branch, the nodes crossed, the start
	// first; a branch that reaches the SID's node ends with it, one that
	// does not ends where it stopped (Problems say why).
	Hops     [][]string `json:"hops"`
	Problems []string   `json:"problems,omitempty"`
}

// Reached reports whether every branch ends at the SID's node.
func (s Segment) Reached() bool {
	for _, b := range s.Hops {
		if len(b) == 0 || b[len(b)-1] != s.Node {
			return false
		}
	}
	return len(s.Hops) > 0
}

// Tracer follows SIDs through a domain's links and its nodes' tables.
type Tracer struct {
	// ends maps node → interface → link end.
	ends map[string]map[string]plan.Link
	// owner maps a link address to its node.
	owner  map[netip.Addr]string
	tables map[string]Table
}

// New returns a tracer over the plan's links and the tables read from the
// nodes (a node missing from tables was not read).
func New(links []plan.Link, tables map[string]Table) *Tracer {
	t := &Tracer{ends: map[string]map[string]plan.Link{}, owner: map[netip.Addr]string{}, tables: tables}
	for _, l := range links {
		if t.ends[l.Node] == nil {
			t.ends[l.Node] = map[string]plan.Link{}
		}
		t.ends[l.Node][l.Iface] = l
		for _, a := range l.Addrs {
			t.owner[a.Addr()] = l.Node
		}
	}
	return t
}

// Chain traces a chain from its headend: one Segment per SID, each
// starting at the previous SID's node (whether or not every branch got
// there: the rest of the chain is shown for the packets that did).
func (t *Tracer) Chain(headend string, hops []plan.Hop) []Segment {
	out := make([]Segment, 0, len(hops))
	at := headend
	for _, h := range hops {
		out = append(out, t.Segment(at, h))
		at = h.Node
	}
	return out
}

// Segment traces one SID from node start.
func (t *Tracer) Segment(start string, h plan.Hop) Segment {
	w := &walk{t: t, sid: h.SID, target: h.Node}
	w.follow([]string{start})
	return Segment{SID: h.SID, Node: h.Node, Behavior: h.Behavior, Hops: w.branches, Problems: w.problems}
}

// walk is the depth-first walk of one segment.
type walk struct {
	t        *Tracer
	sid      netip.Addr
	target   string
	branches [][]string
	problems []string
	capped   bool
}

func (w *walk) problem(format string, a ...any) {
	p := fmt.Sprintf(format, a...)
	if !slices.Contains(w.problems, p) {
		w.problems = append(w.problems, p)
	}
}

// end records a branch.
func (w *walk) end(path []string) {
	if len(w.branches) >= MaxBranches {
		if !w.capped {
			w.capped = true
			w.problem("more than %d equal-cost branches to %s: the others are not shown", MaxBranches, w.sid)
		}
		return
	}
	for _, b := range w.branches {
		if slices.Equal(b, path) {
			return
		}
	}
	w.branches = append(w.branches, path)
}

// follow continues path (which ends at the node the packet is at) towards
// the SID, branching on every next hop.
func (w *walk) follow(path []string) {
	cur := path[len(path)-1]
	if cur == w.target {
		w.end(path)
		return
	}
	if slices.Contains(path[:len(path)-1], cur) {
		// Every node is visited once per branch, so the walk is bounded
		// by the number of nodes.
		w.end(path)
		w.problem("loop: %s", strings.Join(path, " → "))
		return
	}
	if len(w.branches) >= MaxBranches {
		w.end(path)
		return
	}
	tab, ok := w.t.tables[cur]
	switch {
	case !ok:
		w.end(path)
		w.problem("path unknown at %s: its routes were not read", cur)
		return
	case errors.Is(tab.Err, agent.ErrTooOld):
		w.end(path)
		w.problem("path unknown at %s: agent too old", cur)
		return
	case tab.Err != nil:
		w.end(path)
		w.problem("path unknown at %s: %v", cur, tab.Err)
		return
	}
	r, ok := Lookup(tab.Routes, w.sid)
	if !ok {
		w.end(path)
		w.problem("unreachable at %s: no route to %s", cur, w.sid)
		return
	}
	switch {
	case r.Type == "blackhole" || r.Type == "unreachable" || r.Type == "prohibit" || r.Type == "throw":
		w.end(path)
		w.problem("unreachable at %s: %s", cur, r)
		return
	case r.Type == "local" || r.Encap == "seg6local":
		w.end(path)
		w.problem("%s ends at %s (%s), not at its node %s", w.sid, cur, r, w.target)
		return
	}
	var live []nodestate.FIBNextHop
	for _, nh := range r.NextHops {
		if !nh.Dead {
			live = append(live, nh)
		}
	}
	if len(live) == 0 {
		w.end(path)
		w.problem("unreachable at %s: no usable next hop in %s", cur, r)
		return
	}
	for _, nh := range live {
		next, err := w.t.nextNode(cur, nh)
		if err != nil {
			w.end(path)
			w.problem("unreachable at %s: %v (%s)", cur, err, r)
			continue
		}
		if nh.LinkDown {
			w.problem("%s: next hop %s has no carrier (%s)", cur, hopString(nh), r)
		}
		w.follow(append(slices.Clip(path), next))
	}
}

// nextNode is the node a next hop of node cur leads to: the owner of the
// gateway address on the next hop's link, or the link's other end for a
// link-local gateway (FRR installs those) and for a connected route.
func (t *Tracer) nextNode(cur string, nh nodestate.FIBNextHop) (string, error) {
	if nh.Dev == "" {
		if o, ok := t.owner[nh.Via]; ok && nh.Via.IsValid() {
			return o, nil
		}
		return "", fmt.Errorf("next hop %s is no address of the domain's links", hopString(nh))
	}
	l, ok := t.ends[cur][nh.Dev]
	if !ok {
		return "", fmt.Errorf("next hop %s: %s is no link of the domain", hopString(nh), nh.Dev)
	}
	if !nh.Via.IsValid() || nh.Via.IsLinkLocalUnicast() {
		return l.Peer, nil
	}
	switch o := t.owner[nh.Via]; o {
	case l.Peer:
		return o, nil
	case cur:
		return "", fmt.Errorf("next hop %s is %s's own address", hopString(nh), cur)
	}
	return "", fmt.Errorf("next hop %s: no node has that address on the link to %s", hopString(nh), l.Peer)
}

func hopString(nh nodestate.FIBNextHop) string {
	var parts []string
	if nh.Via.IsValid() {
		parts = append(parts, "via "+nh.Via.String())
	}
	if nh.Dev != "" {
		parts = append(parts, "dev "+nh.Dev)
	}
	return strings.Join(parts, " ")
}

// Lookup is the kernel's choice among routes for dst: the longest prefix
// that contains it, of those the lowest metric.
func Lookup(routes []nodestate.FIBRoute, dst netip.Addr) (nodestate.FIBRoute, bool) {
	var best nodestate.FIBRoute
	found := false
	for _, r := range routes {
		if !r.Dst.Contains(dst) {
			continue
		}
		if !found || r.Dst.Bits() > best.Dst.Bits() || (r.Dst.Bits() == best.Dst.Bits() && r.Metric < best.Metric) {
			best, found = r, true
		}
	}
	return best, found
}
