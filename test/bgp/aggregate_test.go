package bgp

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/testutil"
)

// aggFabric is a 3-tier Clos of three pods (two leaves, two spines each)
// and one super-spine per plane, routing: bgp with the pods' and planes'
// blocks in routing.summaries: the spines (FRR) aggregate them.
var aggFabric = lab.Fabric{Topology: "clos3", Nodes: 16, PodLeaves: 2, Spines: 2, Supers: 1, Routing: "bgp", Summaries: true}

// Route aggregation under routing: bgp, with real FRR on the spines and
// super-spines and real agents (GoBGP) on the leaves:
//   - every leaf reaches every leaf of another pod through one route, the
//     pod's block, with an equal-cost next hop over each of its spines, and
//     has no route more specific than a block it is not a member of (the
//     prefixes per leaf drop from every locator and link of the fabric to
//     its own pod's plus one per block);
//   - it reaches the leaves of its own pod through their locators, over
//     both spines;
//   - a stream through chain c0, whose services lie in several pods,
//     arrives;
//   - a spine whose link to a leaf loses carrier still reaches that leaf,
//     through another leaf of the pod (members keep their specifics among
//     themselves): the aggregate, which it keeps announcing, does not
//     black-hole the leaf.
//
// Fails without aggregation (every leaf then holds the far pods'
// locators and no block route).
func TestPrivilegedBGPAggregates(t *testing.T) {
	y, err := aggFabric.YAML()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "clos.yaml")
	if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := config.Parse([]byte(y), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	blocks := d.SummaryPrefixes()
	// Each leaf: its locator and its devices towards its spines.
	loc := map[string]netip.Prefix{}
	spineDevs := map[string][]string{}
	for n, nd := range d.Nodes {
		if nd.Locator != "" {
			loc[n] = netip.MustParsePrefix(nd.Locator)
		}
	}
	for _, l := range d.Links {
		a, ad, _ := strings.Cut(l.Endpoints[0], ":")
		z, _, _ := strings.Cut(l.Endpoints[1], ":")
		if _, leaf := loc[a]; leaf && d.Nodes[z].Role == config.RoleRouter {
			spineDevs[a] = append(spineDevs[a], ad)
		}
	}
	blockOf := func(p netip.Prefix) netip.Prefix {
		for _, b := range blocks {
			if b.Contains(p.Addr()) {
				return b
			}
		}
		t.Fatalf("%s lies in no block", p)
		return netip.Prefix{}
	}
	// want: leaf → destination → next-hop devices.
	want := map[string]map[string][]string{}
	for a := range loc {
		sort.Strings(spineDevs[a])
		want[a] = map[string][]string{}
		for b, lb := range loc {
			switch {
			case a == b:
			case blockOf(lb) == blockOf(loc[a]):
				want[a][lb.String()] = spineDevs[a]
			default:
				want[a][blockOf(lb).String()] = spineDevs[a]
			}
		}
	}

	e := newEnvPrefix(t, file, true, "h14a-")
	if out := e.Must("apply", "--lab", e.Name); !strings.Contains(out, "applied") {
		t.Fatalf("apply: %s", out)
	}
	deadline := time.Now().Add(90 * time.Second)
	for a, w := range want {
		for {
			rs := e.bgpRoutes(a)
			missing := ""
			for dst, devs := range w {
				if strings.Join(rs[dst], ",") != strings.Join(devs, ",") {
					missing = dst + " over " + strings.Join(rs[dst], ",") + ", want " + strings.Join(devs, ",")
					break
				}
			}
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: route to %s\nits BGP routes: %v", a, missing, rs)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// Nothing more specific than a block the leaf is not a member of.
	counts := map[string]int{}
	for a := range loc {
		rs := e.bgpRoutes(a)
		counts[a] = len(rs)
		for dst := range rs {
			if !strings.Contains(dst, "/") {
				dst += "/128" // iproute2 prints a host route bare
			}
			p := netip.MustParsePrefix(dst)
			for _, b := range blocks {
				if b.Contains(p.Addr()) && p.Bits() > b.Bits() && b != blockOf(loc[a]) {
					t.Errorf("%s has a route to %s, inside block %s it is not a member of (not aggregated)", a, p, b)
				}
			}
		}
	}
	t.Logf("BGP routes per leaf: %v", counts)

	// Chain c0 (ingress → services on leaves of several pods → egress).
	pods := map[netip.Prefix]bool{}
	for _, s := range d.Chains["c0"].Services {
		pods[blockOf(loc[d.Services[s].Node])] = true
	}
	if len(pods) < 2 {
		t.Fatalf("chain c0 stays in one pod (%v): it must cross pods", pods)
	}
	res := testutil.Stream(t, seqstream, e.NS("hs"), e.NS("hd"), "2001:db8:2::fffd", 10000, 500, 500, nil)
	t.Logf("stream through c0 (%d pods): %+v", len(pods), res)
	if res.Unique == 0 {
		t.Fatalf("nothing of the stream through chain c0 reached hd: %+v", res)
	}

	// Spine sp1x0 loses its link to l2 (pod 1): it keeps announcing
	// fc01::/16 (l3's prefixes are in it), and reaches l2 through l3,
	// which learns l2's specifics from sp1x1.
	l2 := loc["l2"]
	testutil.Exec(t, e.NS("sp1x0"), "ip", "link", "set", "e-l2", "down")
	var via []string
	for end := time.Now().Add(60 * time.Second); ; {
		via = kernelDevs(t, e.NS("sp1x0"), l2.String())
		if len(via) > 0 && !contains(via, "e-l2") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("sp1x0 with e-l2 down: route to l2's locator %s over %v", l2, via)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A locator is not an address (LOC::1 is announced, not assigned):
	// l2's address on its link to sp1x1 stands for it, from super-spine
	// ss0x0 of plane 0, which reaches pod 1 through sp1x0 alone.
	l2addr := netip.MustParseAddr("fc01:1:1:2::3")
	if out := testutil.Exec(t, e.NS("l2"), "ip", "-6", "addr", "show", "dev", "e-sp1x1"); !strings.Contains(out, l2addr.String()+"/64") || blockOf(netip.PrefixFrom(l2addr, 128)) != blockOf(l2) {
		t.Fatalf("%s is not l2's address in its pod's block:\n%s", l2addr, out)
	}
	if err := testutil.Ping(e.NS("ss0x0"), l2addr, 10*time.Second); err != nil {
		t.Errorf("ss0x0 → l2 (%s) through sp1x0, whose link to l2 is down (sp1x0 routes l2 via %v): %v", l2addr, via, err)
		for _, n := range []string{"sp1x0", "l3", "sp1x1", "l2"} {
			out, _ := testutil.ExecErr(e.NS(n), "ip", "-6", "route")
			t.Logf("%s:\n%s", n, out)
		}
	}
	if out := e.vtyshRoutes("ss0x0"); !contains(out, "fc01::/16") || contains(out, l2.String()) {
		t.Errorf("ss0x0's BGP table %v: want pod 1's aggregate, none of its specifics", out)
	}
	t.Logf("sp1x0 reaches l2 through %v", via)
}

// kernelDevs is the devices of ns's route to dst (iproute2).
func kernelDevs(t *testing.T, ns, dst string) []string {
	t.Helper()
	out, err := testutil.ExecErr(ns, "ip", "-6", "-j", "route", "show", dst)
	if err != nil {
		t.Fatalf("ip route show %s: %v", dst, err)
	}
	var rs []struct {
		hop
		Nexthops []hop `json:"nexthops"`
	}
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("ip -j route: %v\n%s", err, out)
	}
	var devs []string
	for _, r := range rs {
		if r.Dev != "" {
			devs = append(devs, r.Dev)
		}
		for _, h := range r.Nexthops {
			devs = append(devs, h.Dev)
		}
	}
	sort.Strings(devs)
	return devs
}
