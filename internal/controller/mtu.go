package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strings"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/chainpath"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// MTUWarning is a chain whose encapsulated packets do not fit somewhere
// on their way: its hosts' largest packet plus the chain's headers
// exceeds the MTU of the interface a node forwards them by — the
// headend's way out, or a segment or transit node's towards the next SID.
// Linux drops such a packet; its Packet Too Big goes to the outer
// packet's source, the headend, never to the host (docs/deploy.md, "MTU").
type MTUWarning struct {
	Chain string `json:"chain"`
	// Node is the node whose way out is too small: the headend, or a node
	// forwarding towards Towards.
	Node string `json:"node"`
	// Towards is the SID a segment or transit node forwards the chain's
	// packets to (unset at the headend, where it is the chain's first).
	Towards netip.Addr `json:"towards,omitzero"`
	// Headend is the chain's headend where Node is another node.
	Headend string `json:"headend,omitempty"`
	// In is the headend's input interface with the largest MTU (the
	// chain's iif, else its host-side interfaces), InMTU its MTU.
	In    string `json:"in"`
	InMTU int    `json:"in_mtu"`
	// Overhead is the bytes the chain's headend route adds
	// (nodestate.Seg6Encap.Overhead).
	Overhead int `json:"overhead"`
	// Out is the interface of Node's route to the next SID, OutMTU the MTU
	// a packet leaving by it must fit in.
	Out    string `json:"out"`
	OutMTU int    `json:"out_mtu"`
	// Limit is the largest packet the chain carries there: OutMTU − Overhead.
	Limit int `json:"limit"`
}

func (w MTUWarning) String() string {
	at, in := w.Node, w.In
	if w.Towards.IsValid() {
		at = fmt.Sprintf("%s towards %s", w.Node, w.Towards)
		in = fmt.Sprintf("%s at %s", w.In, w.Headend)
	}
	return fmt.Sprintf("mtu: chain %s at %s: %d (%s) + %d bytes of SRv6 headers > %d (%s): "+
		"Linux drops packets over %d bytes with no Packet Too Big to their sender (docs/deploy.md)",
		w.Chain, at, w.InMTU, in, w.Overhead, w.OutMTU, w.Out, w.Limit)
}

// headroomChain is what the check needs of one chain at its headend.
type headroomChain struct {
	chain    plan.Chain
	first    netip.Addr
	overhead int
	in       []string // the chain's iifs; nil: the headend's outside links
	cross    map[string]bool
}

