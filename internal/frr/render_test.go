package frr

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/plan"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestRenderRedundant renders the routers' FRR configuration of
// examples/redundant.yaml (the one docs/routing.md shows) against
// testdata/redundant-NODE.conf, and with routing.bgp.bfd against
// testdata/redundant-NODE-bfd.conf (-update rewrites them).
func TestRenderRedundant(t *testing.T) {
	for _, bfd := range []bool{false, true} {
		d, err := config.Load("../../examples/redundant.yaml")
		if err != nil {
			t.Fatal(err)
		}
		d.Routing.BGP.BFD = bfd
		p, err := plan.Build(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"r1", "r2"} {
			c := Render(n, p.FRR[n])
			golden := filepath.Join("testdata", "redundant-"+n+".conf")
			// Every session of the routers (all with GoBGP nodes) runs
			// BFD with segchain's own: bfdd is started.
			if wantD := map[bool]int{false: 2, true: 3}[bfd]; len(c.Daemons()) != wantD {
				t.Errorf("%s with bfd %v: daemons %v", n, bfd, c.Daemons())
			}
			if bfd {
				golden = filepath.Join("testdata", "redundant-"+n+"-bfd.conf")
			}
			got := c.Integrated()
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", golden, diff)
			}
		}
	}
}
