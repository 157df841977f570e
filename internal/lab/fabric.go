package lab

import (
	"cmp"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Fabric describes a generated domain (segchain lab up --generate,
// segchain perf control-plane --topology): a line, or a 2- or 3-tier Clos
// fabric (RFC 7938) whose leaves host the services and whose spines and
// super-spines are routers, with equal-cost paths between every pair of
// leaves (one per spine, or per plane).
type Fabric struct {
	// Topology: line, clos2, clos3, or clos (clos3 above 64 nodes, else
	// clos2).
	Topology string
	// Nodes is the exact number of nodes (hosts and routers included).
	Nodes int
	// Routing is routing.mode ("": static).
	Routing string
	// Summaries summarises each pod's block (and each super-spine plane's)
	// of a Clos fabric in routing.summaries: static routes to the blocks,
	// or under bgp the spines' aggregates.
	Summaries bool
	// Changed drops the first service of chain c0: a one-chain change.
	Changed bool
	// Keepalive and Hold, if set, are routing.bgp's timers (seconds)
	// under bgp (0: the defaults, 1 s and 3 s): large fabrics run longer
	// timers with BFD to detect failures (docs/scale.md, session 18).
	Keepalive, Hold int
	// PodLeaves, Spines and Supers override PodLeaves, PodSpines and
	// PlaneSupers (0: those), for small test fabrics.
	PodLeaves, Spines, Supers int
}

func (f Fabric) podLeaves() int { return cmp.Or(f.PodLeaves, PodLeaves) }
func (f Fabric) spines() int    { return cmp.Or(f.Spines, PodSpines) }
func (f Fabric) supers() int    { return cmp.Or(f.Supers, PlaneSupers) }

// Generated fabrics' shape.
const (
	FabricChains   = 4  // chains per domain
	FabricChainLen = 8  // services per chain (fewer when fewer leaves)
	PodLeaves      = 16 // leaves per pod (per locator block)
	PodSpines      = 4  // spines per pod (3-tier) or in all (2-tier): the ECMP width
	PlaneSupers    = 2  // super-spines per plane (3-tier)
	clos3Above     = 64 // clos: 3 tiers above this many nodes
)

// AppliedDir holds the records of applies (internal/session, apply
// --changed-only); lab down removes its lab's.
const AppliedDir = "/run/segchain/applied"

// GeneratedPath is where lab up --generate keeps the domain file it
// generated for lab name (apply --lab finds it there; lab down removes it).
func GeneratedPath(name string) string { return filepath.Join(StateDir, name+".generated.yaml") }

// ParseGenerate reads a --generate spec: TOPOLOGY:N (line:100, clos:250,
// clos2:40, clos3:1000).
func ParseGenerate(spec string) (Fabric, error) {
	topo, n, ok := strings.Cut(spec, ":")
	nodes, err := strconv.Atoi(n)
	if !ok || err != nil {
		return Fabric{}, fmt.Errorf("--generate %q: want TOPOLOGY:NODES (line:100, clos:250, clos2:40, clos3:1000)", spec)
	}
	f := Fabric{Topology: topo, Nodes: nodes, Summaries: true}
	_, err = f.YAML()
	return f, err
}

// Kind is the topology after resolving clos to clos2 or clos3.
func (f Fabric) Kind() string {
	if f.Topology == "clos" {
		if f.Nodes > clos3Above {
			return "clos3"
		}
		return "clos2"
	}
	return f.Topology
}

// YAML is the domain file of the fabric.
func (f Fabric) YAML() (string, error) {
	switch f.Kind() {
	case "line":
		if f.Nodes < 5 {
			return "", fmt.Errorf("line of %d nodes: want at least 5", f.Nodes)
		}
		return lineYAML(f.Nodes, f.Changed, f.Routing) + f.bgpTimers(), nil
	case "clos2":
		if f.Nodes < 2+2+3 {
			return "", fmt.Errorf("2-tier Clos of %d nodes: want at least 7 (2 hosts, 2 spines, 3 leaves)", f.Nodes)
		}
		return f.clos(2) + f.bgpTimers(), nil
	case "clos3":
		if least := 2 + f.spines()*f.supers() + 2*(f.spines()+2); f.Nodes < least {
			return "", fmt.Errorf("3-tier Clos of %d nodes: want at least %d (2 hosts, %d super-spines, two pods of %d spines and 2 leaves)",
				f.Nodes, least, f.spines()*f.supers(), f.spines())
		}
		return f.clos(3) + f.bgpTimers(), nil
	}
	return "", fmt.Errorf("topology %q: want line, clos, clos2 or clos3", f.Topology)
}

// lineYAML is a line of n nodes: hosts s and d at the ends, an ingress,
// n-4 NFV nodes with one End service each, an egress; four chains, each
// visiting every fourth NFV node.
func lineYAML(n int, changed bool, routing string) string {
	var b strings.Builder
	nfv := n - 4
	fmt.Fprintf(&b, "name: cp%d\nnodes:\n", n)
	b.WriteString("  s: {role: host, id: 0xfffe}\n  d: {role: host, id: 0xfffd}\n")
	b.WriteString("  ingress: {role: ingress, id: 1, locator: \"fc00:1::/64\"}\n")
	names := []string{"s", "ingress"}
	for i := 1; i <= nfv; i++ {
		id := i + 1
		fmt.Fprintf(&b, "  n%d: {role: nfv, id: %d, locator: \"fc00:%x::/64\"}\n", i, id, id)
		names = append(names, fmt.Sprintf("n%d", i))
	}
	eg := nfv + 2
	fmt.Fprintf(&b, "  egress: {role: egress, id: %d, locator: \"fc00:%x::/64\"}\n", eg, eg)
	names = append(names, "egress", "d")
	b.WriteString("links:\n")
	for i := 0; i+1 < len(names); i++ {
		a, z := names[i], names[i+1]
		pfx := fmt.Sprintf("fc01:%x::/64", i+1)
		if z == "d" {
			pfx = "fc02:d::/64"
		}
		fmt.Fprintf(&b, "  - {endpoints: [\"%s:e-%s\", \"%s:e-%s\"], ipv6: %q}\n", a, z, z, a, pfx)
	}
	b.WriteString("services:\n")
	for i := 1; i <= nfv; i++ {
		fmt.Fprintf(&b, "  s%d: {node: n%d, behavior: End}\n", i, i)
	}
	b.WriteString("chains:\n")
	for c := 0; c < FabricChains; c++ {
		var svcs []string
		for i := 1; i <= nfv; i++ {
			if i%FabricChains == c {
				svcs = append(svcs, fmt.Sprintf("s%d", i))
			}
		}
		if changed && c == 0 && len(svcs) > 1 {
			svcs = svcs[1:]
		}
		fmt.Fprintf(&b, "  c%d:\n    ingress: ingress\n    mode: encap\n    match: {dst: \"fc02:d::/64\", proto: udp, dport: \"%d\"}\n", c, 10000+c)
		fmt.Fprintf(&b, "    services: [%s]\n    egress: {node: egress, behavior: End.DX6, nh6: \"fc02:d::fffd\"}\n", strings.Join(svcs, ", "))
	}
	if routing != "" {
		fmt.Fprintf(&b, "routing:\n  mode: %s\n", routing)
	}
	return b.String()
}

// bgpTimers is routing.bgp with the fabric's timers, under bgp with
// timers set (the routing section is the domain file's last).
func (f Fabric) bgpTimers() string {
	if f.Routing != "bgp" || (f.Keepalive == 0 && f.Hold == 0) {
		return ""
	}
	var b strings.Builder
	b.WriteString("  bgp:\n")
	if f.Keepalive > 0 {
		fmt.Fprintf(&b, "    keepalive: %d\n", f.Keepalive)
	}
	if f.Hold > 0 {
		fmt.Fprintf(&b, "    hold: %d\n", f.Hold)
	}
	return b.String()
}

// clos is a 2- or 3-tier Clos fabric of exactly f.Nodes nodes.
//
// Leaves (l<i>; the first is the ingress, the last the egress, each with
// a host: hs and hd) are grouped in pods of up to PodLeaves. 2-tier:
// PodSpines spines (sp<k>, routers), each linked to every leaf (the pods
// are only locator blocks). 3-tier: each pod has its own PodSpines spines
// (sp<p>x<k>), linked to its leaves; spine k of every pod is linked to
// the PlaneSupers super-spines of plane k (ss<k>x<j>).
//
// Addressing (pod p, leaf j of the pod, spine k, super-spine j'):
// everything of pod p lies in fcPP::/16 (locator fcPP:0:J::/64, leaf–spine
// link fcPP:1:J:K::/64), every spine–super-spine link of plane k in
// fdKK::/16 (fdKK:P:J'::/64): the blocks routing.summaries names. The
// hosts' links are 2001:db8:1::/64 and 2001:db8:2::/64.
func (f Fabric) clos(tiers int) string {
	hosts, supers := 2, 0
	if tiers == 3 {
		supers = f.spines() * f.supers()
	}
	rest := f.Nodes - hosts - supers
	var pods, leaves int
	if tiers == 2 {
		spines := f.spines()
		if f.Nodes < 12 && f.Spines == 0 {
			spines = 2
		}
		leaves = rest - spines
		pods = (leaves + f.podLeaves() - 1) / f.podLeaves()
		return f.closYAML(tiers, pods, leaves, spines)
	}
	// 3-tier: each pod has its spines and up to podLeaves leaves.
	per := f.podLeaves() + f.spines()
	pods = max((rest+per-1)/per, 2)
	leaves = rest - pods*f.spines()
	return f.closYAML(tiers, pods, leaves, f.spines())
}

func (f Fabric) closYAML(tiers, pods, leaves, spines int) string {
	// podOf spreads the leaves over the pods evenly, in order.
	podOf := func(i int) (pod, j int) {
		per, extra := leaves/pods, leaves%pods
		for p := 0; p < pods; p++ {
			n := per
			if p < extra {
				n++
			}
			if i < n {
				return p, i
			}
			i -= n
		}
		return pods - 1, i
	}
	leafName := func(i int) string {
		switch i {
		case 0:
			return "ingress"
		case leaves - 1:
			return "egress"
		}
		return "l" + strconv.Itoa(i)
	}
	spineName := func(p, k int) string {
		if tiers == 2 {
			return fmt.Sprintf("sp%d", k)
		}
		return fmt.Sprintf("sp%dx%d", p, k)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s-%d\nnodes:\n", f.Kind(), f.Nodes)
	b.WriteString("  hs: {role: host, id: 0xfffe}\n  hd: {role: host, id: 0xfffd}\n")
	id := 1
	for i := 0; i < leaves; i++ {
		p, j := podOf(i)
		role := "nfv"
		switch i {
		case 0:
			role = "ingress"
		case leaves - 1:
			role = "egress"
		}
		fmt.Fprintf(&b, "  %s: {role: %s, id: %d, locator: \"fc%02x:0:%x::/64\"}\n", leafName(i), role, id, p, j+1)
		id++
	}
	spinePods := pods
	if tiers == 2 {
		spinePods = 1
	}
	for p := 0; p < spinePods; p++ {
		for k := 0; k < spines; k++ {
			fmt.Fprintf(&b, "  %s: {role: router, id: %d}\n", spineName(p, k), id)
			id++
		}
	}
	if tiers == 3 {
		for k := 0; k < spines; k++ {
			for j := 0; j < f.supers(); j++ {
				fmt.Fprintf(&b, "  ss%dx%d: {role: router, id: %d}\n", k, j, id)
				id++
			}
		}
	}
	b.WriteString("links:\n")
	link := func(a, z, pfx string) {
		fmt.Fprintf(&b, "  - {endpoints: [\"%s:e-%s\", \"%s:e-%s\"], ipv6: %q}\n", a, z, z, a, pfx)
	}
	// The hosts' links lie outside every summary block: a block is the
	// domain's own space, which the boundary filter closes to outsiders.
	link("hs", "ingress", "2001:db8:1::/64")
	link("egress", "hd", "2001:db8:2::/64")
	for i := 0; i < leaves; i++ {
		p, j := podOf(i)
		for k := 0; k < spines; k++ {
			sp := spineName(p, k)
			link(leafName(i), sp, fmt.Sprintf("fc%02x:1:%x:%x::/64", p, j+1, k+1))
		}
	}
	if tiers == 3 {
		for p := 0; p < pods; p++ {
			for k := 0; k < spines; k++ {
				for j := 0; j < f.supers(); j++ {
					link(spineName(p, k), fmt.Sprintf("ss%dx%d", k, j), fmt.Sprintf("fd%02x:%x:%x::/64", k, p+1, j+1))
				}
			}
		}
	}
	// One End service per NFV leaf; chains spread over the leaves.
	b.WriteString("services:\n")
	var svcs []string
	for i := 1; i < leaves-1; i++ {
		name := "f" + strconv.Itoa(i)
		fmt.Fprintf(&b, "  %s: {node: %s, behavior: End}\n", name, leafName(i))
		svcs = append(svcs, name)
	}
	b.WriteString("chains:\n")
	hd := "2001:db8:2::"
	for c := 0; c < FabricChains; c++ {
		list := chainServices(svcs, c)
		if f.Changed && c == 0 && len(list) > 1 {
			list = list[1:]
		}
		fmt.Fprintf(&b, "  c%d:\n    ingress: ingress\n    mode: encap\n    match: {dst: \"%s/64\", proto: udp, dport: \"%d\"}\n", c, hd, 10000+c)
		fmt.Fprintf(&b, "    services: [%s]\n    egress: {node: egress, behavior: End.DX6, nh6: \"%sfffd\"}\n", strings.Join(list, ", "), hd)
	}
	mode := cmp.Or(f.Routing, "static")
	if f.Summaries {
		// Under bgp the spines aggregate the blocks (docs/routing.md).
		fmt.Fprintf(&b, "routing:\n  mode: %s\n  summaries:\n", mode)
		for p := 0; p < pods; p++ {
			fmt.Fprintf(&b, "    - \"fc%02x::/16\"\n", p)
		}
		if tiers == 3 {
			for k := 0; k < spines; k++ {
				fmt.Fprintf(&b, "    - \"fd%02x::/16\"\n", k)
			}
		}
	} else if mode != "static" {
		fmt.Fprintf(&b, "routing:\n  mode: %s\n", mode)
	}
	return b.String()
}

// chainServices is chain c's services: FabricChainLen of them spread
// evenly over all (offset by c), in order, without repeats.
func chainServices(all []string, c int) []string {
	m := len(all)
	if m == 0 {
		return nil
	}
	n := min(FabricChainLen, m)
	seen := map[int]bool{}
	var out []string
	for i := 0; i < n; i++ {
		idx := (c + i*m/n) % m
		if seen[idx] {
			continue
		}
		seen[idx] = true
		out = append(out, all[idx])
	}
	return out
}
