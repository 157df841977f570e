package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBGPRouting(t *testing.T) {
	base := `name: t
nodes:
  a: {role: ingress, id: 1, locator: "fc00:1::/64"%A%}
  r: {role: router, id: 5%R%}
  b: {role: egress, id: 2, locator: "fc00:2::/64"}
  h: {role: host, id: 9%H%}
links:
  - {endpoints: [a:e1, r:e1], ipv6: "fc00:15::/64"}
  - {endpoints: [r:e2, b:e1], ipv6: "fc00:25::/64"}
  - {endpoints: [b:e2, h:e1], ipv6: "fc00:29::/64"}
routing:
%ROUTING%
`
	for _, tc := range []struct {
		name, a, r, h, routing string
		want                   []string
	}{
		{"defaults", "", "", "", "  mode: bgp", nil},
		{"explicit", ", bgp: {asn: 65001, router_id: 192.0.2.1}", ", bgp: {asn: 65005}", "", "  mode: bgp\n  bgp: {keepalive: 3, hold: 9, bfd: true}", nil},
		{"old names", "", "", "", "  mode: gobgp", []string{"routing.mode: gobgp: say mode: bgp (GoBGP in the segchain agents, FRR on router nodes; docs/routing.md)"}},
		{"unknown mode", "", "", "", "  mode: ospf", []string{`routing.mode: unknown mode "ospf" (static, bgp)`}},
		{"bgp under static", ", bgp: {asn: 65001}", "", "", "  mode: static\n  bgp: {hold: 9}", []string{
			"nodes.a.bgp: only with routing.mode: bgp",
			"routing.bgp: only with routing.mode: bgp",
		}},
		{"timers", "", "", "", "  mode: bgp\n  bgp: {keepalive: 3, hold: 2}", []string{"routing.bgp.hold: 2 seconds: want 3..65535 (RFC 4271: at least 3)"}},
		{"keepalive not below hold", "", "", "", "  mode: bgp\n  bgp: {keepalive: 5, hold: 5}", []string{"routing.bgp.hold: 5 seconds is not more than keepalive (5): the session would expire between keepalives (hold is usually 3 x keepalive)"}},
		{"bfd timers", "", "", "", "  mode: bgp\n  bgp: {bfd: true, bfd_interval: 20, bfd_multiplier: 1}", []string{
			"routing.bgp.bfd_interval: 20 ms: want 50..60000",
			"routing.bgp.bfd_multiplier: 1: want 2..255",
		}},
		{"bfd timers too large", "", "", "", "  mode: bgp\n  bgp: {bfd: true, bfd_interval: 60001, bfd_multiplier: 256}", []string{
			"routing.bgp.bfd_interval: 60001 ms: want 50..60000",
			"routing.bgp.bfd_multiplier: 256: want 2..255",
		}},
		{"host speaks no bgp", "", "", ", bgp: {asn: 65009}", "  mode: bgp", []string{"nodes.h.bgp: a node of role host speaks no BGP (it keeps a static default route)"}},
		{"duplicate asn and router id", ", bgp: {asn: 65001, router_id: 10.0.0.5}", ", bgp: {asn: 65001}", "", "  mode: bgp", []string{
			"nodes.r.bgp.asn: AS65001 is also node a's: every node needs an ASN of its own (segchain runs eBGP between nodes)",
			"nodes.r.bgp.router_id: 10.0.0.5 is also node a's router id",
		}},
		{"bad asn and router id", ", bgp: {asn: 23456}", ", bgp: {router_id: \"fc00::1\"}", "", "  mode: bgp", []string{
			"nodes.a.bgp.asn: 23456: want 1..4294967294, not 23456 (AS_TRANS)",
			`nodes.r.bgp.router_id: "fc00::1": want a dotted-quad IPv4 address other than 0.0.0.0`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.NewReplacer("%A%", tc.a, "%R%", tc.r, "%H%", tc.h, "%ROUTING%", tc.routing).Replace(base)
			d, err := Parse([]byte(src), t.TempDir())
			var got []string
			var list ErrorList
			if errors.As(err, &list) {
				for _, e := range list {
					got = append(got, e.Path+": "+e.Msg)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("errors (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			switch tc.name {
			case "defaults":
				if d.Routing.BGP == nil || d.Routing.BGP.Keepalive != DefaultKeepalive || d.Routing.BGP.Hold != DefaultHold ||
					d.Routing.BGP.BFDInterval != DefaultBFDInterval || d.Routing.BGP.BFDMultiplier != DefaultBFDMultiplier {
					t.Errorf("timers: %+v", d.Routing.BGP)
				}
				if a := d.ASN("r"); a != DefaultASNBase+5 {
					t.Errorf("ASN(r) = %d", a)
				}
				if id := d.RouterID("a"); id != "10.0.0.1" {
					t.Errorf("RouterID(a) = %s", id)
				}
				for n, want := range map[string]string{"a": SpeakerGoBGP, "r": SpeakerFRR, "b": SpeakerGoBGP, "h": ""} {
					if got := d.Speaker(n); got != want {
						t.Errorf("Speaker(%s) = %q, want %q", n, got, want)
					}
				}
			case "explicit":
				if d.ASN("a") != 65001 || d.RouterID("a") != "192.0.2.1" || d.ASN("r") != 65005 || d.ASN("b") != DefaultASNBase+2 {
					t.Errorf("ASNs %d %d %d, router id %s", d.ASN("a"), d.ASN("r"), d.ASN("b"), d.RouterID("a"))
				}
			}
		})
	}
}
