package nodestate

import "net/netip"

// The service loop is a veth pair inside a node (LoopDev, LoopPeer) that
// carries a packet back into an ingress hook: a SID served by a tc program
// (SR proxy, SR-aware firewall) that follows another SID of the same node
// is routed "via LoopGateway dev LoopDev" (see dataplane.EnsureLoop).
const (
	LoopDev  = "sc-svcloop"
	LoopPeer = "sc-svcloop-in"
)

// UserspaceLoopPrefix names the veth pairs of userspace SR-aware services
// (pkg/srv6svc: s6svcN and s6svcNk, one pair per binding): frames the
// services send enter the node's stack there, and SRv6 handed to a binding
// arrives there. UserspaceLoopPattern matches them all: like the service
// loop, never a boundary interface.
const (
	UserspaceLoopPrefix  = "s6svc"
	UserspaceLoopPattern = UserspaceLoopPrefix + "*"
)

// LoopGateway is the next hop of service-loop routes: a neighbour of the
// NOARP LoopDev, owned by nobody.
var LoopGateway = netip.MustParseAddr("fe80::5c")

// The netfilter loop (End.AN.NF, internal/dataplane/netfilter): a veth pair inside
// the node through which inner packets cross the node's netfilter hooks
// (NFLoopIn: they enter the stack; NFLoopOut: they leave it, and what the
// FIB cannot forward re-enters there re-encapsulated). Like the service
// loop, never a boundary.
const (
	NFLoopOut = "sc-nfloop"
	NFLoopIn  = "sc-nfloop-in"
)
