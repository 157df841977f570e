package config

import (
	"fmt"
	"net/netip"
)

// Routing modes.
const (
	RoutingStatic = "static"
	RoutingBGP    = "bgp"
)

// BGP defaults and limits (routing: bgp). The timers are short: a lab's
// silent failure is noticed within Hold seconds.
const (
	// DefaultASNBase + node id is a node's ASN unless nodes.NAME.bgp.asn
	// says otherwise: private 4-byte ASNs (RFC 6996: 4200000000-4294967294).
	DefaultASNBase   = 4200000000
	DefaultKeepalive = 1
	DefaultHold      = 3
	maxASN           = 1<<32 - 2 // 4294967295 is reserved (RFC 7300)
	asTrans          = 23456     // AS_TRANS (RFC 6793) is no node's ASN
	maxBGPTimer      = 65535

	// BFD timers (routing.bgp.bfd): 3 x 300 ms, FRR's defaults. The
	// bounds are FRR bfdd's (interval 10..60000 ms, multiplier 2..255);
	// below 50 ms a busy lab host misses packets.
	DefaultBFDInterval   = 300
	DefaultBFDMultiplier = 3
	minBFDInterval       = 50
	maxBFDInterval       = 60000
	minBFDMultiplier     = 2
	maxBFDMultiplier     = 255
)

// Which BGP implementation a node runs (Domain.Speaker).
const (
	SpeakerGoBGP = "gobgp" // embedded in the node's segchain agent
	SpeakerFRR   = "frr"   // FRR's bgpd + zebra (+ bfdd), on router nodes
)

// BGPRouting tunes routing: bgp.
type BGPRouting struct {
	// Keepalive and Hold are the BGP timers in seconds (default 1 and 3).
	Keepalive int `yaml:"keepalive,omitempty" json:"keepalive,omitempty"`
	Hold      int `yaml:"hold,omitempty" json:"hold,omitempty"`
	// BFD runs BFD on every session: segchain's own (internal/bfd) on
	// GoBGP nodes, bfdd on FRR routers.
	BFD bool `yaml:"bfd,omitempty" json:"bfd,omitempty"`
	// BFDInterval (ms) is the transmit and receive interval BFD asks for
	// once up (default 300); BFDMultiplier how many intervals without a
	// packet declare the peer down (default 3).
	BFDInterval   int `yaml:"bfd_interval,omitempty" json:"bfd_interval,omitempty"`
	BFDMultiplier int `yaml:"bfd_multiplier,omitempty" json:"bfd_multiplier,omitempty"`
}

// NodeBGP is a node's BGP identity.
type NodeBGP struct {
	// ASN defaults to 4200000000 + the node's id.
	ASN int64 `yaml:"asn,omitempty" json:"asn,omitempty"`
	// RouterID defaults to 10.X.Y.Z from the node's id.
	RouterID string `yaml:"router_id,omitempty" json:"router_id,omitempty"`
}

// Speaker says which BGP implementation runs on node under routing: bgp:
// FRR on routers, GoBGP (in the node's agent) on the other SR nodes, none
// on hosts and SR-unaware service functions (they keep a static default
// route). "" under routing: static.
func (d *Domain) Speaker(node string) string {
	n := d.Nodes[node]
	if n == nil || d.Routing.Mode != RoutingBGP {
		return ""
	}
	switch n.Role {
	case RoleHost, RoleSF:
		return ""
	case RoleRouter:
		return SpeakerFRR
	}
	return SpeakerGoBGP
}

// ASN is node's autonomous system number under routing: bgp.
func (d *Domain) ASN(node string) uint32 {
	n := d.Nodes[node]
	if n == nil {
		return 0
	}
	if n.BGP != nil && n.BGP.ASN != 0 {
		return uint32(n.BGP.ASN)
	}
	return DefaultASNBase + uint32(n.ID)
}

// RouterID is node's BGP router id: nodes.NAME.bgp.router_id, or
// 10.0.X.Y from its id (ids are unique, so are these).
func (d *Domain) RouterID(node string) string {
	n := d.Nodes[node]
	if n == nil {
		return ""
	}
	if n.BGP != nil && n.BGP.RouterID != "" {
		return n.BGP.RouterID
	}
	return fmt.Sprintf("10.%d.%d.%d", n.ID>>16, (n.ID>>8)&0xff, n.ID&0xff)
}

// bgp validates routing.bgp and nodes.NAME.bgp.
func (v *validator) bgp() {
	r := v.d.Routing
	bgpMode := r.Mode == RoutingBGP
	if r.BGP != nil && !bgpMode {
		v.errf("routing.bgp", "only with routing.mode: bgp")
	}
	if r.BGP != nil && bgpMode {
		if r.BGP.Keepalive < 1 || r.BGP.Keepalive > maxBGPTimer {
			v.errf("routing.bgp.keepalive", "%d seconds: want 1..%d", r.BGP.Keepalive, maxBGPTimer)
		}
		switch {
		case r.BGP.Hold < 3 || r.BGP.Hold > maxBGPTimer:
			v.errf("routing.bgp.hold", "%d seconds: want 3..%d (RFC 4271: at least 3)", r.BGP.Hold, maxBGPTimer)
		case r.BGP.Keepalive >= r.BGP.Hold:
			v.errf("routing.bgp.hold", "%d seconds is not more than keepalive (%d): the session would expire between keepalives (hold is usually 3 x keepalive)", r.BGP.Hold, r.BGP.Keepalive)
		}
		if i := r.BGP.BFDInterval; i < minBFDInterval || i > maxBFDInterval {
			v.errf("routing.bgp.bfd_interval", "%d ms: want %d..%d", i, minBFDInterval, maxBFDInterval)
		}
		if m := r.BGP.BFDMultiplier; m < minBFDMultiplier || m > maxBFDMultiplier {
			v.errf("routing.bgp.bfd_multiplier", "%d: want %d..%d", m, minBFDMultiplier, maxBFDMultiplier)
		}
	}
	asns := map[uint32]string{}
	rids := map[string]string{}
	for _, name := range v.inFileOrder("nodes.", v.d.NodeNames()) {
		n := v.d.Nodes[name]
		if n == nil {
			continue
		}
		p := "nodes." + name + ".bgp"
		if n.BGP != nil {
			switch {
			case !bgpMode:
				v.errf(p, "only with routing.mode: bgp")
				continue
			case n.Role == RoleHost || n.Role == RoleSF:
				v.errf(p, "a node of role %s speaks no BGP (it keeps a static default route)", n.Role)
				continue
			}
			if a := n.BGP.ASN; a != 0 && (a < 1 || a > maxASN || a == asTrans) {
				v.errf(p+".asn", "%d: want 1..%d, not %d (AS_TRANS)", a, int64(maxASN), asTrans)
				continue
			}
			if id := n.BGP.RouterID; id != "" {
				a, err := netip.ParseAddr(id)
				if err != nil || !a.Is4() || a.IsUnspecified() {
					v.errf(p+".router_id", "%q: want a dotted-quad IPv4 address other than 0.0.0.0", id)
					continue
				}
			}
		}
		if v.d.Speaker(name) == "" {
			continue
		}
		asn := v.d.ASN(name)
		if other, dup := asns[asn]; dup {
			v.errf(p+".asn", "AS%d is also node %s's: every node needs an ASN of its own (segchain runs eBGP between nodes)", asn, other)
		} else {
			asns[asn] = name
		}
		rid := v.d.RouterID(name)
		if other, dup := rids[rid]; dup {
			v.errf(p+".router_id", "%s is also node %s's router id", rid, other)
		} else {
			rids[rid] = name
		}
	}
}
