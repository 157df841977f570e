package plan

import (
	"os"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
)

// TestPoolsF3216: in an f3216 domain a pool whose members would get
// uSIDs is refused, each member under its path (the selector rewrites a
// full SID in the SRH: with the pool's uSID in a container, encap.red
// and no SRH, it found nothing and every flow went to the pool's own
// instance, no failover). With the members' SIDs pinned (full) the chain
// is a mixed one: encap, the pool's SID an SRH entry the selector finds.
func TestPoolsF3216(t *testing.T) {
	b, err := os.ReadFile("../../test/pools/testdata/pooled.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(b), "name: pools", "name: pools\nsid: {format: f3216}", 1)
	_, err = config.Parse([]byte(y), "../../test/pools/testdata")
	for _, want := range []string{"services.fw1 (", "fw1 would get a uSID", "services.fw1.instances[0].service (", "fw2 would get a uSID", "services.fw1.instances[1].service (", "fw3 would get a uSID", "pin its sid"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want one containing %q", err, want)
		}
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
