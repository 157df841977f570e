package config

import (
	"github.com/segchain/segchain/internal/service"
	"github.com/segchain/segchain/internal/service/firewall"
	"github.com/segchain/segchain/internal/service/srunaware"
)

// Domain is one SRv6 domain: the nodes, how they are wired (in the lab), the
// service functions they host and the chains that steer traffic through them.
// Field names are the YAML keys; unknown keys are errors.
type Domain struct {
	Name     string              `yaml:"name" json:"name"`
	SID      SIDFormat           `yaml:"sid,omitempty" json:"sid,omitempty"`
	Nodes    map[string]*Node    `yaml:"nodes" json:"nodes"`
	Links    []*Link             `yaml:"links,omitempty" json:"links,omitempty"`
	Services map[string]*Service `yaml:"services,omitempty" json:"services,omitempty"`
	Chains   map[string]*Chain   `yaml:"chains,omitempty" json:"chains,omitempty"`
	Routing  Routing             `yaml:"routing,omitempty" json:"routing,omitempty"`
	Security Security            `yaml:"security,omitempty" json:"security,omitempty"`

	// Dir is the directory the file was loaded from; relative secret files
	// resolve against it. Not part of the file.
	Dir string `yaml:"-" json:"-"`
}

// SIDFormat splits every SID into LOC:FUNCT:ARGS. Defaults: 64/48/16, the
// thesis' layout (fc00:2::f1:0/112 is LOC fc00:2::/64, FUNCT 0xf1, ARGS 0).
type SIDFormat struct {
	LocatorBits  int `yaml:"locator_bits,omitempty" json:"locator_bits,omitempty"`
	FunctionBits int `yaml:"function_bits,omitempty" json:"function_bits,omitempty"`
	ArgsBits     int `yaml:"args_bits,omitempty" json:"args_bits,omitempty"`
	// Format is full (default: 128-bit SIDs) or a compressed one (RFC 9800
	// NEXT-C-SID uSIDs, see usid.go and docs/usid.md): f3216 (a 32-bit
	// block), f4816 (a 48-bit block) or csid (a block of any length
	// that is a multiple of 8, 8..96), each with 16-bit uSIDs.
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
	// Block is the locator block: its length is the LBL (the kernel's
	// lblen). f3216: a /32 (default fcbb:bb00::/32); f4816: a /48; csid:
	// any (required for both).
	Block string `yaml:"block,omitempty" json:"block,omitempty"`
	// USIDBits is the length of one uSID (LNL+FL, the kernel's nflen):
	// 16, the default and the only length offered.
	USIDBits int `yaml:"usid_bits,omitempty" json:"usid_bits,omitempty"`
}

// Node roles.
const (
	RoleHost    = "host"    // a traffic source or sink outside the SR domain
	RoleIngress = "ingress" // classifies and pushes SID lists
	RoleEgress  = "egress"  // removes SRv6 and delivers
	RoleRouter  = "router"  // plain IPv6 transit
	RoleNFV     = "nfv"     // hosts service functions
	RoleEdge    = "edge"    // both ingress and egress (bidirectional chains)
	RoleSF      = "sf"      // runs an SR-unaware service function: a leaf that forwards
)

// Service kinds.
const (
	KindNative    = "native"       // a seg6local (or End.BPF) behaviour; the default
	KindSRUnaware = srunaware.Name // an SR-unaware SF behind an SR proxy on the node
	KindFirewall  = firewall.Name  // the SR-aware firewall End.AN.FW (eBPF) on the node
)

// SR proxy types of sr-unaware services and the inner packet types they
// hand to the SF: the sr-unaware kind's (internal/service/srunaware).
const (
	ProxyStatic       = srunaware.ProxyStatic
	ProxyDynamic      = srunaware.ProxyDynamic
	ProxyDynamicFlow  = srunaware.ProxyDynamicFlow
	ProxyMasquerading = srunaware.ProxyMasquerading
	InnerIPv4         = srunaware.InnerTypeIPv4
	InnerIPv6         = srunaware.InnerTypeIPv6
	InnerEthernet     = srunaware.InnerTypeEthernet
)

