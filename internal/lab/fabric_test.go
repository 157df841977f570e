package lab

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/plan"
)

func buildFabric(t *testing.T, f Fabric) (*config.Domain, *plan.Plan) {
	t.Helper()
	y, err := f.YAML()
	if err != nil {
		t.Fatalf("%+v: %v", f, err)
	}
	d, err := config.Parse([]byte(y), t.TempDir())
	if err != nil {
		t.Fatalf("%+v: %v", f, err)
	}
	p, err := plan.Build(d)
	if err != nil {
		t.Fatalf("%+v: plan: %v", f, err)
	}
	return d, p
}

// roles counts a domain's nodes by role.
func roles(d *config.Domain) map[string]int {
	out := map[string]int{}
	for _, n := range d.Nodes {
		out[n.Role]++
	}
	return out
}

// A generated fabric has exactly the nodes asked for, in the shape its
// topology says, and plans (valid, chains included).
func TestFabricShapes(t *testing.T) {
	for _, c := range []struct {
		f              Fabric
		kind           string
		routers, links int
	}{
		{Fabric{Topology: "line", Nodes: 10}, "line", 0, 9},
		{Fabric{Topology: "clos", Nodes: 12, Summaries: true}, "clos2", 4, 2 + 6*4},
		{Fabric{Topology: "clos2", Nodes: 40, Summaries: true}, "clos2", 4, 2 + 34*4},
		// 3-tier, 100 nodes: 8 super-spines, 5 pods of 4 spines (20), 70 leaves.
		{Fabric{Topology: "clos", Nodes: 100, Summaries: true}, "clos3", 28, 2 + 70*4 + 5*4*2},
		{Fabric{Topology: "clos3", Nodes: 1000, Summaries: true}, "clos3", 8 + 50*4, 2 + 790*4 + 50*4*2},
	} {
		if testing.Short() && c.f.Nodes > 250 {
			continue // 1,000 nodes: seconds of plan
		}
		d, p := buildFabric(t, c.f)
		if c.f.Kind() != c.kind {
			t.Errorf("%+v: kind %s, want %s", c.f, c.f.Kind(), c.kind)
		}
		if len(d.Nodes) != c.f.Nodes || len(p.Nodes) != c.f.Nodes {
			t.Errorf("%+v: %d nodes, want %d", c.f, len(d.Nodes), c.f.Nodes)
		}
		r := roles(d)
		if r["router"] != c.routers || r["host"] != 2 || r["ingress"] != 1 || r["egress"] != 1 {
			t.Errorf("%+v: roles %v, want %d routers, 2 hosts, one ingress and egress", c.f, r, c.routers)
		}
		if len(d.Links) != c.links {
			t.Errorf("%+v: %d links, want %d", c.f, len(d.Links), c.links)
		}
		if len(p.Chains) != FabricChains {
			t.Errorf("%+v: %d chains", c.f, len(p.Chains))
		}
		if c.kind != "line" {
			for _, ch := range p.Chains {
				if want := min(FabricChainLen, r["nfv"]) + 1; len(ch.Hops) != want { // the services, then the egress
					t.Errorf("%+v: chain %s has %d SIDs, want %d", c.f, ch.Name, len(ch.Hops), want)
				}
			}
		}
	}
	for _, bad := range []string{"clos:6", "clos3:20", "ring:10", "clos", "line:x"} {
		if _, err := ParseGenerate(bad); err == nil {
			t.Errorf("ParseGenerate(%q): no error", bad)
		}
	}
	if f, err := ParseGenerate("clos:250"); err != nil || f.Kind() != "clos3" || !f.Summaries {
		t.Errorf("ParseGenerate(clos:250) = %+v, %v", f, err)
	}
}

// adjacency of the domain's links.
func adjacency(d *config.Domain) map[string][]string {
	adj := map[string][]string{}
	for _, i := range d.Interfaces() {
		adj[i.Node] = append(adj[i.Node], i.PeerNode)
	}
	return adj
}

// shortestPaths counts the shortest paths from a to z (BFS), hosts never
// transit.
func shortestPaths(d *config.Domain, a, z string) (dist, count int) {
	adj := adjacency(d)
	depth := map[string]int{a: 0}
	n := map[string]int{a: 1}
	queue := []string{a}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur != a && d.Nodes[cur].Role == "host" {
			continue
		}
		for _, nb := range adj[cur] {
			if _, ok := depth[nb]; !ok {
				depth[nb] = depth[cur] + 1
				queue = append(queue, nb)
			}
			if depth[nb] == depth[cur]+1 {
				n[nb] += n[cur]
			}
		}
	}
	return depth[z], n[z]
}

