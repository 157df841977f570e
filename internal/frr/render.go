package frr

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/segchain/segchain/internal/nodestate"
)

// Config is a router's FRR configuration, one file per daemon (each daemon
// reads only its own; Integrated is the frr.conf a person would write).
type Config struct {
	Zebra string
	BGPD  string
	// BFDD is empty when no session runs BFD (bfdd is not started).
	BFDD string
}

// Render is the FRR configuration of router node with BGP intent b:
// eBGP in IPv6 unicast with every neighbor, the intent's timers, its
// prefixes as network statements (only those: redistribute connected
// would also announce the lab's management prefix), ECMP across neighbors
// of different ASNs (as-path multipath-relax), BFD where the intent asks.
// Fast external failover (a session over a link that loses carrier is
// reset at once) is FRR's default and stays on.
func Render(node string, b *nodestate.BGP) Config {
	var c Config
	c.Zebra = fmt.Sprintf("hostname %s\n", node)
	var w strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&w, f+"\n", a...) }
	p("hostname %s", node)
	lists := summaryLists(b)
	for _, l := range lists.order {
		for i, pr := range lists.blocks[l] {
			// Everything inside the block but the block itself (the
			// aggregate) is held back from this neighbour (a /128
			// holds nothing else).
			if pr.Bits() < 128 {
				p("ipv6 prefix-list %s seq %d deny %s ge %d", l, 5*(i+1), pr, pr.Bits()+1)
			}
		}
		p("ipv6 prefix-list %s seq %d permit any", l, 5*(len(lists.blocks[l])+1))
	}
	p("router bgp %d", b.ASN)
	p(" bgp router-id %s", b.RouterID)
	p(" no bgp default ipv4-unicast")
	// segchain's domain has no routing policy: what a neighbor sends is
	// accepted and what the node knows is announced (FRR 8 wants a policy
	// on eBGP sessions otherwise).
	p(" no bgp ebgp-requires-policy")
	p(" no bgp network import-check")
	p(" bgp bestpath as-path multipath-relax")
	p(" timers bgp %d %d", b.Keepalive, b.Hold)
	bfd := false
	for _, n := range b.Neighbors {
		p(" neighbor %s remote-as %d", n.Addr, n.ASN)
		p(" neighbor %s description %s via %s", n.Addr, n.Node, n.Dev)
		p(" neighbor %s timers connect %d", n.Addr, ConnectRetry(n))
		// Withdrawals and new best paths go out at once (traditional
		// defaults batch eBGP updates for seconds).
		p(" neighbor %s advertisement-interval 0", n.Addr)
		if n.BFD {
			p(" neighbor %s bfd", n.Addr)
			if b.BFDInterval > 0 {
				p(" neighbor %s bfd profile %s", n.Addr, BFDProfile)
			}
			bfd = true
		}
	}
	p(" !")
	p(" address-family ipv6 unicast")
	for _, pr := range b.Prefixes {
		p("  network %s", pr)
	}
	for _, a := range b.Aggregates {
		// Announced while any route inside it is in the BGP table (a
		// member's own network statements included).
		p("  aggregate-address %s", a)
	}
	for _, n := range b.Neighbors {
		p("  neighbor %s activate", n.Addr)
		if l := lists.of[n.Addr.String()]; l != "" {
			p("  neighbor %s prefix-list %s out", n.Addr, l)
		}
	}
	p("  maximum-paths 8")
	p(" exit-address-family")
	p("exit")
	c.BGPD = w.String()
	if bfd {
		c.BFDD = fmt.Sprintf("hostname %s\n%s", node, bfdBlock(b))
	}
	return c
}

// ConnectRetry is the connect timer (seconds) of a router's session with
// neighbour n: how long FRR waits, after a connection it opened was
// refused, before it dials again. Another router runs FRR from the lab's
// start and answers at once: 1 s. A GoBGP speaker (an agent's) listens
// only once an apply has started it; until then every attempt is refused,
// and a fabric's routers dialling each leaf every second took the machine
// at 1,000 nodes (docs/scale.md, session 17): SpeakerConnectRetry, and the
// lab asks its routers to dial a speaker's address at once when an apply
// has started it (lab.Nudger, RetryNow).
func ConnectRetry(n nodestate.BGPNeighbor) int {
	if n.PeerFRR {
		return 1
	}
	return SpeakerConnectRetry
}

// SpeakerConnectRetry is the connect timer towards a GoBGP speaker: the
// longest a session with a speaker started without the lab's nudge (an
// agent restarted on its own, a router outside a lab) waits for its
// router's next attempt, and one whose opening the speaker refused or
// reset (FRR then waits its connect timer again; GoBGP refuses
// connections for a second after a session's reset). 10 s: a tenth of
// session 17's refused connections at 1,000 nodes (~310 a second over
// 3,128 sessions instead of ~3,100), a session back within 10 s.
const SpeakerConnectRetry = 10

// prefixLists are the outbound prefix lists of a router's neighbours
// that are sent aggregates (nodestate.BGPNeighbor.Summarised): one per
// distinct set of blocks, named in order of first use.
type prefixLists struct {
	order  []string
	blocks map[string][]netip.Prefix
	of     map[string]string // neighbour address → list
}

func summaryLists(b *nodestate.BGP) prefixLists {
	l := prefixLists{blocks: map[string][]netip.Prefix{}, of: map[string]string{}}
	byKey := map[string]string{}
	for _, n := range b.Neighbors {
		if len(n.Summarised) == 0 {
			continue
		}
		var k strings.Builder
		for _, p := range n.Summarised {
			k.WriteString(p.String() + " ")
		}
		name, ok := byKey[k.String()]
		if !ok {
			name = fmt.Sprintf("segchain-summarised-%d", len(l.order)+1)
			byKey[k.String()] = name
			l.order = append(l.order, name)
			l.blocks[name] = n.Summarised
		}
		l.of[n.Addr.String()] = name
	}
	return l
}

// BFDProfile is the bfdd profile with the domain's BFD timers that every
// BFD session of a router uses.
const BFDProfile = "segchain"

// bfdBlock is bfdd's configuration: the profile with the domain's timers
// (the same as the agents' speakers use), receive and transmit alike.
func bfdBlock(b *nodestate.BGP) string {
	if b.BFDInterval == 0 {
		return "bfd\nexit\n"
	}
	return fmt.Sprintf("bfd\n profile %s\n  detect-multiplier %d\n  receive-interval %d\n  transmit-interval %d\n exit\nexit\n",
		BFDProfile, b.BFDMultiplier, b.BFDInterval, b.BFDInterval)
}

// Integrated is the configuration as one frr.conf (docs, vtysh).
func (c Config) Integrated() string {
	var b strings.Builder
	b.WriteString("frr defaults traditional\n")
	b.WriteString(c.BGPD)
	if c.BFDD != "" {
		// bfdd's file without its hostname line.
		_, rest, _ := strings.Cut(c.BFDD, "\n")
		b.WriteString("!\n" + rest)
	}
	return b.String()
}
