package chainpath

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/plan"
)

// The redundant lab's diamond:
//
//	        ┌── r1 ── nfv1 ──┐
//	ingress ┤                ├── egress
//	        └── r2 ── nfv2 ──┘
var diamond = links(
	"ingress eth-r1 fc00:15::1 r1 eth-ingress fc00:15::5",
	"ingress eth-r2 fc00:16::1 r2 eth-ingress fc00:16::6",
	"r1 eth-nfv1 fc00:25::5 nfv1 eth-r1 fc00:25::2",
	"r2 eth-nfv2 fc00:36::6 nfv2 eth-r2 fc00:36::3",
	"nfv1 eth-egress fc00:24::2 egress eth-nfv1 fc00:24::4",
	"nfv2 eth-egress fc00:34::3 egress eth-nfv2 fc00:34::4",
)

// links makes both ends of each "node iface addr peer peeriface peeraddr".
func links(specs ...string) []plan.Link {
	var out []plan.Link
	for _, s := range specs {
		var n, i, a, pn, pi, pa string
		if _, err := fmt.Sscan(s, &n, &i, &a, &pn, &pi, &pa); err != nil {
			panic(err)
		}
		out = append(out,
			plan.Link{Node: n, Iface: i, Addrs: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr(a), 64)}, Peer: pn, PeerIface: pi},
			plan.Link{Node: pn, Iface: pi, Addrs: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr(pa), 64)}, Peer: n, PeerIface: i})
	}
	return out
}

var (
	sidNFV1   = plan.Hop{SID: netip.MustParseAddr("fc00:2::100"), Node: "nfv1", Behavior: "End"}
	sidEgress = plan.Hop{SID: netip.MustParseAddr("fc00:4::d6"), Node: "egress", Behavior: "End.DX6"}
	sidIngr   = plan.Hop{SID: netip.MustParseAddr("fc00:1::d6"), Node: "ingress", Behavior: "End.DX6"}
)

// route builds a route: dst, protocol, metric, then next hops as "via
// dev" pairs ("" via: connected).
func route(dst string, proto, metric int, hops ...string) nodestate.FIBRoute {
	r := nodestate.FIBRoute{Dst: netip.MustParsePrefix(dst), Protocol: proto, Type: "unicast", Metric: metric}
	for i := 0; i+1 < len(hops); i += 2 {
		h := nodestate.FIBNextHop{Dev: hops[i+1]}
		if hops[i] != "" {
			h.Via = netip.MustParseAddr(hops[i])
		}
		r.NextHops = append(r.NextHops, h)
	}
	return r
}

func tables(m map[string][]nodestate.FIBRoute) map[string]Table {
	out := map[string]Table{}
	for n, rs := range m {
		out[n] = Table{Routes: rs}
	}
	return out
}

// The static line every case builds on: ingress → r1 → nfv1 → egress.
func staticLine() map[string][]nodestate.FIBRoute {
	return map[string][]nodestate.FIBRoute{
		"ingress": {route("fc00:2::/64", 197, 1024, "fc00:15::5", "eth-r1"), route("fc00:15::/64", 2, 256, "", "eth-r1")},
		"r1":      {route("fc00:2::/64", 197, 1024, "fc00:25::2", "eth-nfv1")},
		"nfv1":    {route("fc00:4::/64", 197, 1024, "fc00:24::4", "eth-egress")},
	}
}