// Headroom checks that the hosts' largest packet still fits, once the
// chain's headers are added, every interface the chain's packets are
// forwarded by: at every chain's headend (asking its agent its MTUs and
// its route to the chain's first SID, agent.MTUReader), and at the nodes
// that forward them on towards each later SID — the previous SID's node
// and, where paths (status' traced chains, by chain name) are given, the
// transit nodes between (their routes to that SID). It never fails: a
// node that cannot say (an agent older than the MTUs RPC, an unreachable
// node) is a note and what it forwards is not checked.
//
// A controller without a plan (a no-op apply that skipped planning,
// internal/session) has no chains to check: nothing.
func (c *Controller) Headroom(ctx context.Context, paths map[string][]chainpath.Segment) (warnings []MTUWarning, notes []string) {
	if c.Plan == nil {
		return nil, nil
	}
	byNode := map[string][]headroomChain{}
	for _, ch := range c.Plan.Chains {
		want := c.Plan.Nodes[ch.Ingress]
		if want == nil || (c.Scope != nil && !c.Scope[ch.Ingress]) {
			continue
		}
		hc := headroomChain{chain: ch, cross: map[string]bool{}}
		for _, n := range ch.Nodes {
			hc.cross[n] = true
		}
		for _, r := range want.Routes {
			if r.Table != ch.Table || r.Seg6 == nil || r.Seg6.OFlag || len(r.Seg6.Segs) == 0 {
				continue
			}
			if o := r.Seg6.Overhead(); o > hc.overhead {
				hc.overhead, hc.first = o, r.Seg6.Segs[0]
			}
		}
		if hc.overhead == 0 {
			continue
		}
		for _, r := range want.Rules {
			if r.Table == ch.Table && r.Iif != "" && !slices.Contains(hc.in, r.Iif) {
				hc.in = append(hc.in, r.Iif)
			}
		}
		byNode[ch.Ingress] = append(byNode[ch.Ingress], hc)
	}
	// One round of questions: each headend its route to its chains' first
	// SIDs and its links, each node that forwards them on its routes to the
	// SIDs it forwards to.
	asks := map[string][]netip.Addr{}
	onward := map[string][]forward{}
	for n, chains := range byNode {
		for _, hc := range chains {
			asks[n] = append(asks[n], hc.first)
			for _, f := range forwarders(hc.chain, paths[hc.chain.Name]) {
				if c.Plan.Nodes[f.node] != nil && (c.Scope == nil || c.Scope[f.node]) {
					onward[hc.chain.Name] = append(onward[hc.chain.Name], f)
					asks[f.node] = append(asks[f.node], f.dst)
				}
			}
		}
	}
	answers, noted := c.askMTUs(ctx, asks)
	for _, n := range slices.Sorted(maps.Keys(byNode)) {
		m := answers[n]
		if m == nil {
			continue
		}
		// What comes in at the headend (the chains' inputs) against its
		// way out, then against every later node's: each carries the same
		// outer packet.
		for _, w := range c.headroomAt(n, byNode[n], m) {
			if w.InMTU+w.Overhead > w.OutMTU {
				warnings = append(warnings, w)
			}
			seen := map[forward]bool{}
			for _, f := range onward[w.Chain] {
				p, ok := answers[f.node].Path(f.dst)
				if !ok || seen[f] || w.InMTU+w.Overhead <= p.MTU {
					continue
				}
				seen[f] = true
				at := w
				at.Headend, at.Node, at.Towards = w.Node, f.node, f.dst
				at.Out, at.OutMTU, at.Limit = p.Dev, p.MTU, p.MTU-w.Overhead
				warnings = append(warnings, at)
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(noted)) {
		notes = append(notes, noted[n])
	}
	return warnings, notes
}

// forward is one node's forwarding of a chain's encapsulated packets
// after its headend, towards one of its SIDs (dst).
type forward struct {
	node string
	dst  netip.Addr
}

// forwarders are the nodes that forward a chain's encapsulated packets
// after its headend (whose way out Headroom checks with the inputs), each
// with the SID it forwards them to: per SID, the node of the SID before
// it and, on a traced path, every node a branch crosses before the SID's.
// The last SID's node decapsulates and forwards no outer packet. A
// binding SID (End.B6.*) adds headers of its own: the nodes after it are
// not checked.
func forwarders(ch plan.Chain, path []chainpath.Segment) []forward {
	var out []forward
	prev := ch.Ingress
	for i, h := range ch.Hops {
		if i > 0 {
			out = append(out, forward{node: prev, dst: h.SID})
		}
		if i < len(path) && path[i].SID == h.SID {
			for _, b := range path[i].Hops {
				for j := 1; j+1 < len(b); j++ {
					out = append(out, forward{node: b[j], dst: h.SID})
				}
			}
		}
		if strings.HasPrefix(h.Behavior, "End.B6") {
			break
		}
		prev = h.Node
	}
	return out
}

// askMTUs asks each node's agent its MTUs and its routes to dsts, in
// parallel: the answers by node, and a note for each node that could not
// say.
func (c *Controller) askMTUs(ctx context.Context, asks map[string][]netip.Addr) (map[string]*nodestate.MTUs, map[string]string) {
	nodes := slices.Sorted(maps.Keys(asks))
	got := make([]*nodestate.MTUs, len(nodes))
	why := make([]string, len(nodes))
	c.each(ctx, nodes, func(ctx context.Context, i int, n string) error {
		a, err := c.agentFor(n)
		if err != nil {
			why[i] = fmt.Sprintf("mtu: node %s: headroom not checked: %v", n, err)
			return nil
		}
		mr := a.Caps().MTU
		if mr == nil {
			err = agent.ErrTooOld
		} else {
			got[i], err = mr.MTUs(ctx, asks[n])
		}
		switch {
		case errors.Is(err, agent.ErrTooOld):
			why[i] = fmt.Sprintf("mtu: node %s: its agent cannot report MTUs (older than the MTUs RPC): headroom not checked", n)
		case err != nil:
			why[i] = fmt.Sprintf("mtu: node %s: headroom not checked: %v", n, err)
		}
		return nil
	})
	answers, notes := map[string]*nodestate.MTUs{}, map[string]string{}
	for i, n := range nodes {
		if why[i] != "" {
			notes[n] = why[i]
		} else if got[i] != nil {
			answers[n] = got[i]
		}
	}
	return answers, notes
}

// chain is the plan's chain by name.
func (c *Controller) chain(name string) plan.Chain {
	for _, ch := range c.Plan.Chains {
		if ch.Name == name {
			return ch
		}
	}
	return plan.Chain{}
}

// headroomAt is, for each of one headend's chains its agent could route,
// what comes in and the way out (a warning when the first does not fit
// the second, InMTU+Overhead > OutMTU); a chain whose input is unknown is
// left out.
func (c *Controller) headroomAt(node string, chains []headroomChain, m *nodestate.MTUs) []MTUWarning {
	var out []MTUWarning
	for _, hc := range chains {
		p, ok := m.Path(hc.first)
		if !ok {
			continue
		}
		in := hc.in
		if in == nil {
			in = c.hostSide(node, hc, p.Dev)
		}
		w := MTUWarning{Chain: hc.chain.Name, Node: node, Overhead: hc.overhead, Out: p.Dev, OutMTU: p.MTU, Limit: p.MTU - hc.overhead}
		for _, i := range in {
			if mtu, ok := m.Links[i]; ok && mtu > w.InMTU {
				w.In, w.InMTU = i, mtu
			}
		}
		if w.In != "" {
			out = append(out, w)
		}
	}
	return out
}

// hostSide are the headend's interfaces a chain without iif takes its
// packets from, other than the way out: its boundary interfaces (those
// not facing another node of the domain: hosts, foreign uplinks), or,
// with the boundary filter off, its links to nodes the chain does not
// cross. An uplink to another SR node (a second spine) carries the
// domain's own traffic, already within its MTU: counting it as an input
// warned of every multi-homed headend.
func (c *Controller) hostSide(node string, hc headroomChain, out string) []string {
	var b *nodestate.Boundary
	if want := c.Plan.Nodes[node]; want != nil {
		b = want.Boundary
	}
	var in []string
	for _, l := range c.Plan.Links {
		if l.Node != node || l.Iface == out {
			continue
		}
		if b != nil && trustedIface(b.Trusted, l.Iface) || b == nil && hc.cross[l.Peer] {
			continue
		}
		in = append(in, l.Iface)
	}
	return in
}

// trustedIface: iface is one of the boundary's trusted interfaces (a name
// or a glob such as s6svc*).
func trustedIface(trusted []string, iface string) bool {
	for _, t := range trusted {
		if ok, _ := path.Match(t, iface); ok || t == iface {
			return true
		}
	}
	return false
}