// Node is one machine (a network namespace in the lab).
type Node struct {
	Role string `yaml:"role" json:"role"`
	// ID is the node number used to derive link addresses (fc00:xy::ID).
	ID int `yaml:"id" json:"id"`
	// Locator is the SID prefix of an SRv6 node (fc00:ID::/64).
	Locator string `yaml:"locator,omitempty" json:"locator,omitempty"`
	// Netns names the network namespace of a node outside a lab; in a lab the
	// lab names it.
	Netns string `yaml:"netns,omitempty" json:"netns,omitempty"`
	// Agent is the HOST:PORT of the node's segchain agent: the node is
	// programmed through it (gRPC + mutual TLS) instead of in-process.
	Agent string `yaml:"agent,omitempty" json:"agent,omitempty"`
	// Sysctls are extra net.* settings for this node.
	Sysctls map[string]string `yaml:"sysctls,omitempty" json:"sysctls,omitempty"`
	// BGP overrides the node's BGP identity (routing: bgp).
	BGP *NodeBGP `yaml:"bgp,omitempty" json:"bgp,omitempty"`
}

// Link is a point-to-point link (a veth pair in the lab). Endpoints are
// "node:iface"; each endpoint's address is the prefix with the node ID as
// host part (IPv6 fc00:12::/64 gives node 2 fc00:12::2).
type Link struct {
	Endpoints []string `yaml:"endpoints" json:"endpoints"`
	IPv6      string   `yaml:"ipv6,omitempty" json:"ipv6,omitempty"`
	IPv4      string   `yaml:"ipv4,omitempty" json:"ipv4,omitempty"`
}

// Service is a function bound to one SID on one node.
type Service struct {
	Node string `yaml:"node" json:"node"`
	// Behavior in iproute2 spelling: End, End.X, End.T, End.DX2, End.DX4,
	// End.DX6, End.DT4, End.DT6, End.DT46, End.B6, End.B6.Encaps.
	Behavior string `yaml:"behavior" json:"behavior"`
	// SID pins the SID; empty allocates one from the node's locator.
	SID string `yaml:"sid,omitempty" json:"sid,omitempty"`
	// Function pins the FUNCT value (hex or decimal) instead of the whole SID.
	Function string `yaml:"function,omitempty" json:"function,omitempty"`
	Params   `yaml:",inline" json:",inline"`

	// Kind is native (default: Behavior is a seg6local behaviour) or
	// sr-unaware (an SR proxy on Node hands the inner packet to an SF).
	Kind string `yaml:"kind,omitempty" json:"kind,omitempty"`
	// Config is an sr-unaware service's proxy (proxy, inner, sf_nh6,
	// sf_nh4, sf_mac, iface_out, iface_in, flow_timeout, flow_max): the
	// sr-unaware kind's fields, inline in the service for compatibility.
	srunaware.Config `yaml:",inline" json:",inline"`

	// Firewall configures a kind: firewall service (End.AN.FW).
	Firewall *Firewall `yaml:"firewall,omitempty" json:"firewall,omitempty"`

	// Blocks are the blocks of the service kinds that have one of their
	// own (service.Kind.Block), decoded, by block key. They are YAML keys
	// of the service like any other field (see kinds.go).
	Blocks map[string]any `yaml:"-" json:"-"`

	// External makes the service's SID reachable from outside the SR
	// domain (an SR-aware host's segment): boundary interfaces pass it.
	External bool `yaml:"external,omitempty" json:"external,omitempty"`

	// Pool fields (pools.go, docs/pools.md): a service with instances is
	// a pool of itself and the services it names.
	Instances []PoolInstance `yaml:"instances,omitempty" json:"instances,omitempty"`
	Weight    int            `yaml:"weight,omitempty" json:"weight,omitempty"`
	Health    *Health        `yaml:"health,omitempty" json:"health,omitempty"`
	OnFailure string         `yaml:"on_failure,omitempty" json:"on_failure,omitempty"`
	AllDown   string         `yaml:"all_down,omitempty" json:"all_down,omitempty"`
	Symmetric *bool          `yaml:"symmetric,omitempty" json:"symmetric,omitempty"`
	Rebalance bool           `yaml:"rebalance,omitempty" json:"rebalance,omitempty"`
}

