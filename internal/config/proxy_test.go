package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// proxyBase is a domain with one NFV node, an SF with two links to it and
// an egress; %s are extra services and chains.
const proxyBase = `
nodes:
  in:  {role: ingress, id: 1, locator: "fc00:1::/64"}
  nfv: {role: nfv, id: 2, locator: "fc00:2::/64"}
  out: {role: egress, id: 4, locator: "fc00:4::/64"}
  sf:  {role: sf, id: 7}
links:
  - {endpoints: ["in:eth-nfv", "nfv:eth-in"], ipv6: "fc00:12::/64"}
  - {endpoints: ["nfv:eth-out", "out:eth-nfv"], ipv6: "fc00:24::/64"}
  - {endpoints: ["nfv:sf0", "sf:p0"], ipv6: "fc00:27::/64"}
  - {endpoints: ["nfv:sf1", "sf:p1"], ipv6: "fc00:28::/64"}
  - {endpoints: ["out:eth-d", "sf:p2"], ipv6: "fc00:29::/64"}
services:
%s
chains:
%s
`

// TestProxyValidation checks the inner ethernet and flow_max rules one at a
// time, each error with its field path, and that what passes validation is
// what srunaware.ParseSpec accepts (the backstop reports the rest at the
// service's path).
func TestProxyValidation(t *testing.T) {
	l2chain := `  l2:
    ingress: in
    mode: l2encap
    match: {dst: "fc00:99::/64"}
    services: [px]
    egress: {node: out, behavior: End.DX2, oif: eth-d}`
	v6chain := `  c6:
    ingress: in
    match: {dst: "fc00:99::/64"}
    services: [px]
    egress: {node: out, behavior: End.DX6, nh6: "fc00:24::99"}`
	// A static proxy followed by 30 more segments: a CACHE longer than
	// the proxy's header buffer (only srunaware.ParseSpec knows that).
	var long, ends []string
	for i := range 29 {
		long = append(long, fmt.Sprintf("e%d", i))
		ends = append(ends, fmt.Sprintf("  e%d: {node: out, behavior: End}", i))
	}
	longChain := `  c6:
    ingress: in
    match: {dst: "fc00:99::/64"}
    services: [px, ` + strings.Join(long, ", ") + `]
    egress: {node: out, behavior: End.DX6, nh6: "fc00:24::99"}`
	const eth = `  px: {node: nfv, kind: sr-unaware, inner: ethernet, iface_out: sf0, iface_in: sf1, `
	const flow = `  px: {node: nfv, kind: sr-unaware, proxy: dynamic-flow, inner: ipv6, sf_nh6: "fc00:27::7", iface_out: sf0, iface_in: sf0, `
	for _, tc := range []struct {
		name, services, chains string
		want                   []string // "path: message prefix"; none: valid
	}{
		{"ethernet dynamic", eth + "proxy: dynamic}", l2chain, nil},
		{"ethernet static", eth + "proxy: static}", l2chain, nil},
		{"ethernet static red", eth + "proxy: static}", strings.Replace(l2chain, "l2encap", "l2encap.red", 1), nil},
		{"ethernet with sf_mac", eth + `proxy: dynamic, sf_mac: "02:00:00:00:00:07"}`, l2chain,
			[]string{"services.px.sf_mac: inner ethernet takes no SF address"}},
		{"ethernet dynamic-flow", eth + "proxy: dynamic-flow, flow_timeout: 5}", l2chain,
			[]string{"services.px.inner: ethernet is not for proxy dynamic-flow"}},
		{"ethernet masquerading", eth + "proxy: masquerading}", v6chain,
			[]string{"services.px.inner: not for masquerading"}},
		{"ethernet in an IP chain", eth + "proxy: dynamic}", v6chain,
			[]string{"chains.c6.services[0]: proxy service px has inner ethernet but chain mode encap"}},
		{"ipv6 in an l2 chain", flow + "flow_timeout: 5}", l2chain,
			[]string{"chains.l2.services[0]: proxy service px: chain mode l2encap carries Ethernet frames"}},
		{"flow max", flow + "flow_max: 1000, flow_timeout: 30}", v6chain, nil},
		{"flow max bounds", flow + "flow_max: 65536, flow_timeout: 1}", v6chain, nil},
		{"flow max zero timeout", flow + "flow_max: 10}", v6chain,
			[]string{"services.px.flow_max: needs flow_timeout"}},
		{"flow max too big", flow + "flow_max: 65537, flow_timeout: 5}", v6chain,
			[]string{"services.px.flow_max: 65537: want 1..65536 flows"}},
		{"flow max negative", flow + "flow_max: -1, flow_timeout: 5}", v6chain,
			[]string{"services.px.flow_max: -1: want 1..65536 flows"}},
		{"flow max on dynamic", strings.Replace(flow, "dynamic-flow", "dynamic", 1) + "flow_max: 10}", v6chain,
			[]string{"services.px.flow_max: only for proxy dynamic-flow"}},
		{"flow max on native", "  px: {node: nfv, behavior: End, flow_max: 10}", v6chain,
			[]string{"services.px.flow_max: only for kind sr-unaware"}},
		{"static CACHE too long", `  px: {node: nfv, kind: sr-unaware, proxy: static, inner: ipv6, sf_nh6: "fc00:27::7", iface_out: sf0, iface_in: sf0}` +
			"\n" + strings.Join(ends, "\n"), longChain,
			[]string{"services.px: the proxy refuses it: End.AS: at most 29 segs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(fmt.Sprintf(proxyBase, tc.services, tc.chains)), t.TempDir())
			var got []string
			var list ErrorList
			if err != nil && !errors.As(err, &list) {
				t.Fatalf("error is %T: %v", err, err)
			}
			for _, e := range list {
				got = append(got, e.Path+": "+e.Msg)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors (-want +got):\n%s", cmp.Diff(tc.want, got))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d = %q, want prefix %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}