func TestChain(t *testing.T) {
	tests := []struct {
		name     string
		hops     []plan.Hop
		routes   map[string][]nodestate.FIBRoute
		errs     map[string]error
		want     [][][]string // per segment, per branch
		problems []string
		line     string
	}{{
		name:   "static line",
		hops:   []plan.Hop{sidNFV1, sidEgress},
		routes: staticLine(),
		want:   [][][]string{{{"ingress", "r1", "nfv1"}}, {{"nfv1", "egress"}}},
		line:   "ingress → r1 → nfv1 (fc00:2::100 End) → egress (fc00:4::d6 End.DX6)",
	}, {
		name: "ECMP diamond",
		hops: []plan.Hop{sidEgress},
		routes: map[string][]nodestate.FIBRoute{
			"ingress": {route("fc00:4::/64", 199, 20, "fc00:15::5", "eth-r1", "fc00:16::6", "eth-r2")},
			"r1":      {route("fc00:4::/64", 186, 20, "fc00:25::2", "eth-nfv1")},
			"r2":      {route("fc00:4::/64", 186, 20, "fc00:36::3", "eth-nfv2")},
			"nfv1":    {route("fc00:4::/64", 199, 20, "fc00:24::4", "eth-egress")},
			"nfv2":    {route("fc00:4::/64", 199, 20, "fc00:34::4", "eth-egress")},
		},
		want: [][][]string{{{"ingress", "r1", "nfv1", "egress"}, {"ingress", "r2", "nfv2", "egress"}}},
		line: "ingress → {r1 → nfv1 | r2 → nfv2} → egress (fc00:4::d6 End.DX6)",
	}, {
		// A route of a lower metric (here 20) beats one of the same
		// prefix at 1024, a longer prefix beats both, FRR's zebra
		// routes go via link-local gateways, a dead next hop is skipped.
		name: "BGP-like routes",
		hops: []plan.Hop{sidNFV1, sidEgress},
		routes: map[string][]nodestate.FIBRoute{
			"ingress": {
				route("::/0", 197, 1024, "fc00:16::6", "eth-r2"),
				route("fc00:2::/64", 197, 1024, "fc00:16::6", "eth-r2"),
				route("fc00:2::/64", 199, 20, "fc00:15::5", "eth-r1"),
			},
			"r1": {route("fc00:2::/48", 186, 20, "fe80::1", "eth-ingress"), route("fc00:2::/64", 186, 20, "fe80::2", "eth-nfv1")},
			"nfv1": {func() nodestate.FIBRoute {
				r := route("fc00:4::/64", 199, 20, "fc00:24::4", "eth-egress", "fc00:25::5", "eth-r1")
				r.NextHops[1].Dead = true
				return r
			}()},
		},
		want: [][][]string{{{"ingress", "r1", "nfv1"}}, {{"nfv1", "egress"}}},
		line: "ingress → r1 → nfv1 (fc00:2::100 End) → egress (fc00:4::d6 End.DX6)",
	}, {
		name: "no route",
		hops: []plan.Hop{sidNFV1, sidEgress},
		routes: func() map[string][]nodestate.FIBRoute {
			m := staticLine()
			delete(m, "r1")
			m["r1"] = nil
			return m
		}(),
		want:     [][][]string{{{"ingress", "r1"}}, {{"nfv1", "egress"}}},
		problems: []string{"unreachable at r1: no route to fc00:2::100"},
		line:     "ingress → r1 ✗ … nfv1 (fc00:2::100 End) → egress (fc00:4::d6 End.DX6)",
	}, {
		name: "blackhole",
		hops: []plan.Hop{sidNFV1},
		routes: map[string][]nodestate.FIBRoute{
			"ingress": {{Dst: netip.MustParsePrefix("fc00:2::/64"), Protocol: 186, Type: "blackhole", Metric: 20}},
		},
		want:     [][][]string{{{"ingress"}}},
		problems: []string{"unreachable at ingress: blackhole fc00:2::/64 proto 186 metric 20"},
		line:     "ingress ✗ … nfv1 (fc00:2::100 End)",
	}, {
		name: "loop",
		hops: []plan.Hop{sidNFV1},
		routes: map[string][]nodestate.FIBRoute{
			"ingress": {route("fc00:2::/64", 197, 1024, "fc00:15::5", "eth-r1")},
			"r1":      {route("::/0", 197, 1024, "fc00:15::1", "eth-ingress")},
		},
		want:     [][][]string{{{"ingress", "r1", "ingress"}}},
		problems: []string{"loop: ingress → r1 → ingress"},
		line:     "ingress → r1 → ingress ✗ … nfv1 (fc00:2::100 End)",
	}, {
		name: "connected last hop",
		hops: []plan.Hop{sidNFV1, sidEgress},
		routes: func() map[string][]nodestate.FIBRoute {
			m := staticLine()
			m["nfv1"] = []nodestate.FIBRoute{route("fc00:4::/64", 2, 256, "", "eth-egress")}
			return m
		}(),
		want: [][][]string{{{"ingress", "r1", "nfv1"}}, {{"nfv1", "egress"}}},
		line: "ingress → r1 → nfv1 (fc00:2::100 End) → egress (fc00:4::d6 End.DX6)",
	}, {
		name:   "SID on the headend itself",
		hops:   []plan.Hop{sidIngr},
		routes: map[string][]nodestate.FIBRoute{},
		want:   [][][]string{{{"ingress"}}},
		line:   "ingress (fc00:1::d6 End.DX6)",
	}, {
		name:     "agent too old",
		hops:     []plan.Hop{sidNFV1},
		routes:   staticLine(),
		errs:     map[string]error{"r1": fmt.Errorf("node r1: agent x: routes: %w", agent.ErrTooOld)},
		want:     [][][]string{{{"ingress", "r1"}}},
		problems: []string{"path unknown at r1: agent too old"},
		line:     "ingress → r1 ✗ … nfv1 (fc00:2::100 End)",
	}, {
		name:     "node not read",
		hops:     []plan.Hop{sidNFV1},
		routes:   staticLine(),
		errs:     map[string]error{"r1": errors.New("node r1: open dataplane: no such namespace")},
		want:     [][][]string{{{"ingress", "r1"}}},
		problems: []string{"path unknown at r1: node r1: open dataplane: no such namespace"},
		line:     "ingress → r1 ✗ … nfv1 (fc00:2::100 End)",
	}, {
		name: "next hop without carrier, and one that is no node",
		hops: []plan.Hop{sidEgress},
		routes: map[string][]nodestate.FIBRoute{
			"ingress": {func() nodestate.FIBRoute {
				r := route("fc00:4::/64", 197, 1024, "fc00:15::5", "eth-r1", "fc00:99::1", "eth-r2")
				r.NextHops[0].LinkDown = true
				return r
			}()},
			"r1":   {route("fc00:4::/64", 186, 20, "fc00:25::2", "eth-nfv1")},
			"nfv1": {route("fc00:4::/64", 199, 20, "fc00:24::4", "eth-egress")},
		},
		want: [][][]string{{{"ingress", "r1", "nfv1", "egress"}, {"ingress"}}},
		problems: []string{
			"ingress: next hop via fc00:15::5 dev eth-r1 has no carrier (fc00:4::/64 via fc00:15::5 dev eth-r1 linkdown via fc00:99::1 dev eth-r2 proto 197 metric 1024)",
			"unreachable at ingress: next hop via fc00:99::1 dev eth-r2: no node has that address on the link to r2 (fc00:4::/64 via fc00:15::5 dev eth-r1 linkdown via fc00:99::1 dev eth-r2 proto 197 metric 1024)",
		},
		line: "ingress → {r1 → nfv1 → egress | ✗} (fc00:4::d6 End.DX6)",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tabs := tables(tc.routes)
			for n, err := range tc.errs {
				tabs[n] = Table{Err: err}
			}
			segs := New(diamond, tabs).Chain("ingress", tc.hops)
			var got [][][]string
			var problems []string
			for _, s := range segs {
				got = append(got, s.Hops)
				problems = append(problems, s.Problems...)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hops (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.problems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if line := Render("ingress", segs); line != tc.line {
				t.Errorf("Render:\n got %s\nwant %s", line, tc.line)
			}
		})
	}
}

func TestBranchBound(t *testing.T) {
	// A ladder of 2-way ECMP stages doubles the branches at each stage:
	// 2^6 = 64 > MaxBranches.
	var specs []string
	rs := map[string][]nodestate.FIBRoute{}
	for i := range 6 {
		a, b1, b2 := fmt.Sprintf("s%d", i), fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		next := fmt.Sprintf("s%d", i+1)
		specs = append(specs,
			fmt.Sprintf("%s e1 fc00:%x:1::1 %s e0 fc00:%x:1::2", a, i, b1, i),
			fmt.Sprintf("%s e2 fc00:%x:2::1 %s e0 fc00:%x:2::2", a, i, b2, i),
			fmt.Sprintf("%s e1 fc00:%x:3::1 %s e%d fc00:%x:3::2", b1, i, next, 1+10*(i+1), i),
			fmt.Sprintf("%s e1 fc00:%x:4::1 %s e%d fc00:%x:4::2", b2, i, next, 2+10*(i+1), i))
		rs[a] = []nodestate.FIBRoute{route("fc00:ff::/64", 199, 20, fmt.Sprintf("fc00:%x:1::2", i), "e1", fmt.Sprintf("fc00:%x:2::2", i), "e2")}
		rs[b1] = []nodestate.FIBRoute{route("fc00:ff::/64", 199, 20, fmt.Sprintf("fc00:%x:3::2", i), "e1")}
		rs[b2] = []nodestate.FIBRoute{route("fc00:ff::/64", 199, 20, fmt.Sprintf("fc00:%x:4::2", i), "e1")}
	}
	hop := plan.Hop{SID: netip.MustParseAddr("fc00:ff::1"), Node: "s6", Behavior: "End"}
	seg := New(links(specs...), tables(rs)).Segment("s0", hop)
	if len(seg.Hops) != MaxBranches {
		t.Errorf("%d branches, want the bound %d", len(seg.Hops), MaxBranches)
	}
	if !seg.Reached() || len(seg.Problems) != 1 {
		t.Errorf("reached %v, problems %q: want every branch shown at the SID and one problem naming the bound", seg.Reached(), seg.Problems)
	}
}