// ECMP: between leaves of different pods there are as many equal-cost
// paths as spines (2-tier) or spines × super-spines per plane (3-tier).
func TestFabricECMP(t *testing.T) {
	for _, c := range []struct {
		f          Fabric
		dist, ecmp int
	}{
		{Fabric{Topology: "clos2", Nodes: 40}, 2, PodSpines},
		{Fabric{Topology: "clos3", Nodes: 250}, 4, PodSpines * PlaneSupers},
		{Fabric{Topology: "clos3", Nodes: 12, PodLeaves: 2, Spines: 2, Supers: 1}, 4, 2},
	} {
		y, _ := c.f.YAML()
		d, err := config.Parse([]byte(y), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		dist, n := shortestPaths(d, "ingress", "egress")
		if dist != c.dist || n != c.ecmp {
			t.Errorf("%+v: ingress→egress %d hops over %d equal-cost paths, want %d over %d", c.f, dist, n, c.dist, c.ecmp)
		}
	}
}

// forwarder follows the plan's main-table routes hop by hop (longest
// prefix match, next hop = the node owning the gateway address).
type forwarder struct {
	p     *plan.Plan
	owner map[netip.Addr]string
	local map[string][]netip.Prefix
}

func newForwarder(d *config.Domain, p *plan.Plan) *forwarder {
	owner := map[netip.Addr]string{}
	local := map[string][]netip.Prefix{}
	for _, l := range p.Links {
		for _, a := range l.Addrs {
			owner[a.Addr()] = l.Node
			local[l.Node] = append(local[l.Node], a.Masked())
		}
	}
	for name, n := range d.Nodes {
		if n.Locator != "" {
			local[name] = append(local[name], netip.MustParsePrefix(n.Locator))
		}
	}
	return &forwarder{p: p, owner: owner, local: local}
}

// forward returns the nodes crossed from src to dst, or why it stopped.
func (fw *forwarder) forward(src string, dst netip.Addr) ([]string, error) {
	p, owner, local := fw.p, fw.owner, fw.local
	path := []string{src}
	cur := src
	for hop := 0; hop < 32; hop++ {
		for _, pf := range local[cur] {
			if pf.Contains(dst) {
				return path, nil
			}
		}
		best := -1
		var via netip.Addr
		for _, r := range p.Nodes[cur].Routes {
			if r.Table != 0 || r.Seg6 != nil || r.Seg6Local != nil || !r.Dst.Contains(dst) || r.Dst.Bits() <= best {
				continue
			}
			best, via = r.Dst.Bits(), r.Via
		}
		if best < 0 {
			return path, fmt.Errorf("no route at %s", cur)
		}
		next, ok := owner[via]
		if !ok {
			return path, fmt.Errorf("next hop %s at %s is nobody's", via, cur)
		}
		cur = next
		path = append(path, cur)
	}
	return path, fmt.Errorf("loop: %s", strings.Join(path, " → "))
}

// Summarised static routes: every SR node still reaches every locator and
// every link address (followed hop by hop through the plan's routes), and
// a leaf's routes grow with the pods, not the nodes.
func TestFabricSummaries(t *testing.T) {
	leafRoutes := map[int]int{} // pods → most routes of a leaf
	for _, f := range []Fabric{
		{Topology: "clos2", Nodes: 60, Summaries: true},
		{Topology: "clos3", Nodes: 12, Summaries: true, PodLeaves: 2, Spines: 2, Supers: 1},
		{Topology: "clos3", Nodes: 130, Summaries: true},
		{Topology: "clos3", Nodes: 250, Summaries: true},
	} {
		d, p := buildFabric(t, f)
		if len(p.Summaries) == 0 {
			t.Fatalf("%+v: no summaries in the plan", f)
		}
		var dsts []netip.Addr
		for _, n := range d.Nodes {
			if n.Locator != "" {
				dsts = append(dsts, netip.MustParsePrefix(n.Locator).Addr().Next())
			}
		}
		for _, l := range p.Links {
			for _, a := range l.Addrs {
				dsts = append(dsts, a.Addr())
			}
		}
		failures, i := 0, 0
		fw := newForwarder(d, p)
		for _, src := range d.NodeNames() {
			n := d.Nodes[src]
			if n.Role == "host" {
				continue
			}
			// Every leaf, spine and super-spine of the small fabrics;
			// every third of the large ones (each kind of node is
			// among them).
			if i++; len(d.Nodes) > 100 && i%3 != 0 && n.Role == "nfv" {
				continue
			}
			for _, dst := range dsts {
				if path, err := fw.forward(src, dst); err != nil {
					if failures++; failures < 5 {
						t.Errorf("%+v: %s → %s: %v (%s)", f, src, dst, err, strings.Join(path, " → "))
					}
				}
			}
		}
		if f.Kind() == "clos3" && f.PodLeaves == 0 {
			pods := 0
			for _, s := range p.Summaries {
				if strings.HasPrefix(s.Prefix.String(), "fc") {
					pods++
				}
			}
			for name, n := range d.Nodes {
				if n.Role != "host" && n.Role != "router" {
					leafRoutes[pods] = max(leafRoutes[pods], len(p.Nodes[name].Routes))
				}
				_ = name
			}
		}
	}
	// A leaf's routes: its own pod's prefixes (a constant), one route per
	// other pod and per plane, its SIDs and chain policies: going from 7
	// to 13 pods adds about one route per pod, not one per node added.
	if len(leafRoutes) != 2 {
		t.Fatalf("leaf routes per pod count: %v", leafRoutes)
	}
	var ps []int
	for k := range leafRoutes {
		ps = append(ps, k)
	}
	lo, hi := min(ps[0], ps[1]), max(ps[0], ps[1])
	if grow := leafRoutes[hi] - leafRoutes[lo]; grow > (hi-lo)+2 || grow < 0 {
		t.Errorf("a leaf's routes grew by %d from %d to %d pods (%v): want about one per pod", grow, lo, hi, leafRoutes)
	}
}

// Without summaries the same fabric routes every prefix on every node:
// the count the summaries replace.
func TestFabricNoSummaries(t *testing.T) {
	_, with := buildFabric(t, Fabric{Topology: "clos3", Nodes: 250, Summaries: true})
	_, without := buildFabric(t, Fabric{Topology: "clos3", Nodes: 250})
	count := func(p *plan.Plan) (total int) {
		for _, n := range p.Nodes {
			total += len(n.Routes)
		}
		return total
	}
	if a, b := count(with), count(without); a*5 > b {
		t.Errorf("250 nodes: %d routes summarised, %d without: want a fifth or less", a, b)
	}
}
