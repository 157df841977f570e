package plan

import (
	"os"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/pool"
)

// TestPoolsF3216: in an f3216 domain a pool may have uSID members
// (session 12; refused before, when the selector rewrote a full SID in
// the SRH and found nothing in a container): the selector's spec holds,
// per instance, the chain's list packed with that instance's uSID in the
// pool's place (its first container starts with it), the bypass list
// without it, and probes packed the same way. With the members' SIDs
// pinned (full) the chain is a mixed one: encap, the pool's SID an SRH
// entry.
func TestPoolsF3216(t *testing.T) {
	b, err := os.ReadFile("../../test/pools/testdata/pooled.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(b), "name: pools", "name: pools\nsid: {format: f3216}", 1)
	d0, err := config.Parse([]byte(y), "../../test/pools/testdata")
	if err != nil {
		t.Fatalf("a pool of uSID members: %v", err)
	}
	p0, err := Build(d0)
	if err != nil {
		t.Fatal(err)
	}
	var sp pool.Spec
	for _, s := range p0.Nodes["ingress"].Services {
		if s.Kind == pool.Name {
			if sp, err = pool.SpecOf(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(sp.Chains) != 1 || len(sp.Chains[0].Instances) != 3 {
		t.Fatalf("pool spec at ingress: chains %+v", sp.Chains)
	}
	cs := sp.Chains[0]
	for k, in := range sp.Pool.Instances {
		sid := in.SID.As16()
		if sid[0] != 0xfc || sid[1] != 0xbb {
			t.Fatalf("instance %s: SID %s is not a uSID", in.Name, in.SID)
		}
		segs := cs.Instances[k].Segs
		first := segs[0].As16()
		if first[4] != sid[4] || first[5] != sid[5] || first[0] != 0xfc {
			t.Errorf("instance %s (%s): list %v does not start with its uSID", in.Name, in.SID, segs)
		}
		if pr := sp.Probes[k].Segs; len(pr) == 0 || pr[0].As16()[4] != sid[4] || pr[0].As16()[5] != sid[5] {
			t.Errorf("instance %s: probe list %v does not start with its uSID", in.Name, pr)
		}
	}
	if cs.Bypass == nil || len(cs.Bypass.Segs) == 0 {
		t.Errorf("bypass list: %+v", cs.Bypass)
	} else if bp := cs.Bypass.Segs[0].As16(); bp[4] == sp.Pool.Instances[0].SID.As16()[4] && bp[5] == sp.Pool.Instances[0].SID.As16()[5] {
		t.Errorf("bypass list %v still starts with the pool's uSID", cs.Bypass.Segs)
	}
	if cs.Route.Seg6 == nil || cs.Rule.Table != cs.Route.Table || cs.Rule.Table == 0 {
		t.Errorf("chain rule %+v / route %+v", cs.Rule, cs.Route)
	}

	// Pinned: full SIDs in the nodes' locators.
	pin := map[string]string{"fw1:": "fc00:2::6151:0", "fw2:": "fc00:3::7231:0", "fw3:": "fc00:5::60d1:0"}
	lines := strings.Split(y, "\n")
	for i, l := range lines {
		if sid, ok := pin[strings.TrimSpace(l)]; ok && strings.HasPrefix(l, "  fw") {
			lines[i] = l + "\n    sid: \"" + sid + "\""
		}
	}
	d, err := config.Parse([]byte(strings.Join(lines, "\n")), "../../test/pools/testdata")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(d)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	p.Render(&out)
	for _, want := range []string{
		"pushed as encap fc00:2::6151:0,fcbb:bb00:",
		"pool fw1 fc00:2::6151:0/128 [fw1 fc00:2::6151:0 w1, fw2 fc00:3::7231:0 w1, fw3 fc00:5::60d1:0 w1]",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, out.String())
		}
	}
}
