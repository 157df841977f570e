package nodestate

import "net/netip"

// MTUs is what a node says of the sizes it forwards: every interface's
// MTU and, for each destination asked, the route the kernel would take
// (as `ip -6 route get` answers) with the MTU a packet leaving by it
// must fit in. Status checks each chain's headroom with it (docs/deploy.md,
// "MTU").
type MTUs struct {
	// Links are the node's interfaces by name and their MTU.
	Links map[string]int `json:"links"`
	// Paths are the answers for the destinations asked, in their order.
	Paths []PathMTU `json:"paths,omitempty"`
}

// PathMTU is the route lookup of one destination.
type PathMTU struct {
	Dst netip.Addr `json:"dst"`
	// Dev is the interface the route leaves by ("" when there is none:
	// Error says why).
	Dev string `json:"dev,omitempty"`
	// MTU is the route's mtu metric when it has one, else Dev's MTU.
	MTU   int    `json:"mtu,omitempty"`
	Error string `json:"error,omitempty"`
}
