package cpbench

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/controller"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// A small 3-tier Clos fabric (three pods of two leaves and two spines,
// two planes of one super-spine) with summarised static routes, brought up
// in namespaces and applied in-process: every leaf answers a ping from
// every other leaf, across pods, to an address inside the far pod's
// block, which the pinging leaf reaches through one summary route (and
// the reply through the far leaf's).
func TestPrivilegedSummariesForward(t *testing.T) {
	d, p, l := fabricLab(t, "sum")
	agents := map[string]agent.Agent{}
	for n := range p.Nodes {
		ns, _ := l.Netns(n)
		agents[n] = local.NewLocal(n, ns)
	}
	t.Cleanup(func() {
		for _, a := range agents {
			_ = a.Forget(context.Background())
		}
	})
	if _, err := (&controller.Controller{Plan: p, Agents: agents}).Apply(context.Background(), false); err != nil {
		t.Fatalf("apply: %v", err)
	}
	// Each leaf's last link address (to its last spine: not the spine a
	// summary route leads to from outside, so that the far pod's own
	// specific routes are needed too), and its pod.
	addr := map[string]netip.Addr{}
	for _, lk := range p.Links {
		if d.Nodes[lk.Node].Locator == "" {
			continue
		}
		for _, a := range lk.Addrs {
			if a.Addr().Is6() && a.Addr().As16()[0] == 0xfc {
				addr[lk.Node] = a.Addr()
				break
			}
		}
	}
	pod := func(n string) byte { return netip.MustParsePrefix(d.Nodes[n].Locator).Addr().As16()[1] }
	pairs := 0
	for a := range addr {
		for b, dst := range addr {
			if pod(a) == pod(b) {
				continue
			}
			summarised := false
			for _, r := range p.Nodes[a].Routes {
				if r.Dst.Bits() == 16 && r.Dst.Contains(dst) {
					summarised = true
				}
				if r.Dst.Bits() > 16 && r.Dst.Contains(dst) {
					t.Fatalf("%s has a specific route %s to %s in another pod", a, r, dst)
				}
			}
			if !summarised {
				t.Fatalf("%s has no summary route to %s", a, dst)
			}
			ns, _ := l.Netns(a)
			if err := testutil.Ping(ns, dst, 5*time.Second); err != nil {
				t.Errorf("%s → %s (%s): %v", a, b, dst, err)
			}
			pairs++
		}
	}
	if pairs == 0 {
		t.Fatal("no leaf pairs across pods")
	}
	t.Logf("%d leaf pairs across pods answered", pairs)
}

// fabricLab brings up a 16-node, 3-tier Clos fabric with summarised
// routes in a lab of its own (labenv, name prefix), unapplied, with its
// domain and plan.
func fabricLab(t *testing.T, prefix string) (*config.Domain, *plan.Plan, *lab.Lab) {
	t.Helper()
	y, err := lab.Fabric{Topology: "clos3", Nodes: 16, Summaries: true, PodLeaves: 2, Spines: 2, Supers: 1}.YAML()
	if err != nil {
		t.Fatal(err)
	}
	d, err := config.Parse([]byte(y), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	return d, p, labenv.New(t, labenv.Options{Domain: d, Prefix: prefix}).Lab
}
