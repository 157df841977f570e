package controller

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"sort"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
)

// MTUWarning is a chain whose headend cannot forward a full-size packet
// of its hosts: their largest packet plus the chain's headers exceeds the
// MTU of the interface the encapsulated packet leaves by. Linux drops it
// with no Packet Too Big to its sender (docs/deploy.md, "MTU").
type MTUWarning struct {
	Chain string `json:"chain"`
	Node  string `json:"node"` // the headend
	// In is the input interface with the largest MTU (the chain's iif,
	// else the headend's interfaces towards nodes outside the chain),
	// InMTU its MTU.
	In    string `json:"in"`
	InMTU int    `json:"in_mtu"`
	// Overhead is the bytes the chain's headend route adds
	// (nodestate.Seg6Encap.Overhead).
	Overhead int `json:"overhead"`
	// Out is the interface of the headend's route to the chain's first
	// SID, OutMTU the MTU a packet leaving by it must fit in.
	Out    string `json:"out"`
	OutMTU int    `json:"out_mtu"`
	// Limit is the largest packet the chain carries: OutMTU − Overhead.
	Limit int `json:"limit"`
}

func (w MTUWarning) String() string {
	return fmt.Sprintf("mtu: chain %s at %s: %d (%s) + %d bytes of SRv6 headers > %d (%s): "+
		"Linux drops packets over %d bytes with no Packet Too Big to their sender (docs/deploy.md)",
		w.Chain, w.Node, w.InMTU, w.In, w.Overhead, w.OutMTU, w.Out, w.Limit)
}

// headroomChain is what the check needs of one chain at its headend.
type headroomChain struct {
	name     string
	first    netip.Addr
	overhead int
	in       []string // the chain's iifs; nil: the headend's outside links
	cross    map[string]bool
}

// Headroom checks, at every chain's headend, that the hosts' largest
// packet still fits the egress interface once the chain's headers are
// added, asking each headend's agent its MTUs and its route to the
// chain's first SID (agent.MTUReader). It never fails: a headend that
// cannot say (an agent older than the MTUs RPC, an unreachable node) is
// a note and its chains are not checked.
//
// A controller without a plan (a no-op apply that skipped planning,
// internal/session) has no chains to check: nothing.
func (c *Controller) Headroom(ctx context.Context) (warnings []MTUWarning, notes []string) {
	if c.Plan == nil {
		return nil, nil
	}
	byNode := map[string][]headroomChain{}
	for _, ch := range c.Plan.Chains {
		want := c.Plan.Nodes[ch.Ingress]
		if want == nil || (c.Scope != nil && !c.Scope[ch.Ingress]) {
			continue
		}
		hc := headroomChain{name: ch.Name, cross: map[string]bool{}}
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
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	found := make([][]MTUWarning, len(nodes))
	noted := make([]string, len(nodes))
	c.each(ctx, nodes, func(ctx context.Context, i int, n string) error {
		chains := byNode[n]
		a, err := c.agentFor(n)
		if err != nil {
			noted[i] = fmt.Sprintf("mtu: node %s: headroom not checked: %v", n, err)
			return nil
		}
		mr := a.Caps().MTU
		if mr == nil {
			err = agent.ErrTooOld
		}
		var m *nodestate.MTUs
		if err == nil {
			var dsts []netip.Addr
			for _, hc := range chains {
				dsts = append(dsts, hc.first)
			}
			m, err = mr.MTUs(ctx, dsts)
		}
		if errors.Is(err, agent.ErrTooOld) {
			noted[i] = fmt.Sprintf("mtu: node %s: its agent cannot report MTUs (older than the MTUs RPC): headroom not checked", n)
			return nil
		}
		if err != nil {
			noted[i] = fmt.Sprintf("mtu: node %s: headroom not checked: %v", n, err)
			return nil
		}
		found[i] = c.headroomAt(n, chains, m)
		return nil
	})
	for i := range nodes {
		warnings = append(warnings, found[i]...)
		if noted[i] != "" {
			notes = append(notes, noted[i])
		}
	}
	return warnings, notes
}

// headroomAt checks one headend's chains against what its agent reported.
func (c *Controller) headroomAt(node string, chains []headroomChain, m *nodestate.MTUs) []MTUWarning {
	var out []MTUWarning
	for i, hc := range chains {
		if i >= len(m.Paths) || m.Paths[i].Dev == "" || m.Paths[i].MTU == 0 {
			continue
		}
		p := m.Paths[i]
		in := hc.in
		if in == nil {
			in = c.hostSide(node, hc, p.Dev)
		}
		w := MTUWarning{Chain: hc.name, Node: node, Overhead: hc.overhead, Out: p.Dev, OutMTU: p.MTU, Limit: p.MTU - hc.overhead}
		for _, i := range in {
			if mtu, ok := m.Links[i]; ok && mtu > w.InMTU {
				w.In, w.InMTU = i, mtu
			}
		}
		if w.In != "" && w.InMTU+w.Overhead > w.OutMTU {
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
