package bgp

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
)

// A speaker sharing its process (agent group) accepts an intent only when
// every neighbour runs FRR (which dials it); an unshared one takes any.
func TestSharedCheck(t *testing.T) {
	nb := func(node string, frr bool) nodestate.BGPNeighbor {
		return nodestate.BGPNeighbor{Node: node, Addr: netip.MustParseAddr("fc00::2"), Local: netip.MustParseAddr("fc00::1"), Dev: "e-" + node, ASN: 2, PeerFRR: frr}
	}
	for _, c := range []struct {
		name    string
		shared  bool
		in      *nodestate.BGP
		refused string // "" = accepted
	}{
		{"shared, FRR neighbours", true, &nodestate.BGP{ASN: 1, Neighbors: []nodestate.BGPNeighbor{nb("sp0", true), nb("sp1", true)}}, ""},
		{"shared, no neighbour", true, &nodestate.BGP{ASN: 1}, ""},
		{"shared, no intent", true, nil, ""},
		{"shared, a GoBGP neighbour", true, &nodestate.BGP{ASN: 1, Neighbors: []nodestate.BGPNeighbor{nb("sp0", true), nb("n1", false)}}, "neighbour(s) n1 (fc00::2) run GoBGP"},
		{"unshared, a GoBGP neighbour", false, &nodestate.BGP{ASN: 1, Neighbors: []nodestate.BGPNeighbor{nb("n1", false)}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New("s17b-none", t.TempDir(), nil)
			if c.shared {
				s = NewShared("s17b-none", t.TempDir(), nil)
			}
			err := s.Check(c.in)
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
				t.Fatalf("got %v, want a refusal naming %q", err, c.refused)
			}
			if c.refused != "" {
				// Set refuses it too, before starting anything.
				if err := s.Set(c.in); err == nil || s.Intent() != nil {
					t.Fatalf("Set: %v, running %v; want the refusal and nothing running", err, s.Intent())
				}
			}
		})
	}
}