// SRUnaware reports whether the service is an SF behind an SR proxy.
func (s *Service) SRUnaware() bool { return s.Kind == KindSRUnaware }

// ProxyBehavior is the proxy behaviour an sr-unaware service derives from
// its proxy type ("" for native services or unknown types).
func (s *Service) ProxyBehavior() string {
	if !s.SRUnaware() {
		return ""
	}
	return s.Config.Behavior()
}

// EffectiveBehavior is Behavior, or the behaviour the service's kind
// derives (the proxy behaviour, End.AN.FW ...).
func (s *Service) EffectiveBehavior() string {
	if k := s.ServiceKind(); k != nil {
		return k.Behavior(service.Input{Behavior: s.Behavior, Block: s.KindBlock()})
	}
	return s.Behavior
}

// Params are the iproute2 seg6local parameters of a behaviour.
type Params struct {
	Nh4      string   `yaml:"nh4,omitempty" json:"nh4,omitempty"`
	Nh6      string   `yaml:"nh6,omitempty" json:"nh6,omitempty"`
	Oif      string   `yaml:"oif,omitempty" json:"oif,omitempty"`
	Iif      string   `yaml:"iif,omitempty" json:"iif,omitempty"`
	Table    int      `yaml:"table,omitempty" json:"table,omitempty"`
	VRFTable int      `yaml:"vrftable,omitempty" json:"vrftable,omitempty"`
	Segs     []string `yaml:"segs,omitempty" json:"segs,omitempty"` // End.B6*: SIDs or service names
	Flavors  []string `yaml:"flavors,omitempty" json:"flavors,omitempty"`
	// Count enables per-SID counters; default true.
	Count *bool `yaml:"count,omitempty" json:"count,omitempty"`
}

// Chain modes, as iproute2 spells the seg6 encap modes.
const (
	ModeEncap      = "encap"
	ModeInsert     = "insert" // iproute2: inline
	ModeL2Encap    = "l2encap"
	ModeEncapRed   = "encap.red"
	ModeL2EncapRed = "l2encap.red"
)

// Chain steers classified traffic at an ingress node through services.
type Chain struct {
	Ingress  string   `yaml:"ingress" json:"ingress"`
	Match    Match    `yaml:"match" json:"match"`
	Mode     string   `yaml:"mode,omitempty" json:"mode,omitempty"` // default encap
	Services []string `yaml:"services" json:"services"`
	// Egress is the decapsulating last segment; required for encap modes,
	// forbidden for insert (the packet's own destination is the last segment).
	Egress *Egress `yaml:"egress,omitempty" json:"egress,omitempty"`
	// Bidirectional builds the reverse chain: headend at the egress node,
	// services in reverse order, decapsulation at the ingress node.
	Bidirectional bool `yaml:"bidirectional,omitempty" json:"bidirectional,omitempty"`
	// Return is the reverse chain's egress behaviour at the ingress node;
	// default End.DT6 table main (End.DT4 for IPv4 chains).
	Return *Egress `yaml:"return,omitempty" json:"return,omitempty"`
	// HMAC names a key of security.hmac to sign the SRH with.
	HMAC string `yaml:"hmac,omitempty" json:"hmac,omitempty"`
	// OAM keeps the chain's OAM running (internal/config/oam.go).
	OAM *ChainOAM `yaml:"oam,omitempty" json:"oam,omitempty"`
}

