package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nodestate"
)

const sameNodeDomain = `
name: samenode
nodes:
  in:  {role: ingress, id: 1, locator: "fc00:1::/64"}
  nfv: {role: nfv, id: 2, locator: "fc00:2::/64"}
  out: {role: egress, id: 4, locator: "fc00:4::/64"}
  sf:  {role: sf, id: 7}
links:
  - endpoints: ["in:eth-nfv", "nfv:eth-in"]
    ipv6: "fc00:12::/64"
  - endpoints: ["nfv:eth-out", "out:eth-nfv"]
    ipv6: "fc00:24::/64"
  - endpoints: ["nfv:sf0", "sf:eth-nfv"]
    ipv6: "fc00:27::/64"
services:
  end: {node: nfv, behavior: End, function: "0xe"}
  ad:  {node: nfv, kind: sr-unaware, proxy: dynamic-flow, inner: ipv6, sf_nh6: "fc00:27::7", iface_out: sf0, iface_in: sf0, flow_timeout: 30, function: "0xad"}
  fw:  {node: nfv, kind: firewall, function: "0xf1", firewall: {policy: accept}}
  far: {node: out, behavior: End, function: "0xe"}
chains:
  end-ad:
    ingress: in
    match: {dst: "fc00:4d::/64", proto: udp, dport: "1"}
    services: [end, ad, far]
    egress: {node: out, behavior: End.DX6, nh6: "fc00:4d::d"}
  ad-fw:
    ingress: in
    match: {dst: "fc00:4d::/64", proto: udp, dport: "2"}
    services: [ad, fw]
    egress: {node: out, behavior: End.DX6, nh6: "fc00:4d::d"}
  fw-end:
    ingress: in
    match: {dst: "fc00:4d::/64", proto: udp, dport: "3"}
    services: [fw, end]
    egress: {node: out, behavior: End.DX6, nh6: "fc00:4d::d"}
  first:
    ingress: in
    match: {dst: "fc00:4d::/64", proto: udp, dport: "4"}
    services: [fw]
    egress: {node: out, behavior: End.DX6, nh6: "fc00:4d::d"}
`

// TestLoopRoutes: a tc-served SID (proxy, firewall) right after another
// SID of its node gets one route through the service loop, however many
// chains need it; a kernel-served SID (native, egress) right after another
// one has its seg6local route on the loop; a native SID after an eBPF one,
// or a SID reached from another node, gets none. Every chain lists the nodes it
// crosses, the SF behind its proxy included.
func TestLoopRoutes(t *testing.T) {
	d, err := config.Parse([]byte(sameNodeDomain), ".")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	loopRoutes := func(node string) []string {
		var got []string
		for _, r := range p.Nodes[node].Routes {
			if r.Dev != nodestate.LoopDev {
				continue
			}
			if r.Seg6Local != nil {
				got = append(got, r.Dst.String()+" "+r.Seg6Local.Action)
			} else {
				got = append(got, r.Dst.String()+" via "+r.Via.String())
			}
		}
		return got
	}
	want := map[string][]string{
		// ad after end, fw after ad: through the loop; end after fw:
		// handed to the stack by the firewall, stays on lo.
		"nfv": {"fc00:2::ad:0/128 via fe80::5c", "fc00:2::f1:0/112 via fe80::5c"},
		// The egress End.DX6 right after far (End) on the same node: its
		// seg6local route on the loop, not lo.
		"out": {"fc00:4::8b8a:0/112 End.DX6"},
	}
	for _, n := range []string{"in", "nfv", "out", "sf"} {
		if diff := cmp.Diff(want[n], loopRoutes(n)); diff != "" {
			t.Errorf("loop routes on %s (-want +got):\n%s", n, diff)
		}
	}
	nodes := map[string][]string{}
	for _, c := range p.Chains {
		nodes[c.Name] = c.Nodes
	}
	if diff := cmp.Diff([]string{"in", "nfv", "out", "sf"}, nodes["end-ad"]); diff != "" {
		t.Errorf("nodes of end-ad (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"in", "nfv", "out"}, nodes["fw-end"]); diff != "" {
		t.Errorf("nodes of fw-end (-want +got):\n%s", diff)
	}
}
