package plan

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/csid"
	"github.com/segchain/segchain/internal/nodestate"
)

// Plan is the desired state of a whole domain.
type Plan struct {
	Domain string                     `json:"domain"`
	Nodes  map[string]*nodestate.Node `json:"nodes"`
	Chains []Chain                    `json:"chains"`
	SIDs   []SIDInfo                  `json:"sids"`
	// Warnings are what the domain leaves unprotected (boundary off,
	// SIDs of signed chains that do not verify the HMAC).
	Warnings []string `json:"warnings,omitempty"`
	// Notes explain choices that are not problems (in an f3216 domain,
	// the hops that keep a full SID and why).
	Notes []string `json:"notes,omitempty"`
	// FRR is the BGP intent of the router nodes under routing: bgp, which
	// run FRR (segchain lab up starts it with the configuration
	// internal/frr renders from it); the other SR nodes' intent is their
	// Node.BGP, run by their agents.
	FRR map[string]*nodestate.BGP `json:"frr,omitempty"`
	// Links are both ends of every link, per node and interface: status
	// maps a route's next hop to the node it leads to (internal/chainpath).
	Links []Link `json:"links,omitempty"`
	// Summaries are the locator blocks static routing summarised
	// (routing.summaries; summaries.go), with what each stands for.
	Summaries []Summary `json:"summaries,omitempty"`
}

// Link is one end of a point-to-point link.
type Link struct {
	Node  string `json:"node"`
	Iface string `json:"iface"`
	// Addrs are the end's addresses (fc00:12::2/64), IPv6 first.
	Addrs     []netip.Prefix `json:"addrs,omitempty"`
	Peer      string         `json:"peer"`
	PeerIface string         `json:"peer_iface"`
}

// Chain is one direction of a configured chain as it is programmed.
type Chain struct {
	Name    string `json:"name"` // "web", or "web/reverse" for the reverse of a bidirectional chain
	Ingress string `json:"ingress"`
	Mode    string `json:"mode"`
	Match   string `json:"match"`
	Table   int    `json:"table"`
	Hops    []Hop  `json:"hops"`
	// Segments is the SID list as pushed when it differs from the hops'
	// SIDs (f3216: the containers, path order) and Encap the kernel mode.
	Segments []netip.Addr `json:"segments,omitempty"`
	Encap    string       `json:"encap,omitempty"`
	// USIDBlock is the uSID block of a compressed chain (its length the
	// LBL; uSIDs are 16 bits): how status prints a hop's uSID.
	USIDBlock netip.Prefix `json:"usid_block,omitzero"`
	// Nodes are the nodes the chain's packets cross (headend, transit,
	// segments, the SFs behind its proxies), sorted.
	Nodes []string `json:"nodes,omitempty"`
}

// Hop is one segment of a chain's SID list.
type Hop struct {
	SID      netip.Addr `json:"sid"`
	Node     string     `json:"node"`
	Service  string     `json:"service"`
	Behavior string     `json:"behavior"`
}

// SIDInfo explains one local SID: who owns it and how it is structured.
type SIDInfo struct {
	SID          netip.Prefix `json:"sid"`
	Node         string       `json:"node"`
	Service      string       `json:"service"`
	Behavior     string       `json:"behavior"`
	LocatorBits  int          `json:"locator_bits"`
	FunctionBits int          `json:"function_bits"`
	Args         int          `json:"args_bits"`
}

// Table and rule-priority ranges owned by segchain. Chain tables are derived
// from a hash of the chain name so that adding a chain never renumbers the
// others (a re-apply of an unchanged chain changes nothing).
const (
	chainTableBase  = 1000
	chainTableRange = config.MaxChainDirections
	rulePrefBase    = 1000 // below the main table's 32766
)