// Match is the ingress classifier: every set field must match.
type Match struct {
	Family int    `yaml:"family,omitempty" json:"family,omitempty"` // 4 or 6; default from dst
	Src    string `yaml:"src,omitempty" json:"src,omitempty"`
	Dst    string `yaml:"dst" json:"dst"`
	Proto  string `yaml:"proto,omitempty" json:"proto,omitempty"` // tcp, udp, icmp, ipv6-icmp or a number
	Sport  string `yaml:"sport,omitempty" json:"sport,omitempty"` // N or N-M
	Dport  string `yaml:"dport,omitempty" json:"dport,omitempty"`
	Iif    string `yaml:"iif,omitempty" json:"iif,omitempty"`
}

// Egress is where a chain's SRv6 encapsulation is removed.
type Egress struct {
	Node     string `yaml:"node,omitempty" json:"node,omitempty"`
	Behavior string `yaml:"behavior" json:"behavior"`
	SID      string `yaml:"sid,omitempty" json:"sid,omitempty"`
	Params   `yaml:",inline" json:",inline"`
}

// Routing says how locators and link prefixes are reached.
type Routing struct {
	// Mode: "static" (default) computes shortest-path routes from the
	// links; "bgp" runs eBGP between the SR nodes (docs/routing.md).
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// BGP tunes routing: bgp.
	BGP *BGPRouting `yaml:"bgp,omitempty" json:"bgp,omitempty"`
	// Summaries are locator blocks (one per pod): under static routing a
	// node outside a block gets one route to it, under bgp the member
	// routers aggregate it (summaries.go, docs/routing.md). Opt-in.
	Summaries []string `yaml:"summaries,omitempty" json:"summaries,omitempty"`
}

// Security holds SRv6 domain security settings.
type Security struct {
	HMAC map[string]*HMACKey `yaml:"hmac,omitempty" json:"hmac,omitempty"`
	// RequireHMAC lists nodes that drop SRv6 packets without a valid HMAC
	// (net.ipv6.conf.*.seg6_require_hmac = 1).
	RequireHMAC []string `yaml:"require_hmac,omitempty" json:"require_hmac,omitempty"`
	// Boundary says where the SR domain ends (RFC 8754 section 5.1).
	Boundary Boundary `yaml:"boundary,omitempty" json:"boundary,omitempty"`
	// PKI is the controller's mutual-TLS files toward the nodes' agents.
	PKI *PKI `yaml:"pki,omitempty" json:"pki,omitempty"`
}

// PKI names the controller's TLS files (segchain pki), relative to the
// domain file.
type PKI struct {
	CA   string `yaml:"ca" json:"ca"`
	Cert string `yaml:"cert" json:"cert"`
	Key  string `yaml:"key" json:"key"`
}

// Boundary adjusts the SR domain boundary. By default every interface of
// an SR node that faces a host, a node outside the domain or nothing the
// domain file describes filters packets addressed to the domain's SIDs.
type Boundary struct {
	// Off turns boundary filtering off everywhere (plan warns).
	Off bool `yaml:"off,omitempty" json:"off,omitempty"`
	// Interfaces are extra boundary interfaces, "node:iface", that the
	// defaults consider inside the domain.
	Interfaces []string `yaml:"interfaces,omitempty" json:"interfaces,omitempty"`
	// Trusted are interfaces ("node:iface") or whole nodes ("node") that are
	// not filtered although the defaults would filter them.
	Trusted []string `yaml:"trusted,omitempty" json:"trusted,omitempty"`
	// SFReachable are sf nodes that plain traffic from outside may reach
	// directly (management, an SF that talks to the outside itself).
	// By default every packet from outside addressed to an sf node is
	// dropped: an SF receives its packets from its proxy only. SRv6 to
	// them is dropped all the same.
	SFReachable []string `yaml:"sf_reachable,omitempty" json:"sf_reachable,omitempty"`
}

// HMACKey is a key of the kernel's seg6 HMAC table.
type HMACKey struct {
	ID         int    `yaml:"id" json:"id"`
	Algorithm  string `yaml:"algorithm,omitempty" json:"algorithm,omitempty"` // sha256 (default) or sha1
	SecretFile string `yaml:"secret_file" json:"secret_file"`
}
