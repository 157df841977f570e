package frr

import (
	"fmt"
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
		p(" neighbor %s timers connect 1", n.Addr)
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
	for _, n := range b.Neighbors {
		p("  neighbor %s activate", n.Addr)
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
