package plan

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nodestate"
)

// Under routing: bgp no SR node gets a static route; each gets its BGP
// intent (GoBGP nodes in Node.BGP, routers in Plan.FRR) with one
// neighbor per link to another speaker; hosts keep their default route;
// SIDs and policies are those of static routing.
func TestBGPPlan(t *testing.T) {
	d, err := config.Load("../../examples/redundant.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"ingress", "nfv1", "nfv2", "egress", "r1", "r2"} {
		for _, r := range p.Nodes[n].Routes {
			if r.Seg6 == nil && r.Seg6Local == nil && r.Owner == "routing" {
				t.Errorf("%s: static route %s under routing: bgp", n, r)
			}
		}
	}
	for _, h := range []string{"s", "d"} {
		if rs := p.Nodes[h].Routes; len(rs) != 1 || rs[0].Dst.String() != "::/0" {
			t.Errorf("host %s routes: %v", h, rs)
		}
	}
	in := p.Nodes["ingress"].BGP
	if in == nil || in.ASN != config.DefaultASNBase+1 || in.RouterID != "10.0.0.1" || in.Hold != 3 || in.Keepalive != 1 {
		t.Fatalf("ingress intent: %+v", in)
	}
	if got := strings.Join(in.Lines()[1:], "\n"); got != strings.Join([]string{
		"neighbor fc00:15::5 AS4200000005 (r1) dev eth-r1 local fc00:15::1",
		"neighbor fc00:16::6 AS4200000006 (r2) dev eth-r2 local fc00:16::1",
		"network fc00:1::/64",
		"network fc00:1::1/128",
		"network fc00:15::/64",
		"network fc00:16::/64",
		"network fc00:1a::/64",
	}, "\n") {
		t.Errorf("ingress intent:\n%s", got)
	}
	if p.Nodes["r1"].BGP != nil || p.FRR["r1"] == nil || p.FRR["ingress"] != nil {
		t.Errorf("r1 runs FRR: Node.BGP %v, FRR %v", p.Nodes["r1"].BGP, p.FRR["r1"])
	}
	if n, ok := p.FRR["r1"].Neighbor(netip.MustParseAddr("fc00:25::2")); !ok || n.Node != "nfv1" || n.ASN != config.DefaultASNBase+2 {
		t.Errorf("r1's neighbor nfv1: %+v %v", n, ok)
	}
	// A neighbor says whether its peer runs FRR (which dials: what an
	// agent group's speaker needs, internal/bgp NewShared).
	for node, b := range map[string]*nodestate.BGP{"ingress": in, "r1": p.FRR["r1"]} {
		for _, n := range b.Neighbors {
			if want := n.Node == "r1" || n.Node == "r2"; n.PeerFRR != want {
				t.Errorf("%s's neighbor %s: PeerFRR %v, want %v", node, n.Node, n.PeerFRR, want)
			}
		}
	}
	// Same SIDs and policies as under static routing.
	d.Routing = config.Routing{Mode: config.RoutingStatic}
	ps, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range ps.Nodes {
		var a, b []string
		for _, r := range want.Routes {
			if r.Owner != "routing" {
				a = append(a, r.String())
			}
		}
		for _, r := range p.Nodes[n].Routes {
			if r.Owner != "routing" {
				b = append(b, r.String())
			}
		}
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("%s: SIDs/policies differ between static and bgp:\n%s\n---\n%s", n, a, b)
		}
	}
}

// routing.bgp.bfd puts BFD on every session, whatever runs at each end
// (GoBGP–FRR here), with the domain's BFD timers; without it, none.
func TestBGPPlanBFD(t *testing.T) {
	for _, on := range []bool{false, true} {
		d, err := config.Load("../../examples/redundant.yaml")
		if err != nil {
			t.Fatal(err)
		}
		d.Routing.BGP.BFD, d.Routing.BGP.BFDInterval, d.Routing.BGP.BFDMultiplier = on, 150, 4
		p, err := Build(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []*nodestate.BGP{p.Nodes["ingress"].BGP, p.Nodes["egress"].BGP, p.FRR["r1"]} {
			for _, n := range in.Neighbors {
				if n.BFD != on {
					t.Errorf("bfd %v: AS%d's neighbor %s has BFD %v", on, in.ASN, n.Node, n.BFD)
				}
			}
			wantIv, wantMult := 0, 0
			if on {
				wantIv, wantMult = 150, 4
			}
			if in.BFDInterval != wantIv || in.BFDMultiplier != wantMult {
				t.Errorf("bfd %v: AS%d BFD timers %d ms x%d, want %d x%d", on, in.ASN, in.BFDInterval, in.BFDMultiplier, wantIv, wantMult)
			}
		}
		if on && !strings.HasSuffix(p.Nodes["ingress"].BGP.Head(), " bfd 150ms x4") {
			t.Errorf("head %q does not show the BFD timers", p.Nodes["ingress"].BGP.Head())
		}
	}
}
