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
			checkGolden(t, golden, c.Integrated())
		}
	}
}

// TestRenderAggregates renders a 3-tier Clos's spine and super-spine under
// routing: bgp with the pods' and planes' blocks in routing.summaries
// (testdata/clos3-bgp.yaml) against testdata/clos3-NODE.conf: the spine
// announces its pod's and its plane's block (aggregate-address) and sends
// each neighbour outside a block only its aggregate (an outbound prefix
// list); the super-spine, whose neighbours are all in its plane,
// aggregates nothing. Its connect timer is 1 s towards the super-spine
// (FRR, up from the lab's start) and frr.SpeakerConnectRetry towards its
// leaves (GoBGP speakers, listening only once an apply started them).
// test/bgp TestPrivilegedBGPAggregates runs it.
func TestRenderAggregates(t *testing.T) {
	d, err := config.Load("testdata/clos3-bgp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"sp0x0", "ss0x0"} {
		checkGolden(t, filepath.Join("testdata", "clos3-"+n+".conf"), Render(n, p.FRR[n]).Integrated())
	}
}

// checkGolden compares got with the golden file (-update rewrites it).
func checkGolden(t *testing.T, golden, got string) {
	t.Helper()
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
