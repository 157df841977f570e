package nodestate

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Boundary is a node's SR domain boundary filter (RFC 8754 section 5.1) in
// plain data. Every interface of the node but loopback and those in Trusted
// is a boundary interface: packets arriving there addressed inside
// Locators (but not to an External SID), SRv6 packets addressed to Nodes or
// to the node itself, and every packet addressed to SFs, are dropped;
// packets leaving there addressed inside Locators are dropped too.
type Boundary struct {
	// Trusted interfaces face other nodes of the domain (or the node's own
	// service functions) and are not filtered.
	Trusted []string `json:"trusted,omitempty"`
	// Locators are the domain's SID space.
	Locators []netip.Prefix `json:"locators"`
	// External SIDs are reachable from outside (services with external: true).
	External []netip.Prefix `json:"external,omitempty"`
	// Nodes are addresses of domain nodes outside the locators (link
	// addresses): an SRH addressed to them is dropped.
	Nodes []netip.Addr `json:"nodes,omitempty"`
	// SFs are the addresses of the domain's SF nodes (role sf): an SF is
	// reached through its proxy only, so every packet addressed to one is
	// dropped, plain or SRv6 (an SF security.boundary.sf_reachable names
	// is in Nodes instead: plain traffic passes, SRv6 does not).
	SFs []netip.Addr `json:"sfs,omitempty"`
	// HMACSIDs are the node's local SIDs of signed chains (where it
	// requires HMAC) and HMACKeys the domain's key ids: on every interface
	// an SRH addressed to one of them that the kernel's HMAC check would
	// refuse for a reason it does not report (no HMAC flag, malformed TLV,
	// unknown key id) is dropped and counted by reason.
	HMACSIDs []netip.Prefix `json:"hmac_sids,omitempty"`
	HMACKeys []uint32       `json:"hmac_keys,omitempty"`
	// Unfiltered is observed only: boundary interfaces the filter is not
	// attached to (an interface created after apply). Desired state never
	// has any, so a non-empty list is drift that apply mends.
	Unfiltered []string `json:"unfiltered,omitempty"`
}

// Sort puts every list in canonical order.
func (b *Boundary) Sort() {
	sort.Strings(b.Trusted)
	sort.Strings(b.Unfiltered)
	lessP := func(p []netip.Prefix) func(i, j int) bool {
		return func(i, j int) bool {
			if c := p[i].Addr().Compare(p[j].Addr()); c != 0 {
				return c < 0
			}
			return p[i].Bits() < p[j].Bits()
		}
	}
	sort.Slice(b.Locators, lessP(b.Locators))
	sort.Slice(b.External, lessP(b.External))
	sort.Slice(b.HMACSIDs, lessP(b.HMACSIDs))
	sort.Slice(b.HMACKeys, func(i, j int) bool { return b.HMACKeys[i] < b.HMACKeys[j] })
	sort.Slice(b.Nodes, func(i, j int) bool { return b.Nodes[i].Less(b.Nodes[j]) })
	sort.Slice(b.SFs, func(i, j int) bool { return b.SFs[i].Less(b.SFs[j]) })
}

// String is the canonical one-line form diffs compare and plans print.
func (b *Boundary) String() string {
	if b == nil {
		return "boundary off"
	}
	c := *b
	c.Trusted = append([]string(nil), b.Trusted...)
	c.Unfiltered = append([]string(nil), b.Unfiltered...)
	c.Locators = append([]netip.Prefix(nil), b.Locators...)
	c.External = append([]netip.Prefix(nil), b.External...)
	c.Nodes = append([]netip.Addr(nil), b.Nodes...)
	c.SFs = append([]netip.Addr(nil), b.SFs...)
	c.HMACSIDs = append([]netip.Prefix(nil), b.HMACSIDs...)
	c.HMACKeys = append([]uint32(nil), b.HMACKeys...)
	c.Sort()
	ps := func(p []netip.Prefix) string {
		s := make([]string, len(p))
		for i, x := range p {
			s[i] = x.String()
		}
		return orDash(strings.Join(s, ","))
	}
	s := fmt.Sprintf("boundary trusted %s locators %s external %s nodes %s",
		orDash(strings.Join(c.Trusted, ",")), ps(c.Locators), ps(c.External), orDash(joinAddrs(c.Nodes)))
	if len(c.SFs) > 0 {
		s += " sfs " + joinAddrs(c.SFs)
	}
	if len(c.HMACSIDs) > 0 {
		keys := make([]string, len(c.HMACKeys))
		for i, k := range c.HMACKeys {
			keys[i] = fmt.Sprint(k)
		}
		s += " hmac-sids " + ps(c.HMACSIDs) + " hmac-keys " + orDash(strings.Join(keys, ","))
	}
	if len(c.Unfiltered) > 0 {
		s += " unfiltered " + strings.Join(c.Unfiltered, ",")
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// BoundaryCounter is the drops of one boundary interface for one reason.
type BoundaryCounter struct {
	Iface     string `json:"iface"`
	Direction string `json:"direction"` // "in", "out", or "hmac" (the HMAC classifier, on the way in)
	Reason    string `json:"reason"`
	Packets   uint64 `json:"packets"`
	Bytes     uint64 `json:"bytes"`
}

// Sizes of the boundary program's maps (BND_LPM_MAX, BND_HMAC_SIDS_MAX and
// BND_HMAC_KEYS_MAX of bpf/boundary_tc.bpf.c; internal/boundary's
// TestLimitsMatchProgram fails on drift).
const (
	BoundaryPrefixesMax = 4096 // locators + external SIDs + node and SF addresses
	BoundaryHMACSIDsMax = 1024
	BoundaryHMACKeysMax = 1024
)

// Fits says whether b fits the boundary program's maps: an apply of a
// boundary that does not would fail (plan refuses it first).
func (b *Boundary) Fits() error {
	if n := len(b.Locators) + len(b.External) + len(b.Nodes) + len(b.SFs); n > BoundaryPrefixesMax {
		return fmt.Errorf("%d locators, external SIDs, node and SF addresses (%d, %d, %d, %d), the boundary filter holds at most %d", n, len(b.Locators), len(b.External), len(b.Nodes), len(b.SFs), BoundaryPrefixesMax)
	}
	if n := len(b.HMACSIDs); n > BoundaryHMACSIDsMax {
		return fmt.Errorf("%d local SIDs of signed chains, the HMAC classifier holds at most %d", n, BoundaryHMACSIDsMax)
	}
	if n := len(b.HMACKeys); n > BoundaryHMACKeysMax {
		return fmt.Errorf("%d HMAC keys, the HMAC classifier holds at most %d", n, BoundaryHMACKeysMax)
	}
	return nil
}
