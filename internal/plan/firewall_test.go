package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/fwrule"
)

// fwDomain: fw → ids → egress, the firewall with inline rules and a save
// file.
const fwDomain = `
name: fw
nodes:
  in:  {role: ingress, id: 1, locator: "fc00:1::/64"}
  nfv: {role: nfv, id: 2, locator: "fc00:2::/64"}
  out: {role: egress, id: 4, locator: "fc00:4::/64"}
links:
  - endpoints: ["in:eth-nfv", "nfv:eth-in"]
    ipv6: "fc00:12::/64"
  - endpoints: ["nfv:eth-out", "out:eth-nfv"]
    ipv6: "fc00:24::/64"
services:
  fw1:
    node: nfv
    kind: firewall
    function: "0xf1"
    firewall:
      rules_file: fw.rules
      rules:
        - "-p udp --dport 53 -m srh -j SEG6 --seg6-action skip-next"
        - "-4 -s 10.0.0.0/8 -j DROP"
      args: {0: go-next, 1: drop, 9: reject}
  ids: {node: nfv, behavior: End, function: "0x1d5"}
chains:
  web:
    ingress: in
    match: {dst: "fc00:99::/64"}
    services: [fw1, ids]
    egress: {node: out, behavior: End.DX6, nh6: "fc00:24::99", sid: "fc00:4::d6:0"}
`

func TestFirewalls(t *testing.T) {
	dir := t.TempDir()
	save := "*filter\n:FORWARD DROP [0:0]\n-A FORWARD -s fc00:1::/64 -p tcp -m tcp --dport 22 -j REJECT --reject-with icmp6-adm-prohibited\nCOMMIT\n"
	if err := os.WriteFile(filepath.Join(dir, "fw.rules"), []byte(save), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := config.Parse([]byte(fwDomain), dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	n := p.Nodes["nfv"]
	fws := firewallsOf(t, n)
	if len(fws) != 1 {
		t.Fatalf("firewalls: %+v", fws)
	}
	var got []string
	for _, f := range fws {
		got = append(got, f.Lines()...)
	}
	want := []string{
		"firewall fc00:2::f1:0/112 End.AN.FW args_bits 16 policy drop args 0=go-next,1=drop,9=reject rules 3",
		"  1: -s fc00:1::/64 -p tcp --dport 22 -j REJECT --reject-with icmp6-adm-prohibited",
		"  2: -p udp --dport 53 -m srh -j SEG6 --seg6-action skip-next",
		"  3: -4 -s 10.0.0.0/8 -j DROP",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("firewall (-want +got):\n%s", diff)
	}
	// Every rule the plan carries parses back.
	for _, r := range fws[0].Rules {
		if _, err := fwrule.ParseLine(r, fwrule.IPv6); err != nil {
			t.Errorf("plan rule %q: %v", r, err)
		}
	}
	// No seg6local route for the firewall SID; the chain goes through it.
	for _, r := range n.Routes {
		if strings.Contains(r.String(), "fc00:2::f1:0") {
			t.Errorf("firewall SID has a route: %s", r)
		}
	}
	var chain []string
	for _, c := range p.Chains {
		for _, h := range c.Hops {
			chain = append(chain, h.Behavior+" "+h.SID.String())
		}
	}
	if want := "End.AN.FW fc00:2::f1:0"; len(chain) == 0 || chain[0] != want {
		t.Errorf("chain hops %v, want first %q", chain, want)
	}
	var sids []string
	for _, s := range p.SIDs {
		sids = append(sids, s.SID.String()+" "+s.Behavior)
	}
	if !strings.Contains(strings.Join(sids, "|"), "fc00:2::f1:0/112 End.AN.FW") {
		t.Errorf("SID table %v lacks the firewall's /112", sids)
	}
}
