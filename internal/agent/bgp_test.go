package agent

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/nodestate"
)

func TestBGPOp(t *testing.T) {
	a := netip.MustParseAddr
	old := &nodestate.BGP{ASN: 4200000001, RouterID: "10.0.0.1", Keepalive: 1, Hold: 3,
		Neighbors: []nodestate.BGPNeighbor{{Node: "r1", Addr: a("fc00:15::5"), Local: a("fc00:15::1"), Dev: "eth-r1", ASN: 4200000005}},
		Prefixes:  []netip.Prefix{netip.MustParsePrefix("fc00:1::/64")}}
	now := *old
	now.Neighbors = append(append([]nodestate.BGPNeighbor(nil), old.Neighbors...),
		nodestate.BGPNeighbor{Node: "r2", Addr: a("fc00:16::6"), Local: a("fc00:16::1"), Dev: "eth-r2", ASN: 4200000006})
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{Op{Kind: KindBGP, Action: ActSet, BGP: old}, "+ bgp AS4200000001 router-id 10.0.0.1 timers 1/3\n" +
			"    + neighbor fc00:15::5 AS4200000005 (r1) dev eth-r1 local fc00:15::1\n    + network fc00:1::/64"},
		{Op{Kind: KindBGP, Action: ActSet, BGP: &now, OldBGP: old}, "~ bgp AS4200000001 router-id 10.0.0.1 timers 1/3\n" +
			"    + neighbor fc00:16::6 AS4200000006 (r2) dev eth-r2 local fc00:16::1"},
		{Op{Kind: KindBGP, Action: ActSet, OldBGP: old}, "- bgp AS4200000001 router-id 10.0.0.1 timers 1/3"},
	} {
		if got := tc.op.String(); got != tc.want {
			t.Errorf("String =\n%s\nwant\n%s", got, tc.want)
		}
		inv := tc.op.Inverse()
		if inv.BGP.String() != tc.op.OldBGP.String() || inv.OldBGP.String() != tc.op.BGP.String() {
			t.Errorf("inverse of %q: %q", tc.want, inv.String())
		}
		raw, err := MarshalOps([]Op{tc.op})
		if err != nil {
			t.Fatal(err)
		}
		var back []Op
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if got := back[0].String(); got != tc.want {
			t.Errorf("after JSON: %q", got)
		}
	}
}
