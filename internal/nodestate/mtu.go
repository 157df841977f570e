package nodestate

import (
	"net/netip"

	"github.com/segchain/segchain/internal/csid"
)

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

// Path is the answer for dst when its route was found and has an MTU
// (none from a nil MTUs: a node that did not answer).
func (m *MTUs) Path(dst netip.Addr) (PathMTU, bool) {
	if m == nil {
		return PathMTU{}, false
	}
	for _, p := range m.Paths {
		if p.Dst == dst {
			return p, p.Dev != "" && p.MTU != 0
		}
	}
	return PathMTU{}, false
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

// Overhead is how many bytes the route's encapsulation adds to every
// packet it steers (docs/deploy.md, "MTU"): an outer IPv6 header (40)
// unless it inserts, an SRH of 8 + 16 per entry, the HMAC TLV (40) when
// it signs, and the inner Ethernet header (14) of an L2 encapsulation.
// H.Encaps holds every segment in the SRH; H.Encaps.Red leaves the first
// out and the SRH with it when that was the only one (and it does not
// sign); H.Insert holds the packet's own destination as well.
func (e *Seg6Encap) Overhead() int {
	n := len(e.Segs)
	var size int
	switch e.Mode {
	case "inline":
		size = 8 + 16*(n+1)
	case "encap.red", "l2encap.red":
		size = csid.HeaderBytes(n, true)
	default: // encap, l2encap
		size = csid.HeaderBytes(n, false)
	}
	if e.HMACKeyID != 0 {
		if size == 40 { // reduced to no SRH: signing keeps one
			size += 8
		}
		size += 40
	}
	if e.Mode == "l2encap" || e.Mode == "l2encap.red" {
		size += 14
	}
	return size
}
