package plan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/service/srunaware"
)

// proxyDomain is a small domain with one sr-unaware service per proxy type,
// each in its own chain.
const proxyDomain = `
name: proxies
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
    ipv4: "10.27.0.0/24"
  - endpoints: ["nfv:sf1", "sf:eth-nfv1"]
    ipv6: "fc00:28::/64"
  - endpoints: ["nfv:sf2", "sf:eth-nfv2"]
    ipv6: "fc00:29::/64"
  - endpoints: ["nfv:sf3", "sf:eth-nfv3"]
    ipv6: "fc00:2a::/64"
services:
  as:   {node: nfv, kind: sr-unaware, proxy: static, inner: ipv4, sf_nh4: "10.27.0.7", iface_out: sf0, iface_in: sf0, function: "0xa5"}
  ad:   {node: nfv, kind: sr-unaware, proxy: dynamic, inner: ipv6, sf_mac: "02:00:00:00:00:1B", iface_out: sf1, iface_in: sf1, function: "0xad"}
  adf:  {node: nfv, kind: sr-unaware, proxy: dynamic-flow, inner: ipv6, sf_nh6: "fc00:27::7", iface_out: sf0, iface_in: eth-out, flow_timeout: 30, flow_max: 1000, function: "0xaf"}
  adl2: {node: nfv, kind: sr-unaware, proxy: dynamic, inner: ethernet, iface_out: sf2, iface_in: sf3, function: "0xa2"}
  asl2: {node: nfv, kind: sr-unaware, proxy: static, inner: ethernet, iface_out: sf3, iface_in: sf2, function: "0xa7"}
  am:   {node: nfv, kind: sr-unaware, proxy: masquerading, sf_nh6: "fc00:28::7", iface_out: sf1, iface_in: eth-in, function: "0xa3"}
  end:  {node: out, behavior: End, function: "0xe"}
chains:
  c4:
    ingress: in
    match: {dst: "198.18.0.0/24"}
    services: [as, end]
    egress: {node: out, behavior: End.DX4, nh4: "198.18.0.1", sid: "fc00:4::d4:0"}
  c6:
    ingress: in
    match: {dst: "fc00:99::/64"}
    services: [ad, adf, am]
    egress: {node: out, behavior: End.DX6, nh6: "fc00:24::99", sid: "fc00:4::d6:0"}
  l2d:
    ingress: in
    mode: l2encap
    match: {dst: "fc00:98::/64"}
    services: [adl2]
    egress: {node: out, behavior: End.DX2, oif: eth-nfv, sid: "fc00:4::d2:0"}
  l2s:
    ingress: in
    mode: l2encap.red
    match: {dst: "fc00:97::/64", proto: udp}
    services: [asl2, end]
    egress: {node: out, behavior: End.DX2, oif: eth-nfv, sid: "fc00:4::d3:0"}
`

// TestProxies checks the proxies the plan emits and that every one parses
// with srunaware.ParseSpec to the same canonical parameters.
func TestProxies(t *testing.T) {
	d, err := config.Parse([]byte(proxyDomain), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range proxiesOf(t, p.Nodes["nfv"]) {
		got = append(got, x.String())
		t.Run(x.SID.String(), func(t *testing.T) {
			s, err := srunaware.ParseSpec(x.SID, x.Behavior, x.Params)
			if err != nil {
				t.Fatalf("ParseSpec(%s): %v", x, err)
			}
			if diff := cmp.Diff(x.Params, s.Params()); diff != "" {
				t.Errorf("params not canonical (-want +got):\n%s", diff)
			}
		})
	}
	want := []string{
		"proxy fc00:2::a2:0/128 End.AD inner ethernet oif sf2 iif sf3",
		"proxy fc00:2::a3:0/128 End.AM nh6 fc00:28::7 oif sf1 iif eth-in",
		"proxy fc00:2::a5:0/128 End.AS inner ipv4 nh4 10.27.0.7 oif sf0 iif sf0 src fc00:2::1 segs fc00:4::e:0,fc00:4::d4:0",
		"proxy fc00:2::a7:0/128 End.AS inner ethernet oif sf3 iif sf2 src fc00:2::1 segs fc00:4::e:0,fc00:4::d3:0",
		"proxy fc00:2::ad:0/128 End.AD inner ipv6 mac 02:00:00:00:00:1b oif sf1 iif sf1",
		"proxy fc00:2::af:0/128 End.AD inner ipv6 nh6 fc00:27::7 oif sf0 iif eth-out flow max 1000 timeout 30",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("proxies (-want +got):\n%s", diff)
	}
	// A proxy SID has no seg6local route; the sf node forwards and only has
	// a default route.
	for _, r := range p.Nodes["nfv"].Routes {
		if r.Seg6Local != nil {
			t.Errorf("nfv: unexpected seg6local route %s", r)
		}
	}
	var sfRoutes []string
	for _, r := range p.Nodes["sf"].Routes {
		sfRoutes = append(sfRoutes, r.String())
	}
	if diff := cmp.Diff([]string{"::/0 via fc00:27::2 dev eth-nfv", "0.0.0.0/0 via 10.27.0.2 dev eth-nfv"}, sfRoutes,
		cmp.Transformer("sorted", func(s []string) string { return fmt.Sprint(len(s)) + strings.Join(sortedCopy(s), "|") })); diff != "" {
		t.Errorf("sf routes (-want +got):\n%s", diff)
	}
	var fwd bool
	for _, s := range p.Nodes["sf"].Sysctls {
		fwd = fwd || (s.Key == "net.ipv6.conf.all.forwarding" && s.Value == "1")
	}
	if !fwd {
		t.Error("sf node does not forward")
	}
	var hops []string
	for _, c := range p.Chains {
		for _, h := range c.Hops {
			hops = append(hops, c.Name+" "+h.Service+" "+h.Behavior)
		}
	}
	wantHops := []string{"c4 as End.AS", "c4 end End", "c4 c4 egress End.DX4",
		"c6 ad End.AD", "c6 adf End.AD", "c6 am End.AM", "c6 c6 egress End.DX6",
		"l2d adl2 End.AD", "l2d l2d egress End.DX2",
		"l2s asl2 End.AS", "l2s end End", "l2s l2s egress End.DX2"}
	if diff := cmp.Diff(wantHops, hops); diff != "" {
		t.Errorf("hops (-want +got):\n%s", diff)
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}
