package nodestate

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// BGP is one node's BGP speaker intent (routing: bgp): eBGP in IPv6
// unicast over each of its links to another BGP speaker, advertising its
// locator, its LOC::1 address and its link prefixes. The plan computes it;
// segchain agents run it with GoBGP (internal/bgp), router nodes with FRR
// (internal/frr).
type BGP struct {
	ASN      uint32 `json:"asn"`
	RouterID string `json:"router_id"`
	// Keepalive and Hold are the BGP timers in seconds.
	Keepalive int `json:"keepalive"`
	Hold      int `json:"hold"`
	// BFDInterval (ms) and BFDMultiplier are the BFD timers of the
	// neighbors with BFD (0 when none has it).
	BFDInterval   int           `json:"bfd_interval_ms,omitempty"`
	BFDMultiplier int           `json:"bfd_multiplier,omitempty"`
	Neighbors     []BGPNeighbor `json:"neighbors,omitempty"`
	// Prefixes are what the node originates.
	Prefixes []netip.Prefix `json:"prefixes,omitempty"`
	// Aggregates are the routing.summaries blocks the node announces as
	// one prefix (FRR's aggregate-address): blocks it is a member of, on a
	// router (FRR) with a neighbor outside them. Empty on GoBGP speakers.
	Aggregates []netip.Prefix `json:"aggregates,omitempty"`
}

// BGPNeighbor is one eBGP session over a point-to-point link.
type BGPNeighbor struct {
	Node  string     `json:"node"`  // the peer's domain name
	Addr  netip.Addr `json:"addr"`  // the peer's address on the link
	Local netip.Addr `json:"local"` // this node's address on the link
	Dev   string     `json:"dev"`   // this node's interface on the link
	ASN   uint32     `json:"asn"`
	// BFD runs BFD on the session (internal/bfd in the agent's speaker,
	// bfdd on FRR), with the intent's BFD timers.
	BFD bool `json:"bfd,omitempty"`
	// PeerFRR: the peer is a router running FRR, which opens the session
	// itself (FRR dials its neighbours). A GoBGP speaker sharing its
	// process with other nodes (segchain agent group) only waits for its
	// neighbours to dial (internal/bgp), so it needs this on every one.
	// Left out of String, hence of equality and the digests: it changes
	// nothing a speaker runs (a shared speaker waits for every neighbour
	// anyway), only whether a shared speaker accepts the intent, which it
	// checks on every apply; and digests stay those of earlier builds.
	PeerFRR bool `json:"peer_frr,omitempty"`
	// Summarised are the blocks (Aggregates) of which the peer is not a
	// member: it is sent each block's aggregate instead of the prefixes
	// inside it.
	Summarised []netip.Prefix `json:"summarised,omitempty"`
}

// Sort puts neighbors and prefixes in canonical order.
func (b *BGP) Sort() {
	if b == nil {
		return
	}
	sort.Slice(b.Neighbors, func(i, j int) bool { return b.Neighbors[i].Addr.Less(b.Neighbors[j].Addr) })
	sort.Slice(b.Prefixes, func(i, j int) bool {
		if c := b.Prefixes[i].Addr().Compare(b.Prefixes[j].Addr()); c != 0 {
			return c < 0
		}
		return b.Prefixes[i].Bits() < b.Prefixes[j].Bits()
	})
	sortPrefixes(b.Aggregates)
	for i := range b.Neighbors {
		sortPrefixes(b.Neighbors[i].Summarised)
	}
}

func sortPrefixes(ps []netip.Prefix) {
	sort.Slice(ps, func(i, j int) bool {
		if c := ps[i].Addr().Compare(ps[j].Addr()); c != 0 {
			return c < 0
		}
		return ps[i].Bits() < ps[j].Bits()
	})
}

// Neighbor returns the neighbor at addr.
func (b *BGP) Neighbor(addr netip.Addr) (BGPNeighbor, bool) {
	if b == nil {
		return BGPNeighbor{}, false
	}
	for _, n := range b.Neighbors {
		if n.Addr == addr {
			return n, true
		}
	}
	return BGPNeighbor{}, false
}

// Head is the one-line summary plan prints.
func (b *BGP) Head() string {
	if b == nil {
		return "bgp (none)"
	}
	h := fmt.Sprintf("bgp AS%d router-id %s timers %d/%d", b.ASN, b.RouterID, b.Keepalive, b.Hold)
	if b.BFDInterval > 0 {
		h += fmt.Sprintf(" bfd %dms x%d", b.BFDInterval, b.BFDMultiplier)
	}
	return h
}

func (n BGPNeighbor) String() string {
	s := fmt.Sprintf("neighbor %s AS%d (%s) dev %s local %s", n.Addr, n.ASN, n.Node, n.Dev, n.Local)
	if n.BFD {
		s += " bfd"
	}
	for _, p := range n.Summarised {
		s += " summarised " + p.String()
	}
	return s
}

// Lines is the canonical rendering: the head, then one line per neighbor
// and per advertised prefix. Two intents are equal when their lines are.
func (b *BGP) Lines() []string {
	if b == nil {
		return nil
	}
	c := *b
	c.Neighbors = append([]BGPNeighbor(nil), b.Neighbors...)
	c.Prefixes = append([]netip.Prefix(nil), b.Prefixes...)
	c.Aggregates = append([]netip.Prefix(nil), b.Aggregates...)
	for i := range c.Neighbors {
		c.Neighbors[i].Summarised = append([]netip.Prefix(nil), c.Neighbors[i].Summarised...)
	}
	c.Sort()
	out := []string{c.Head()}
	for _, n := range c.Neighbors {
		out = append(out, n.String())
	}
	for _, p := range c.Prefixes {
		out = append(out, "network "+p.String())
	}
	for _, p := range c.Aggregates {
		out = append(out, "aggregate "+p.String())
	}
	return out
}

// String is the canonical form ("" for nil), used for diffs.
func (b *BGP) String() string { return strings.Join(b.Lines(), "\n") }

// BGPSession is one observed BGP session of a node's speaker.
type BGPSession struct {
	Node  string     `json:"node"` // the peer's domain name
	Peer  netip.Addr `json:"peer"`
	ASN   uint32     `json:"asn"`
	Dev   string     `json:"dev,omitempty"`
	State string     `json:"state"` // idle, connect, active, opensent, openconfirm, established
	// Admin is "down" when the speaker shut the session (carrier lost on
	// its link).
	Admin    string `json:"admin,omitempty"`
	Received uint64 `json:"received"`
	Accepted uint64 `json:"accepted"`
	// Uptime (established) or downtime, in whole seconds.
	Since int64 `json:"since_seconds,omitempty"`
	// Note explains a session that is not established (a wrong peer ASN
	// reported in a NOTIFICATION, the link without carrier, BFD down).
	Note string `json:"note,omitempty"`
	// BFD is the session's BFD state (up, down, init, admin-down), ""
	// without BFD.
	BFD string `json:"bfd,omitempty"`
}

// Established reports whether the session is up.
func (s BGPSession) Established() bool { return s.State == "established" }
