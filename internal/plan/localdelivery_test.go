package plan

import (
	"slices"
	"testing"
)

// A chain decapsulated by End.DT6 gets, at the decapsulating node, a
// local route in the SID's table for each of the node's addresses within
// the chain's destination: the reverse chain of a bidirectional chain at
// its headend (replies to the headend's own connections), the forward
// chain at its egress. Addresses outside the destination get none, and
// End.DX6 none at all.
func TestLocalDelivery(t *testing.T) {
	const domain = `name: ld
nodes:
  s:       {role: host, id: 0xa}
  ingress: {role: ingress, id: 1, locator: "fc00:1::/64"}
  nfv:     {role: nfv, id: 2, locator: "fc00:2::/64"}
  egress:  {role: egress, id: 4, locator: "fc00:4::/64"}
  d:       {role: host, id: 0xd}
links:
  - {endpoints: ["s:e-i", "ingress:e-s"], ipv6: "fc00:1a::/64"}
  - {endpoints: ["ingress:e-n", "nfv:e-i"], ipv6: "fc00:12::/64"}
  - {endpoints: ["nfv:e-e", "egress:e-n"], ipv6: "fc00:24::/64"}
  - {endpoints: ["egress:e-d", "d:e-e"], ipv6: "fc00:4d::/64"}
services:
  fw: {node: nfv, behavior: End}
chains:
  web:
    ingress: ingress
    match: {src: "fc00:1a::/64", dst: "fc00:4d::/64"}
    services: [fw]
    egress: {node: egress, behavior: End.DT6, table: 254}
    bidirectional: true
  dx:
    ingress: ingress
    match: {src: "fc00:1a::/64", dst: "fc00:24::/64"}
    services: [fw]
    egress: {node: egress, behavior: End.DX6, nh6: "fc00:24::2"}
routing:
  mode: static
`
	p, err := buildString(t, domain)
	if err != nil {
		t.Fatal(err)
	}
	local := func(node string) []string {
		var out []string
		for _, r := range p.Nodes[node].Routes {
			if r.Local {
				out = append(out, r.String())
			}
		}
		slices.Sort(out)
		return out
	}
	if got, want := local("ingress"), []string{"fc00:1a::1/128 local"}; !slices.Equal(got, want) {
		t.Errorf("ingress's local routes %q, want %q (its address towards s, in table main)", got, want)
	}
	if got, want := local("egress"), []string{"fc00:4d::4/128 local"}; !slices.Equal(got, want) {
		t.Errorf("egress's local routes %q, want %q (its address towards d only: dx is End.DX6)", got, want)
	}
	if got := local("nfv"); len(got) != 0 {
		t.Errorf("nfv decapsulates nothing, yet has local routes %q", got)
	}
}