// Build computes the plan of a validated domain.
func Build(d *config.Domain) (*Plan, error) {
	b := &builder{d: d, p: &Plan{Domain: d.Name, Nodes: map[string]*nodestate.Node{}}}
	for _, n := range d.NodeNames() {
		b.p.Nodes[n] = &nodestate.Node{Name: n}
	}
	var err error
	if b.sids, err = d.SIDs(); err != nil {
		return nil, fmt.Errorf("allocate SIDs: %w", err)
	}
	if err := b.usids(); err != nil {
		return nil, err
	}
	b.graph()
	b.hmacCover()
	b.sysctls()
	if err := b.hmac(); err != nil {
		return nil, err
	}
	if d.Routing.Mode == config.RoutingBGP {
		b.bgp()
		if err := b.bgpSummaries(); err != nil {
			return nil, err
		}
	} else if err := b.staticRoutes(); err != nil {
		return nil, err
	}
	if err := b.services(); err != nil {
		return nil, err
	}
	b.usidNodes()
	if err := b.chains(); err != nil {
		return nil, err
	}
	b.poolInstanceSegs()
	b.pools()
	if err := b.kindServices(); err != nil {
		return nil, err
	}
	b.bindingLoops()
	b.boundary()
	var errs config.ErrorList
	for _, name := range d.NodeNames() {
		if bd := b.p.Nodes[name].Boundary; bd != nil {
			if err := bd.Fits(); err != nil {
				errs = append(errs, &config.FieldError{Path: "security.boundary", Msg: fmt.Sprintf("node %s: %v", name, err)})
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for _, n := range b.p.Nodes {
		n.Sort()
	}
	sort.Slice(b.p.SIDs, func(i, j int) bool { return b.p.SIDs[i].SID.Addr().Less(b.p.SIDs[j].SID.Addr()) })
	sort.Slice(b.p.Chains, func(i, j int) bool { return b.p.Chains[i].Name < b.p.Chains[j].Name })
	return b.p, nil
}

type edge struct {
	iface    config.Interface
	peerAddr []netip.Prefix
}

type builder struct {
	d    *config.Domain
	p    *Plan
	sids map[string]netip.Addr
	adj  map[string][]edge
	ifs  []config.Interface
	// The breadth-first search from every node, by node index (idx):
	// first[src][dst] is the index in adj[src] of the first hop's edge,
	// dist[src][dst] the hops; -1 when dst is not reached. Slices, not
	// maps of maps: at 1,000 nodes these are 10⁶ entries each, which as
	// maps (of edges by value) were most of plan's 867 MiB and time.
	idx   map[string]int
	first [][]int32
	dist  [][]int32
	// afterSegs is, per service of a service kind, the rest of its chain's SID
	// list after it (End.AS re-encapsulates with it).
	afterSegs map[string][]netip.Addr
	// requireHMAC are the nodes that require HMAC (see hmacCover).
	requireHMAC map[string]bool
	// looped records the service-loop routes emitted (node + SID prefix).
	looped map[string]bool
	// csid is the uSID format of an f3216 domain (usid.go).
	csid csid.Format
	// localRoutes records the local-delivery routes emitted (node + key).
	localRoutes map[string]bool
}

func (b *builder) role(n string) string { return b.d.Nodes[n].Role }

// isSR reports whether n is inside the SR domain. Hosts and SR-unaware
// service functions (role sf) are leaves with default routes.
func (b *builder) isSR(n string) bool {
	return b.role(n) != config.RoleHost && b.role(n) != config.RoleSF
}

// forwards reports whether n forwards packets: SR nodes and SFs.
func (b *builder) forwards(n string) bool { return b.isSR(n) || b.role(n) == config.RoleSF }

// graph builds adjacency and BFS first hops from every node.
func (b *builder) graph() {
	b.ifs = b.d.Interfaces()
	for _, i := range b.ifs {
		b.p.Links = append(b.p.Links, Link{Node: i.Node, Iface: i.Name, Addrs: i.Addrs, Peer: i.PeerNode, PeerIface: i.PeerName})
	}
	byEnd := map[string]config.Interface{}
	for _, i := range b.ifs {
		byEnd[i.Node+":"+i.Name] = i
	}
	b.adj = map[string][]edge{}
	for _, i := range b.ifs {
		peer := byEnd[i.PeerNode+":"+i.PeerName]
		b.adj[i.Node] = append(b.adj[i.Node], edge{iface: i, peerAddr: peer.Addrs})
	}
	names := b.d.NodeNames()
	b.idx = make(map[string]int, len(names))
	for i, n := range names {
		b.idx[n] = i
	}
	// peer[i][k] is the node index of adj[names[i]][k]'s peer (-1: none).
	peer := make([][]int, len(names))
	sr := make([]bool, len(names))
	for i, n := range names {
		sr[i] = b.isSR(n)
		for _, e := range b.adj[n] {
			j, ok := b.idx[e.iface.PeerNode]
			if !ok {
				j = -1
			}
			peer[i] = append(peer[i], j)
		}
	}
	b.first = make([][]int32, len(names))
	b.dist = make([][]int32, len(names))
	queue := make([]int, 0, len(names))
	for src := range names {
		first := make([]int32, len(names))
		dist := make([]int32, len(names))
		for k := range dist {
			first[k], dist[k] = -1, -1
		}
		dist[src] = 0
		queue = append(queue[:0], src)
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			// Hosts are leaves: never transit through them.
			if cur != src && !sr[cur] {
				continue
			}
			for k, nb := range peer[cur] {
				if nb < 0 || dist[nb] >= 0 {
					continue
				}
				dist[nb] = dist[cur] + 1
				if cur == src {
					first[nb] = int32(k)
				} else {
					first[nb] = first[cur]
				}
				queue = append(queue, nb)
			}
		}
		b.first[src] = first
		b.dist[src] = dist
	}
}

// firstHop is the edge of src's first hop towards dst.
func (b *builder) firstHop(src, dst string) (edge, bool) {
	i, ok := b.idx[src]
	j, ok2 := b.idx[dst]
	if !ok || !ok2 || b.first[i][j] < 0 {
		return edge{}, false
	}
	return b.adj[src][b.first[i][j]], true
}

// distance is the hops from src to dst.
func (b *builder) distance(src, dst string) (int, bool) {
	i, ok := b.idx[src]
	j, ok2 := b.idx[dst]
	if !ok || !ok2 || b.dist[i][j] < 0 {
		return 0, false
	}
	return int(b.dist[i][j]), true
}

func addrOfFamily(ps []netip.Prefix, v4 bool) (netip.Addr, bool) {
	for _, p := range ps {
		if p.Addr().Is4() == v4 {
			return p.Addr(), true
		}
	}
	return netip.Addr{}, false
}

func (b *builder) addRoute(node string, r nodestate.Route) {
	n := b.p.Nodes[node]
	n.Routes = append(n.Routes, r)
}

func (b *builder) sysctls() {
	ifsByNode := map[string][]string{}
	for _, i := range b.ifs {
		ifsByNode[i.Node] = append(ifsByNode[i.Node], i.Name)
	}
	requireHMAC := b.requireHMAC
	for _, name := range b.d.NodeNames() {
		n := b.p.Nodes[name]
		set := func(k, v string) { n.Sysctls = append(n.Sysctls, nodestate.Sysctl{Key: k, Value: v}) }
		// seg6_enabled is the minimum of "all" and the receiving interface;
		// hosts need it too to accept insert-mode packets with SL = 0. An
		// SR-unaware SF must not process an SRH (ipv6_srh_rcv drops it
		// when seg6_enabled is 0): its proxy hands it plain packets
		// (End.AS, End.AD) or forwards through it (End.AM: the SF routes
		// the packet, the stack does not read the SRH of what it
		// forwards); an SRH addressed to it could only send a packet on
		// into the domain behind the chain's back.
		seg6 := "1"
		if b.role(name) == config.RoleSF {
			seg6 = "0"
		}
		set("net.ipv6.conf.all.seg6_enabled", seg6)
		for _, ifc := range ifsByNode[name] {
			set("net.ipv6.conf."+ifc+".seg6_enabled", seg6)
		}
		if b.forwards(name) {
			set("net.ipv6.conf.all.forwarding", "1")
			set("net.ipv4.conf.all.forwarding", "1")
		}
		if requireHMAC[name] {
			// The kernel reads seg6_require_hmac from the receiving interface only.
			set("net.ipv6.conf.all.seg6_require_hmac", "1")
			for _, ifc := range ifsByNode[name] {
				set("net.ipv6.conf."+ifc+".seg6_require_hmac", "1")
			}
		}
		keys := make([]string, 0, len(b.d.Nodes[name].Sysctls))
		for k := range b.d.Nodes[name].Sysctls {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(k, b.d.Nodes[name].Sysctls[k])
		}
		if b.isSR(name) && b.d.Nodes[name].Locator != "" {
			n.TunSrc = b.d.NodeAddr(name).String()
		}
	}
}

// hmac installs every domain key on every SR node: any endpoint that
// processes a signed SRH validates it and drops it if the key is unknown.
func (b *builder) hmac() error {
	names := make([]string, 0, len(b.d.Security.HMAC))
	for k := range b.d.Security.HMAC {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		k := b.d.Security.HMAC[name]
		secret, err := b.d.Secret(name)
		if err != nil {
			return fmt.Errorf("security.hmac.%s: %w", name, err)
		}
		for _, n := range b.d.NodeNames() {
			if !b.isSR(n) {
				continue
			}
			b.p.Nodes[n].HMACKeys = append(b.p.Nodes[n].HMACKeys,
				nodestate.HMACKey{ID: uint32(k.ID), Alg: k.Algorithm, Secret: secret})
		}
	}
	return nil
}

// routedDest is a prefix routing must reach: a link's, whose owners are
// the nodes on the link, or a node's locator (or uSID block), owned by it.
type routedDest struct {
	prefix netip.Prefix
	owners []string
}

// routedDests lists every link prefix, then every locator and uSID /40,
// each once: what static routes reach and what BGP announces.
func (b *builder) routedDests() []routedDest {
	var dests []routedDest
	seen := map[netip.Prefix]int{}
	for _, i := range b.ifs {
		for _, a := range i.Addrs {
			p := a.Masked()
			if idx, ok := seen[p]; ok {
				dests[idx].owners = append(dests[idx].owners, i.Node)
				continue
			}
			seen[p] = len(dests)
			dests = append(dests, routedDest{prefix: p, owners: []string{i.Node}})
		}
	}
	usid := b.usidDests()
	for _, n := range b.d.NodeNames() {
		if loc := b.d.Nodes[n].Locator; loc != "" {
			dests = append(dests, routedDest{prefix: netip.MustParsePrefix(loc).Masked(), owners: []string{n}})
		}
		if p, ok := usid[n]; ok {
			dests = append(dests, routedDest{prefix: p, owners: []string{n}})
		}
	}
	return dests
}

// staticRoutes computes shortest-path routes to every link prefix and
// locator; hosts get default routes towards their first neighbour. With
// routing.summaries, a node outside a summary block gets one route to the
// block instead (summaries.go).
func (b *builder) staticRoutes() error {
	dests := b.routedDests()
	sum, err := b.newSummarizer(len(dests), func(i int) (netip.Prefix, []string) { return dests[i].prefix, dests[i].owners })
	if err != nil {
		return err
	}
	for _, src := range b.d.NodeNames() {
		if !b.isSR(src) {
			b.hostDefaults(src)
			continue
		}
		mine := sum.memberships(src)
		for i, ds := range dests {
			if sum.summarisedFor(mine, i) || contains(ds.owners, src) {
				continue
			}
			owner := b.nearest(src, ds.owners)
			if owner == "" {
				continue
			}
			e, _ := b.firstHop(src, owner)
			sum.check(src, i, e.iface.PeerNode, ds.owners)
			via, ok := addrOfFamily(e.peerAddr, ds.prefix.Addr().Is4())
			if !ok {
				continue // the first hop has no address of this family
			}
			b.addRoute(src, nodestate.Route{Dst: ds.prefix, Via: via, Dev: e.iface.Name, Owner: "routing"})
		}
		sum.routes(src, mine)
	}
	return sum.err()
}

func (b *builder) hostDefaults(host string) {
	edges := b.adj[host]
	if len(edges) == 0 {
		return
	}
	e := edges[0]
	if via, ok := addrOfFamily(e.peerAddr, false); ok {
		b.addRoute(host, nodestate.Route{Dst: netip.MustParsePrefix("::/0"), Via: via, Dev: e.iface.Name, Owner: "routing"})
	}
	if via, ok := addrOfFamily(e.peerAddr, true); ok {
		if _, mine := addrOfFamily(e.iface.Addrs, true); mine {
			b.addRoute(host, nodestate.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Via: via, Dev: e.iface.Name, Owner: "routing"})
		}
	}
}

func (b *builder) nearest(src string, owners []string) string {
	best, bestD := "", -1
	for _, o := range owners {
		d, ok := b.distance(src, o)
		if !ok {
			continue
		}
		if bestD < 0 || d < bestD || (d == bestD && o < best) {
			best, bestD = o, d
		}
	}
	return best
}

// nearestSorted is nearest of owners sorted by name, whose indices in the
// graph are idx (-1: not in it), src's looked up once (every node routes
// every block it is not a member of: a thousand nodes ask this tens of
// thousands of times).
func (b *builder) nearestSorted(src string, owners []string, idx []int) string {
	i, ok := b.idx[src]
	if !ok {
		return ""
	}
	row := b.dist[i]
	best, bestD := "", int32(-1)
	for x, o := range owners {
		j := idx[x]
		if j < 0 || row[j] < 0 {
			continue
		}
		// Sorted: the first of the nearest is the least name.
		if bestD < 0 || row[j] < bestD {
			best, bestD = o, row[j]
		}
	}
	return best
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (b *builder) sidPrefix(a netip.Addr) netip.Prefix {
	if p, ok := b.usidPrefix(a); ok {
		return p
	}
	return b.d.SIDPrefix(a)
}

// endpoint converts a behaviour and its parameters into a seg6local route.
func (b *builder) endpoint(path, node, owner, behavior string, prm config.Params, sidAddr netip.Addr) (nodestate.Route, error) {
	l := &nodestate.Seg6Local{Action: behavior, Iif: prm.Iif, Oif: prm.Oif, Table: prm.Table, VRFTable: prm.VRFTable,
		Flavors: b.usidFlavors(behavior, sidAddr, prm.Flavors), Count: prm.Count == nil || *prm.Count}
	b.usidLengths(l, sidAddr)
	if prm.Nh4 != "" {
		a, err := netip.ParseAddr(prm.Nh4)
		if err != nil {
			return nodestate.Route{}, fmt.Errorf("%s.nh4: %w", path, err)
		}
		l.Nh4 = a
	}
	if prm.Nh6 != "" {
		a, err := netip.ParseAddr(prm.Nh6)
		if err != nil {
			return nodestate.Route{}, fmt.Errorf("%s.nh6: %w", path, err)
		}
		l.Nh6 = a
	}
	for i, s := range prm.Segs {
		a, err := b.resolveSID(s)
		if err != nil {
			return nodestate.Route{}, fmt.Errorf("%s.segs[%d]: %w", path, i, err)
		}
		l.Segs = append(l.Segs, a)
	}
	if (behavior == "End.DT6" || behavior == "End.T") && l.Table == 0 && l.VRFTable == 0 {
		l.Table = 254
	}
	return nodestate.Route{Dst: b.sidPrefix(sidAddr), Seg6Local: l, Owner: owner}, nil
}

func (b *builder) resolveSID(s string) (netip.Addr, error) {
	if a, ok := b.sids[s]; ok {
		return a, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is neither a service nor an IPv6 address", s)
	}
	return a, nil
}

func (b *builder) addSID(node, service, behavior string, a netip.Addr) {
	f := b.d.Format()
	if b.isUSID(a) {
		// The block, one uSID, the rest of the container.
		f.LocatorBits, f.FunctionBits = b.csid.Block.Bits(), b.csid.NFLen
		f.ArgsBits = 128 - f.LocatorBits - f.FunctionBits
	}
	b.p.SIDs = append(b.p.SIDs, SIDInfo{SID: b.sidPrefix(a), Node: node, Service: service, Behavior: behavior,
		LocatorBits: f.LocatorBits, FunctionBits: f.FunctionBits, Args: f.ArgsBits})
}

func (b *builder) services() error {
	names := make([]string, 0, len(b.d.Services))
	for n := range b.d.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		s := b.d.Services[name]
		a, ok := b.sids[name]
		if !ok {
			return fmt.Errorf("services.%s: no SID allocated", name)
		}
		if k := s.ServiceKind(); k != nil {
			// Served by the kind's data path (a tc program), which
			// matches the SID exactly or, for a kind that reads ARGS,
			// its LOC:FUNCT prefix: no seg6local route (see
			// kindServices).
			f := b.d.Format()
			sid := netip.PrefixFrom(a, 128)
			if k.MatchesArgs() || b.isUSID(a) {
				sid = b.sidPrefix(a)
			}
			b.p.SIDs = append(b.p.SIDs, SIDInfo{SID: sid, Node: s.Node, Service: name,
				Behavior: s.EffectiveBehavior(), LocatorBits: f.LocatorBits, FunctionBits: f.FunctionBits, Args: f.ArgsBits})
			continue
		}
		r, err := b.endpoint("services."+name, s.Node, "service "+name, s.Behavior, s.Params, a)
		if err != nil {
			return err
		}
		b.addRoute(s.Node, r)
		b.addSID(s.Node, name, s.Behavior, a)
	}
	return nil
}

func (b *builder) chains() error {
	names := make([]string, 0, len(b.d.Chains))
	for n := range b.d.Chains {
		names = append(names, n)
	}
	sort.Strings(names)
	if n := config.ChainDirections(b.d); n > chainTableRange {
		// Refused by validation already; without it the table search
		// below would never end.
		return fmt.Errorf("chains: %d chain directions, at most %d", n, chainTableRange)
	}
	usedTables := map[int]string{}
	var errs []error
	for _, name := range names {
		c := b.d.Chains[name]
		if err := b.chain(name, c, false, usedTables); err != nil {
			errs = append(errs, err)
		}
		if c.Bidirectional {
			if err := b.chain(name, c, true, usedTables); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (b *builder) chain(name string, c *config.Chain, reverse bool, used map[int]string) error {
	path := "chains." + name
	cname := name
	headend := c.Ingress
	services := append([]string(nil), c.Services...)
	match := c.Match
	egress := c.Egress
	egressSIDKey := config.EgressKey(name)
	if reverse {
		cname = name + "/reverse"
		if egress == nil || egress.Node == "" {
			return fmt.Errorf("%s: bidirectional chain needs an egress node", path)
		}
		headend = egress.Node
		for i, j := 0, len(services)-1; i < j; i, j = i+1, j-1 {
			services[i], services[j] = services[j], services[i]
		}
		match = config.Match{Family: c.Match.Family, Src: c.Match.Dst, Dst: c.Match.Src, Proto: c.Match.Proto,
			Sport: c.Match.Dport, Dport: c.Match.Sport}
		egress = c.Return
		if egress == nil {
			egress = &config.Egress{Behavior: "End.DT6"}
			if isV4(c.Match.Dst) {
				egress.Behavior = "End.DT4"
			}
		}
		egress = &config.Egress{Node: c.Ingress, Behavior: egress.Behavior, SID: egress.SID, Params: egress.Params}
		egressSIDKey = config.ReturnKey(name)
	}

	ch := Chain{Name: cname, Ingress: headend, Mode: modeOrDefault(c.Mode), Match: describeMatch(match)}
	var segs []netip.Addr
	for _, s := range services {
		a := b.sids[s]
		segs = append(segs, a)
		ch.Hops = append(ch.Hops, Hop{SID: a, Node: b.d.Services[s].Node, Service: s, Behavior: b.d.Services[s].EffectiveBehavior()})
	}
	if egress != nil {
		a, ok := b.sids[egressSIDKey]
		if !ok {
			return fmt.Errorf("%s: no SID allocated for the egress", path)
		}
		r, err := b.endpoint(path+".egress", egress.Node, "chain "+cname, egress.Behavior, egress.Params, a)
		if err != nil {
			return err
		}
		b.addRoute(egress.Node, r)
		if r.Seg6Local.Action == "End.DT6" && r.Seg6Local.Table != 0 {
			// Packets of the chain for the decapsulating node itself (a
			// reverse chain's: replies to the headend's own connections).
			d, _ := netip.ParsePrefix(match.Dst)
			b.localDelivery(egress.Node, r.Seg6Local.Table, d, "chain "+cname)
		}
		b.addSID(egress.Node, cname+" egress", egress.Behavior, a)
		segs = append(segs, a)
		ch.Hops = append(ch.Hops, Hop{SID: a, Node: egress.Node, Service: cname + " egress", Behavior: egress.Behavior})
	}
	if len(segs) == 0 {
		return fmt.Errorf("%s: empty SID list", path)
	}
	b.loopRoutes(ch.Hops)
	ch.Nodes = b.pathNodes(headend, ch.Hops)
	for i, h := range ch.Hops {
		if sv := b.d.Services[h.Service]; sv != nil && sv.Served() {
			if b.afterSegs == nil {
				b.afterSegs = map[string][]netip.Addr{}
			}
			// A served hop keeps a full SID, so what follows it packs
			// the same on its own (f3216).
			b.afterSegs[h.Service] = append([]netip.Addr(nil), b.pack(ch.Hops[i+1:], segs[i+1:])...)
		}
	}
	if b.d.Compressed() {
		segs = b.pack(ch.Hops, segs)
		ch.Segments = segs
		ch.USIDBlock = b.csid.Block
		b.usidNotes(cname, ch.Hops)
	}

	dst, err := netip.ParsePrefix(match.Dst)
	if err != nil {
		return fmt.Errorf("%s.match.dst: %w", path, err)
	}
	table := chainTable(cname, used)
	ch.Table = table

	// The policy route's device only has to be up: after encapsulation the
	// kernel routes the packet again by its new destination (the first SID).
	dev := "lo"
	if e, ok := b.firstHop(headend, ch.Hops[0].Node); ok {
		dev = e.iface.Name
	}
	enc := &nodestate.Seg6Encap{Mode: b.encapMode(kernelMode(ch.Mode), ch.Hops, len(segs), c.HMAC != ""), Segs: segs}
	if b.d.Compressed() {
		ch.Encap = enc.Mode
	}
	if c.HMAC != "" {
		enc.HMACKeyID = uint32(b.d.Security.HMAC[c.HMAC].ID)
	}
	b.addRoute(headend, nodestate.Route{Dst: dst.Masked(), Table: table, Dev: dev, Seg6: enc, Owner: "chain " + cname})

	rule, err := b.rule(path, match, table, cname)
	if err != nil {
		return err
	}
	if reverse {
		rule.Iif = ""
	}
	hn := b.p.Nodes[headend]
	hn.Rules = append(hn.Rules, rule)
	b.p.Chains = append(b.p.Chains, ch)
	return nil
}

func isV4(prefix string) bool {
	p, err := netip.ParsePrefix(prefix)
	return err == nil && p.Addr().Is4()
}

func modeOrDefault(m string) string {
	if m == "" {
		return config.ModeEncap
	}
	return m
}

// kernelMode maps the domain's mode names to iproute2's seg6 modes.
func kernelMode(m string) string {
	if m == config.ModeInsert {
		return "inline"
	}
	return m
}

// chainTable derives a stable routing table number from the chain name.
func chainTable(name string, used map[int]string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	t := chainTableBase + int(h.Sum32()%chainTableRange)
	for used[t] != "" {
		// Validation bounds the chain directions by the range (config.
		// MaxChainDirections), so a free table exists.
		t = chainTableBase + (t-chainTableBase+1)%chainTableRange
	}
	used[t] = name
	return t
}

var protoNumbers = map[string]int{"icmp": 1, "tcp": 6, "udp": 17, "ipv6-icmp": 58, "icmpv6": 58, "sctp": 132}

func (b *builder) rule(path string, m config.Match, table int, owner string) (nodestate.Rule, error) {
	r := nodestate.Rule{Family: 6, Table: table, Iif: m.Iif, Owner: "chain " + owner}
	dst, err := netip.ParsePrefix(m.Dst)
	if err != nil {
		return r, fmt.Errorf("%s.match.dst: %w", path, err)
	}
	r.Dst = dst.Masked()
	if dst.Addr().Is4() {
		r.Family = 4
	}
	if m.Src != "" {
		src, err := netip.ParsePrefix(m.Src)
		if err != nil {
			return r, fmt.Errorf("%s.match.src: %w", path, err)
		}
		r.Src = src.Masked()
	}
	if m.Proto != "" {
		if n, ok := protoNumbers[strings.ToLower(m.Proto)]; ok {
			r.IPProto = n
		} else if n, err := strconv.Atoi(m.Proto); err == nil {
			r.IPProto = n
		} else {
			return r, fmt.Errorf("%s.match.proto: unknown protocol %q", path, m.Proto)
		}
	}
	if r.Sport, err = parsePorts(m.Sport); err != nil {
		return r, fmt.Errorf("%s.match.sport: %w", path, err)
	}
	if r.Dport, err = parsePorts(m.Dport); err != nil {
		return r, fmt.Errorf("%s.match.dport: %w", path, err)
	}
	r.Priority = rulePriority(owner, r)
	return r, nil
}

// rulePriority orders classification rules so that more specific chains are
// consulted first (a UDP-port chain before a destination-only chain to the
// same prefix), with a stable hash of the chain name breaking ties.
func rulePriority(name string, r nodestate.Rule) int {
	specific := 0
	for _, set := range []bool{r.Src.IsValid(), r.IPProto != 0, !r.Sport.IsZero(), !r.Dport.IsZero(), r.Iif != ""} {
		if set {
			specific++
		}
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return rulePrefBase + (5-specific)*1000 + int(h.Sum32()%1000)
}

func parsePorts(s string) (nodestate.PortRange, error) {
	if s == "" {
		return nodestate.PortRange{}, nil
	}
	lo, hi, isRange := strings.Cut(s, "-")
	a, err := strconv.ParseUint(lo, 10, 16)
	if err != nil {
		return nodestate.PortRange{}, fmt.Errorf("bad port %q", s)
	}
	z := a
	if isRange {
		if z, err = strconv.ParseUint(hi, 10, 16); err != nil || z < a {
			return nodestate.PortRange{}, fmt.Errorf("bad port range %q", s)
		}
	}
	return nodestate.PortRange{From: uint16(a), To: uint16(z)}, nil
}

func describeMatch(m config.Match) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	add("src", m.Src)
	add("dst", m.Dst)
	add("proto", m.Proto)
	add("sport", m.Sport)
	add("dport", m.Dport)
	add("iif", m.Iif)
	return strings.Join(parts, " ")
}

// kindServices emits the service of every service kind's service on its
// node (internal/service: the SR proxies in the canonical parameter order
// of `segchain sid add`, the firewall instances ...).
func (b *builder) kindServices() error {
	names := make([]string, 0, len(b.d.Services))
	for n, s := range b.d.Services {
		if s.Served() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		s := b.d.Services[name]
		in := b.d.KindInput(name)
		in.SID, in.Prefix, in.Segs = b.sids[name], b.sidPrefix(b.sids[name]), b.afterSegs[name]
		b.usidInput(&in)
		svc, err := s.ServiceKind().Plan(in)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n := b.p.Nodes[s.Node]
		n.Services = append(n.Services, svc)
	}
	return errors.Join(errs...)
}
