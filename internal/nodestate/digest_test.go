package nodestate

import (
	"net/netip"
	"testing"
)

// Digest sees what the diff compares and nothing else: a route's owner
// and the order of lists do not count; a route, a rule, a sysctl value,
// an HMAC secret, a fault or a foreign SID does.
func TestDigest(t *testing.T) {
	want := &Node{Name: "a", Sysctls: []Sysctl{{Key: "net.ipv6.conf.all.forwarding", Value: "1"}},
		HMACKeys: []HMACKey{{ID: 1, Alg: "sha256", Secret: []byte("s")}},
		Routes: []Route{
			{Dst: netip.MustParsePrefix("fc00::/16"), Via: netip.MustParseAddr("fe80::1"), Dev: "e0", Owner: "summary"},
			{Dst: netip.MustParsePrefix("fc01::/16"), Via: netip.MustParseAddr("fe80::2"), Dev: "e1"},
		}}
	in := want.Digest()
	same := *want
	same.Routes = []Route{want.Routes[1], want.Routes[0]}
	same.Routes[1].Owner = ""
	same.Sysctls = append(same.Sysctls, Sysctl{Key: "net.ipv6.conf.e9.seg6_enabled", Value: "1"}) // not want's
	if got := Digest(&same, want); got != in {
		t.Errorf("the same state in another order, without owners: digest %s, want %s", got, in)
	}
	for name, change := range map[string]func(n *Node){
		"a route more": func(n *Node) { n.Routes = append(n.Routes, Route{Dst: netip.MustParsePrefix("fc02::/16"), Dev: "e0"}) },
		"a route less": func(n *Node) { n.Routes = n.Routes[:1] },
		"another next hop": func(n *Node) {
			n.Routes = []Route{n.Routes[0], {Dst: n.Routes[1].Dst, Via: netip.MustParseAddr("fe80::3"), Dev: "e1"}}
		},
		"a sysctl value": func(n *Node) { n.Sysctls = []Sysctl{{Key: "net.ipv6.conf.all.forwarding", Value: "0"}} },
		"an HMAC secret": func(n *Node) { n.HMACKeys = []HMACKey{{ID: 1, Alg: "sha256", Secret: []byte("t")}} },
		"a rule":         func(n *Node) { n.Rules = []Rule{{Family: 10, Priority: 100, Table: 100}} },
		"a fault":        func(n *Node) { n.Faults = map[string][]string{"firewall": {"program detached"}} },
		"a foreign SID": func(n *Node) {
			n.Foreign = []ForeignRoute{{Route: Route{Dst: netip.MustParsePrefix("fc00:0:1::/64")}, Protocol: ProtoManual}}
		},
		"a tunnel source":   func(n *Node) { n.TunSrc = "fc00::1" },
		"a boundary filter": func(n *Node) { n.Boundary = &Boundary{} },
	} {
		got := *want
		got.Routes = append([]Route(nil), want.Routes...)
		change(&got)
		w := want
		if name == "a tunnel source" {
			w = &Node{Name: "a", Sysctls: want.Sysctls, HMACKeys: want.HMACKeys, Routes: want.Routes, TunSrc: "fc00::2"}
		}
		if Digest(&got, w) == Digest(w, w) {
			t.Errorf("%s: same digest", name)
		}
	}
	// A tunnel source want leaves alone is not compared.
	ts := *want
	ts.TunSrc = "fc00::9"
	if Digest(&ts, want) != in {
		t.Error("a tunnel source the intent leaves alone changed the digest")
	}
}
