package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAgents(t *testing.T) {
	base := `name: t
nodes:
  a: {role: ingress, id: 1, locator: "fc00:1::/64", agent: "%A%"}
  b: {role: egress, id: 2, locator: "fc00:2::/64", agent: "[2001:db8::2]:7070"%B%}
links:
  - {endpoints: [a:e1, b:e1], ipv6: "fc00:12::/64"}
`
	for _, tc := range []struct {
		name, a, b, pki string
		want            []string
	}{
		{"ok", "192.0.2.1:7070", "", "security:\n  pki: {ca: ca.crt, cert: c.crt, key: c.key}\n", nil},
		{"no pki", "192.0.2.1:7070", "", "", []string{"security.pki: required: nodes.a.agent is an agent, reached over mutual TLS (ca, cert, key; segchain pki)"}},
		{"bad addresses", "192.0.2.1", ", netns: x", "security:\n  pki: {ca: ca.crt, cert: c.crt}\n", []string{
			`nodes.a.agent: "192.0.2.1": want HOST:PORT ([IPv6]:PORT for an IPv6 address)`,
			"nodes.b.agent: a node is reached through its agent or is the namespace nodes.b.netns, not both",
			"security.pki.key: required",
		}},
		{"port", "h:0", "", "security:\n  pki: {ca: ca.crt, cert: c.crt, key: k}\n", []string{`nodes.a.agent: "h:0": port "0" not in 1..65535`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.NewReplacer("%A%", tc.a, "%B%", tc.b).Replace(base) + tc.pki
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
			if err == nil {
				ca, _, _ := d.PKIFiles()
				if !strings.HasSuffix(ca, "/ca.crt") || !strings.HasPrefix(ca, "/") {
					t.Errorf("ca resolved to %q", ca)
				}
			}
		})
	}
}
