package config

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/segchain/segchain/internal/service"
	"github.com/segchain/segchain/internal/service/srunaware"
	"github.com/segchain/segchain/internal/sid"
	"github.com/segchain/segchain/internal/srh"
)

// Roles lists the valid node roles.
var Roles = []string{RoleHost, RoleIngress, RoleEgress, RoleRouter, RoleNFV, RoleEdge, RoleSF}

// Kinds lists the valid service kinds: native and every kind of
// internal/service/kinds.
var Kinds = kindNames()

// Proxies lists the SR proxy types of sr-unaware services.
var Proxies = []string{ProxyStatic, ProxyDynamic, ProxyDynamicFlow, ProxyMasquerading}

// Inners lists the inner packet types a proxy hands to its SF.
var Inners = []string{InnerIPv4, InnerIPv6, InnerEthernet}

// Modes lists the valid chain modes.
var Modes = []string{ModeEncap, ModeInsert, ModeL2Encap, ModeEncapRed, ModeL2EncapRed}

// Behaviors lists the endpoint behaviours a domain file may name, in
// iproute2 spelling.
var Behaviors = []string{"End", "End.X", "End.T", "End.DX2", "End.DX4", "End.DX6",
	"End.DT4", "End.DT6", "End.DT46", "End.B6", "End.B6.Encaps"}

// EgressBehaviors are the decapsulating behaviours a chain may end with.
var EgressBehaviors = []string{"End.DX6", "End.DX4", "End.DT6", "End.DT4", "End.DT46", "End.DX2"}

// Flavors are the seg6local flavors a domain file may name.
var Flavors = []string{"psp", "usp", "usd", "next-csid"}

// HMACAlgorithms are the seg6 HMAC algorithms.
var HMACAlgorithms = []string{"sha1", "sha256"}

// RoutingModes are the routing modes.
var RoutingModes = []string{RoutingStatic, RoutingBGP}

// behaviorParams says, per behaviour, which parameters are required and
// which are allowed (count applies everywhere).
var behaviorParams = map[string]struct{ required, optional []string }{
	"End":           {nil, []string{"flavors"}},
	"End.X":         {[]string{"nh6"}, []string{"oif", "flavors"}},
	"End.T":         {[]string{"table"}, []string{"flavors"}},
	"End.DX2":       {[]string{"oif"}, nil},
	"End.DX4":       {[]string{"nh4"}, []string{"oif"}},
	"End.DX6":       {[]string{"nh6"}, []string{"oif"}},
	"End.DT4":       {[]string{"vrftable"}, nil},
	"End.DT6":       {[]string{"table"}, nil},
	"End.DT46":      {[]string{"vrftable"}, nil},
	"End.B6":        {[]string{"segs"}, nil},
	"End.B6.Encaps": {[]string{"segs"}, nil},
}

var (
	nodeNameRE  = regexp.MustCompile(`^[a-z0-9-]+$`)
	ifaceNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	portRE      = regexp.MustCompile(`^(\d+)(?:-(\d+))?$`)
)

const (
	maxNodeName  = 10
	maxIfaceName = 15
	maxNodeID    = 0xffff
	maxKeyID     = 1<<32 - 1
)

var protoNumbers = map[string]int{"icmp": 1, "tcp": 6, "udp": 17, "ipv6-icmp": 58, "icmpv6": 58, "sctp": 132}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func familyOf(prefix string) int {
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		return 0
	}
	if p.Addr().Is4() {
		return 4
	}
	return 6
}

type validator struct {
	d    *Domain
	f    sid.Format
	pos  positions
	errs errorAcc
	// ifaces[node][iface] = path of the endpoint that declared it.
	ifaces map[string]map[string]string
	// errAt holds every path an error was recorded at and each of its
	// ancestors (hasErr), so that asking is not a scan of every error.
	errAt map[string]bool
}

func (v *validator) errf(path, format string, args ...any) {
	fe := &fieldErr{}
	fe.Path, fe.Msg = path, fmt.Sprintf(format, args...)
	fe.Line, fe.Col = v.pos.of(path)
	v.errs = append(v.errs, fe)
	if v.errAt == nil {
		v.errAt = map[string]bool{}
	}
	for p := path; p != "" && !v.errAt[p]; {
		v.errAt[p] = true
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			break
		}
		p = p[:i]
	}
}

// validate checks every rule and returns every violation.
func validate(d *Domain, pos positions) errorAcc {
	v := &validator{d: d, f: d.Format(), pos: pos, ifaces: map[string]map[string]string{}}
	if !v.bounds() {
		return v.errs // nothing more is checked of a domain out of bounds
	}
	fmtOK := true
	if err := v.f.Validate(); err != nil {
		v.errf("sid", "%s", strings.TrimPrefix(err.Error(), sid.ErrFormat.Error()+": "))
		fmtOK = false
	}
	v.nodes(fmtOK)
	v.links()
	v.services(fmtOK)
	v.chains()
	v.proxyUse()
	v.pools()
	v.chainOAM()
	v.perNode()
	v.security()
	v.routing()
	v.checkLoopsAndOverlaps()
	v.usid()
	if len(v.errs) == 0 {
		if _, err := d.SIDs(); err != nil {
			v.errf("services", "allocate SIDs: %v", err)
		}
	}
	return v.errs
}

func (v *validator) nodes(fmtOK bool) {
	if len(v.d.Nodes) == 0 {
		v.errf("nodes", "a domain needs at least one node")
	}
	ids := map[int]string{}
	locs := map[netip.Prefix]string{}
	for _, name := range v.inFileOrder("nodes.", v.d.NodeNames()) {
		n := v.d.Nodes[name]
		p := "nodes." + name
		if n == nil {
			v.errf(p, "empty node")
			continue
		}
		if len(name) > maxNodeName || !nodeNameRE.MatchString(name) {
			v.errf(p, "node name %q: want 1..%d characters of [a-z0-9-]", name, maxNodeName)
		}
		switch {
		case n.Role == "":
			v.errf(p+".role", "required (one of %s)", strings.Join(Roles, ", "))
		case !contains(Roles, n.Role):
			v.errf(p+".role", "unknown role %q (one of %s)", n.Role, strings.Join(Roles, ", "))
		}
		if n.ID < 1 || n.ID > maxNodeID {
			v.errf(p+".id", "id %d not in 1..%#x", n.ID, maxNodeID)
		} else if other, dup := ids[n.ID]; dup {
			v.errf(p+".id", "id %d already used by node %s", n.ID, other)
		} else {
			ids[n.ID] = name
		}
		switch {
		case n.Locator == "" && n.Role != RoleHost && n.Role != RoleRouter && n.Role != RoleSF && contains(Roles, n.Role):
			v.errf(p+".locator", "required for role %s", n.Role)
		case n.Locator != "" && n.Role == RoleHost:
			v.errf(p+".locator", "a host is outside the SR domain and has no locator")
		case n.Locator != "" && n.Role == RoleSF:
			v.errf(p+".locator", "an SR-unaware service function node has no locator")
		case n.Locator != "":
			loc, err := netip.ParsePrefix(n.Locator)
			switch {
			case err != nil:
				v.errf(p+".locator", "not a prefix: %q", n.Locator)
			case !loc.Addr().Is6() || loc.Addr().Is4In6():
				v.errf(p+".locator", "%s is not an IPv6 prefix", n.Locator)
			case fmtOK && loc.Bits() != v.f.LocatorBits:
				v.errf(p+".locator", "%s is /%d, sid.locator_bits is %d", n.Locator, loc.Bits(), v.f.LocatorBits)
			case loc.Masked() != loc:
				v.errf(p+".locator", "%s has host bits set (did you mean %s?)", n.Locator, loc.Masked())
			default:
				if other, dup := locs[loc]; dup {
					v.errf(p+".locator", "locator %s already used by node %s", loc, other)
				} else {
					locs[loc] = name
				}
			}
		}
		for _, k := range sortedKeys(n.Sysctls) {
			if !strings.HasPrefix(k, "net.") {
				v.errf(p+".sysctls."+k, "only net.* sysctls are allowed")
			}
		}
	}
}

// inFileOrder sorts map keys by their position in the file (then by name),
// so a duplicate is reported at the later occurrence.
func (v *validator) inFileOrder(prefix string, names []string) []string {
	out := append([]string(nil), names...)
	sort.SliceStable(out, func(i, j int) bool {
		li, ci := v.pos.of(prefix + out[i])
		lj, cj := v.pos.of(prefix + out[j])
		if li != lj {
			return li < lj
		}
		return ci < cj
	})
	return out
}

func (v *validator) links() {
	for i, l := range v.d.Links {
		p := fmt.Sprintf("links[%d]", i)
		if l == nil {
			v.errf(p, "empty link")
			continue
		}
		if len(l.Endpoints) != 2 {
			v.errf(p+".endpoints", "want exactly two endpoints node:iface, got %d", len(l.Endpoints))
		}
		var nodes []*Node
		var names []string
		for j, ep := range l.Endpoints {
			ep0 := fmt.Sprintf("%s.endpoints[%d]", p, j)
			node, iface, ok := splitEndpoint(ep)
			if !ok {
				v.errf(ep0, "%q is not node:iface", ep)
				continue
			}
			n := v.d.Nodes[node]
			if n == nil {
				v.errf(ep0, "unknown node %q", node)
				continue
			}
			if len(iface) > maxIfaceName || !ifaceNameRE.MatchString(iface) || iface == "lo" {
				v.errf(ep0, "interface name %q: want 1..%d characters of [A-Za-z0-9._-], not lo", iface, maxIfaceName)
			} else if other, dup := v.ifaces[node][iface]; dup {
				v.errf(ep0, "interface %s of node %s already declared at %s", iface, node, other)
			} else {
				if v.ifaces[node] == nil {
					v.ifaces[node] = map[string]string{}
				}
				v.ifaces[node][iface] = ep0
			}
			if len(names) == 1 && names[0] == node {
				v.errf(ep0, "both endpoints are on node %s", node)
			}
			nodes = append(nodes, n)
			names = append(names, node)
		}
		for _, fam := range []struct {
			key, s string
			v6     bool
		}{{"ipv6", l.IPv6, true}, {"ipv4", l.IPv4, false}} {
			fp := p + "." + fam.key
			if fam.s == "" {
				if fam.v6 {
					v.errf(fp, "required")
				}
				continue
			}
			pf, err := netip.ParsePrefix(fam.s)
			if err != nil {
				v.errf(fp, "not a prefix: %q", fam.s)
				continue
			}
			if pf.Addr().Is6() != fam.v6 || pf.Addr().Is4In6() {
				v.errf(fp, "%s is not an %s prefix", fam.s, map[bool]string{true: "IPv6", false: "IPv4"}[fam.v6])
				continue
			}
			for j, n := range nodes {
				if n.ID < 1 || n.ID > maxNodeID {
					continue // reported at the node
				}
				if _, err := HostAddr(pf, n.ID); err != nil {
					v.errf(fp, "node %s: %v", names[j], err)
				}
			}
		}
	}
}

// hasIface reports whether iface exists on node (a link end or lo).
func (v *validator) hasIface(node, iface string) bool {
	if iface == "lo" {
		return true
	}
	_, ok := v.ifaces[node][iface]
	return ok
}

func (v *validator) services(fmtOK bool) {
	pins := map[string]map[uint64]string{} // node → FUNCT → path
	for _, name := range sortedKeys(v.d.Services) {
		s := v.d.Services[name]
		p := "services." + name
		if s == nil {
			v.errf(p, "empty service")
			continue
		}
		if name == "" || strings.ContainsAny(name, " \t") {
			v.errf(p, "service name %q must be non-empty without spaces", name)
		}
		if _, err := netip.ParseAddr(name); err == nil {
			v.errf(p, "service name %q looks like an address; segs could not tell them apart", name)
		}
		loc, hasLoc := v.nodeLocator(p+".node", s.Node)
		if s.Firewall != nil && s.Kind != KindFirewall {
			v.errf(p+".firewall", "only for kind %s", KindFirewall)
		}
		switch s.Kind {
		case "", KindNative:
			v.behavior(p, s.Node, s.Behavior, s.Params, Behaviors)
			v.noProxyFields(p, s)
		case KindSRUnaware:
			v.proxyService(p, s)
		default:
			if k := s.ServiceKind(); k != nil {
				v.kindService(p, s, k)
			} else {
				v.errf(p+".kind", "unknown kind %q (one of %s)", s.Kind, strings.Join(kindNames(), ", "))
			}
		}
		v.strayBlocks(p, s)
		if s.SID != "" && s.Function != "" {
			v.errf(p, "sid and function are exclusive")
			continue
		}
		if !hasLoc || !fmtOK {
			continue
		}
		if s.SID != "" {
			if f, ok := v.pinnedSID(p+".sid", s.SID, loc); ok {
				v.claim(pins, s.Node, f, p+".sid")
			}
		}
		if s.Function != "" {
			f, err := parseFunction(s.Function)
			switch {
			case err != nil:
				v.errf(p+".function", "not a number: %q (hex 0x… or decimal)", s.Function)
			case v.f.FunctionBits < 64 && f >= 1<<v.f.FunctionBits:
				v.errf(p+".function", "%#x does not fit %d function bits", f, v.f.FunctionBits)
			default:
				v.claim(pins, s.Node, f, p+".function")
			}
		}
	}
	for _, name := range sortedKeys(v.d.Chains) {
		c := v.d.Chains[name]
		if c == nil {
			continue
		}
		for _, e := range []struct {
			p string
			e *Egress
		}{{"chains." + name + ".egress", c.Egress}, {"chains." + name + ".return", c.Return}} {
			if e.e == nil || e.e.SID == "" || !fmtOK {
				continue
			}
			node := e.e.Node
			if node == "" {
				continue
			}
			if n := v.d.Nodes[node]; n != nil {
				if loc, err := netip.ParsePrefix(n.Locator); err == nil && loc.Bits() == v.f.LocatorBits {
					if f, ok := v.pinnedSID(e.p+".sid", e.e.SID, loc); ok {
						v.claim(pins, node, f, e.p+".sid")
					}
				}
			}
		}
	}
}

// perNode checks the services of each node against what their kind's data
// path holds per node (service.Limited): apply would fail for want of
// room. Reported once per node and kind, at the first service too many.
func (v *validator) perNode() {
	type nk struct{ node, kind string }
	count := map[nk]int{}
	first := map[nk]string{}
	var order []nk
	for _, name := range sortedKeys(v.d.Services) {
		s := v.d.Services[name]
		if s == nil {
			continue
		}
		l, ok := s.ServiceKind().(service.Limited)
		if !ok || l.PerNode() == 0 {
			continue
		}
		k := nk{s.Node, s.Kind}
		count[k]++
		if count[k] == l.PerNode()+1 {
			first[k] = name
			order = append(order, k)
		}
	}
	for _, k := range order {
		s := v.d.Services[first[k]]
		l := s.ServiceKind().(service.Limited)
		v.errf("services."+first[k]+".node", "node %s has %d services of kind %s, its data path holds at most %d (this is the %dth)", k.node, count[k], k.kind, l.PerNode(), l.PerNode()+1)
	}
}

// noProxyFields reports proxy fields on a native service.
func (v *validator) noProxyFields(p string, s *Service) {
	for _, f := range []struct {
		key string
		set bool
	}{{"proxy", s.Proxy != ""}, {"inner", s.Inner != ""}, {"sf_nh6", s.SFNh6 != ""}, {"sf_nh4", s.SFNh4 != ""},
		{"sf_mac", s.SFMac != ""}, {"iface_out", s.IfaceOut != ""}, {"iface_in", s.IfaceIn != ""},
		{"flow_timeout", s.FlowTimeout != 0}, {"flow_max", s.FlowMax != 0}} {
		if f.set {
			v.errf(p+"."+f.key, "only for kind %s", KindSRUnaware)
		}
	}
}

// proxyService checks an sr-unaware service: the proxy type, the inner
// type, the SF's address and the interfaces towards and from it.
// noEndpointParams reports every seg6local parameter set on a service
// whose kind (with an optional hint) takes none of them.
func (v *validator) noEndpointParams(p string, s *Service, kind string) {
	prm := s.Params
	for _, f := range []struct {
		key string
		set bool
	}{{"nh4", prm.Nh4 != ""}, {"nh6", prm.Nh6 != ""}, {"oif", prm.Oif != ""}, {"iif", prm.Iif != ""},
		{"table", prm.Table != 0}, {"vrftable", prm.VRFTable != 0}, {"segs", len(prm.Segs) > 0},
		{"flavors", len(prm.Flavors) > 0}} {
		if f.set {
			v.errf(p+"."+f.key, "does not apply to kind %s", kind)
		}
	}
}

func (v *validator) proxyService(p string, s *Service) {
	if s.Behavior != "" {
		v.errf(p+".behavior", "must be empty for kind %s (derived from proxy)", KindSRUnaware)
	}
	v.noEndpointParams(p, s, KindSRUnaware+" (use sf_nh6, sf_nh4, sf_mac, iface_out, iface_in)")
	switch {
	case s.Proxy == "":
		v.errf(p+".proxy", "required for kind %s (one of %s)", KindSRUnaware, strings.Join(Proxies, ", "))
	case !contains(Proxies, s.Proxy):
		v.errf(p+".proxy", "unknown proxy %q (one of %s)", s.Proxy, strings.Join(Proxies, ", "))
	}
	masq := s.Proxy == ProxyMasquerading
	eth := s.Inner == InnerEthernet
	switch {
	case masq && s.Inner != "":
		v.errf(p+".inner", "not for masquerading (it serves IPv6 only)")
	case !masq && s.Inner == "":
		v.errf(p+".inner", "required (%s)", strings.Join(Inners, ", "))
	case !masq && !contains(Inners, s.Inner):
		v.errf(p+".inner", "unknown inner %q (one of %s)", s.Inner, strings.Join(Inners, ", "))
	case eth && s.Proxy == ProxyDynamicFlow:
		v.errf(p+".inner", "ethernet is not for proxy %s: the flow cache keys on the inner IP 5-tuple, not frames (use static or dynamic)", ProxyDynamicFlow)
	}
	addrs := []struct {
		key string
		set bool
	}{{"sf_nh6", s.SFNh6 != ""}, {"sf_nh4", s.SFNh4 != ""}, {"sf_mac", s.SFMac != ""}}
	n := 0
	for _, a := range addrs {
		if a.set {
			n++
			if eth {
				v.errf(p+"."+a.key, "inner ethernet takes no SF address: the frame keeps its own L2 header (the SF is a bridge or another L2 function)")
			}
		}
	}
	if !eth && n != 1 {
		v.errf(p, "give exactly one of sf_nh6, sf_nh4, sf_mac (the SF's address)")
	}
	if s.SFNh6 != "" {
		if a, err := netip.ParseAddr(s.SFNh6); err != nil || !a.Is6() || a.Is4In6() {
			v.errf(p+".sf_nh6", "not an IPv6 address: %q", s.SFNh6)
		}
	}
	if s.SFNh4 != "" {
		switch a, err := netip.ParseAddr(s.SFNh4); {
		case err != nil || !a.Is4():
			v.errf(p+".sf_nh4", "not an IPv4 address: %q", s.SFNh4)
		case masq || s.Inner == "ipv6":
			v.errf(p+".sf_nh4", "an IPv6 inner packet needs sf_nh6 or sf_mac")
		}
	}
	if s.SFMac != "" {
		if m, err := net.ParseMAC(s.SFMac); err != nil || len(m) != 6 {
			v.errf(p+".sf_mac", "not an Ethernet address: %q", s.SFMac)
		}
	}
	for _, f := range []struct{ key, iface string }{{"iface_out", s.IfaceOut}, {"iface_in", s.IfaceIn}} {
		switch {
		case f.iface == "":
			v.errf(p+"."+f.key, "required for kind %s", KindSRUnaware)
		case f.iface == "lo":
			v.errf(p+"."+f.key, "must be a link interface of node %s", s.Node)
		case s.Node != "" && v.d.Nodes[s.Node] != nil && !v.hasIface(s.Node, f.iface):
			v.errf(p+"."+f.key, "node %s has no interface %q", s.Node, f.iface)
		}
	}
	switch {
	case s.FlowTimeout != 0 && s.Proxy != ProxyDynamicFlow:
		v.errf(p+".flow_timeout", "only for proxy %s", ProxyDynamicFlow)
	case s.FlowTimeout < 0 || int64(s.FlowTimeout) > math.MaxUint32:
		v.errf(p+".flow_timeout", "%d: want seconds 1..%d", s.FlowTimeout, uint32(math.MaxUint32))
	}
	switch {
	case s.FlowMax == 0:
	case s.Proxy != ProxyDynamicFlow:
		v.errf(p+".flow_max", "only for proxy %s", ProxyDynamicFlow)
	case s.FlowMax < 1 || s.FlowMax > srunaware.FlowsMax:
		v.errf(p+".flow_max", "%d: want 1..%d flows", s.FlowMax, srunaware.FlowsMax)
	case s.FlowTimeout == 0:
		v.errf(p+".flow_max", "needs flow_timeout: a full cache frees only expired flows, so without a timeout finished flows would hold their slots forever")
	}
}

// proxySpec parses an sr-unaware service that passed every check above
// the way the agent will (srunaware.ParseSpec, on the parameters the plan
// emits), so nothing the proxy refuses gets past validation. segs is the
// number of segments after the service in its chain (a static proxy's
// CACHE); the addresses are placeholders.
func (v *validator) proxySpec(p string, s *Service, segs int) {
	placeholder := netip.MustParsePrefix("fc00::/128")
	sl := make([]netip.Addr, max(segs, 1))
	for i := range sl {
		b := placeholder.Addr().As16()
		b[15] = byte(i + 1)
		sl[i] = netip.AddrFrom16(b)
	}
	src := netip.MustParseAddr("fc00::ffff")
	if _, err := srunaware.ParseSpec(placeholder, s.ProxyBehavior(), s.ProxyParams(src, sl)); err != nil {
		msg := strings.TrimPrefix(err.Error(), placeholder.String()+" "+s.ProxyBehavior()+": ")
		v.errf(p, "the proxy refuses it: %s", strings.ReplaceAll(msg, "\n", "; "))
	}
}

// proxyUse checks what proxies require of the chains that use them: every
// iface_in serves one proxy per node (masquerading proxies may share one),
// a static or dynamic proxy serves one chain direction (its cache holds one
// SID list), and a static proxy is in a chain (its segs are that chain's).
func (v *validator) proxyUse() {
	ifaceIn := map[string]string{} // node:iface → first service
	for _, name := range sortedKeys(v.d.Services) {
		s := v.d.Services[name]
		if s == nil || !s.SRUnaware() || s.IfaceIn == "" {
			continue
		}
		k := s.Node + ":" + s.IfaceIn
		other, dup := ifaceIn[k]
		if !dup {
			ifaceIn[k] = name
			continue
		}
		if s.Proxy != ProxyMasquerading || v.d.Services[other].Proxy != ProxyMasquerading {
			v.errf("services."+name+".iface_in", "interface %s of node %s is already the iface_in of service %s (only masquerading proxies may share one)", s.IfaceIn, s.Node, other)
		}
	}
	uses := map[string][]string{} // service → chain directions
	for _, cn := range sortedKeys(v.d.Chains) {
		c := v.d.Chains[cn]
		if c == nil {
			continue
		}
		for _, sn := range c.Services {
			if s := v.d.Services[sn]; s != nil && s.SRUnaware() {
				uses[sn] = append(uses[sn], cn)
				if c.Bidirectional {
					uses[sn] = append(uses[sn], cn+"/reverse")
				}
			}
		}
	}
	after := v.segsAfter()
	v.poolInstanceUses(uses, after)
	for _, name := range sortedKeys(v.d.Services) {
		s := v.d.Services[name]
		if s == nil || !s.SRUnaware() {
			continue
		}
		p := "services." + name
		if (s.Proxy == ProxyStatic || s.Proxy == ProxyDynamic) && len(uses[name]) > 1 {
			v.errf(p, "a %s proxy serves one chain direction, used by %s (give each chain its own service, or use dynamic-flow)", s.Proxy, strings.Join(uses[name], ", "))
		}
		if s.Proxy == ProxyStatic && len(uses[name]) == 0 {
			v.errf(p, "a static proxy needs the chain it serves (its segs are the rest of that chain)")
		}
		if !v.hasErr(p) {
			v.proxySpec(p, s, after[name])
		}
	}
}

// segsAfter is, for every service in a chain, the number of segments
// after it in the first chain (by name) that uses it (its services after
// it and the egress): the length of a static proxy's CACHE. One pass over
// the chains.
func (v *validator) segsAfter() map[string]int {
	out := map[string]int{}
	for _, cn := range sortedKeys(v.d.Chains) {
		c := v.d.Chains[cn]
		if c == nil {
			continue
		}
		for i, sn := range c.Services {
			if _, seen := out[sn]; seen {
				continue
			}
			n := len(c.Services) - i - 1
			if c.Egress != nil {
				n++
			}
			out[sn] = n
		}
	}
	return out
}

// hasErr reports whether an error was recorded at path or below it.
func (v *validator) hasErr(path string) bool { return v.errAt[path] }

// chainProxies checks the sr-unaware services of one chain against the
// chain's mode and address family.
func (v *validator) chainProxies(p string, c *Chain, fam int) {
	for i, sn := range c.Services {
		s := v.d.Services[sn]
		if s == nil || !s.SRUnaware() {
			continue
		}
		sp := fmt.Sprintf("%s.services[%d]", p, i)
		switch {
		case c.Mode == ModeInsert && i == len(c.Services)-1:
			v.errf(sp, "proxy service %s cannot be the last segment of an insert-mode chain: the proxy needs a next segment (use an egress: encap mode)", sn)
		case c.Mode == ModeInsert && s.Proxy != ProxyMasquerading:
			v.errf(sp, "proxy service %s needs an encapsulated inner packet (only masquerading works in insert mode): use encap mode with an egress", sn)
		case (c.Mode == ModeL2Encap || c.Mode == ModeL2EncapRed) && s.Inner != InnerEthernet:
			v.errf(sp, "proxy service %s: chain mode %s carries Ethernet frames, the proxy needs inner ethernet (it has %s)", sn, c.Mode, cmp.Or(s.Inner, "none: "+s.Proxy))
		case s.Inner == InnerEthernet && s.Proxy != ProxyMasquerading && c.Mode != ModeL2Encap && c.Mode != ModeL2EncapRed:
			v.errf(sp, "proxy service %s has inner ethernet but chain mode %s carries IP packets (ethernet proxies serve l2encap and l2encap.red chains)", sn, c.Mode)
		case s.Proxy == ProxyMasquerading && fam == 4:
			v.errf(sp, "masquerading proxy %s serves IPv6 chains only", sn)
		case fam != 0 && (s.Inner == "ipv4" || s.Inner == "ipv6") && s.Inner != fmt.Sprintf("ipv%d", fam) && c.Mode != ModeInsert:
			v.errf(sp, "proxy service %s has inner %s but the chain carries IPv%d", sn, s.Inner, fam)
		case c.Mode == ModeInsert && s.Inner == "ipv4":
			v.errf(sp, "proxy service %s has inner ipv4 but an insert-mode chain carries IPv6", sn)
		}
	}
}

// claim records a pinned FUNCT and reports clashes and reserved values.
func (v *validator) claim(pins map[string]map[uint64]string, node string, f uint64, path string) {
	n := v.d.Nodes[node]
	if loc, err := netip.ParsePrefix(n.Locator); err == nil {
		if na, err := sid.NodeAddr(loc, v.f); err == nil {
			if _, nf, _ := sid.Split(na, v.f); nf == f || f == 0 {
				v.errf(path, "FUNCT %#x is reserved (the node address %s)", f, na)
				return
			}
		}
	}
	if pins[node] == nil {
		pins[node] = map[uint64]string{}
	}
	if other, dup := pins[node][f]; dup {
		v.errf(path, "FUNCT %#x on node %s already pinned by %s", f, node, other)
		return
	}
	pins[node][f] = path
}

// pinnedSID checks a pinned SID and returns its FUNCT.
func (v *validator) pinnedSID(path, s string, loc netip.Prefix) (uint64, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() {
		v.errf(path, "not an IPv6 address: %q", s)
		return 0, false
	}
	if !sid.Contains(loc, a, v.f) {
		v.errf(path, "%s is outside the node's locator %s", a, loc)
		return 0, false
	}
	_, f, _ := sid.Split(a, v.f)
	if c, _ := sid.Compose(loc, f, 0, v.f); c != a {
		v.errf(path, "%s has ARGS or trailing bits set (want %s)", a, c)
		return 0, false
	}
	return f, true
}

// nodeLocator checks that node exists and has a locator.
func (v *validator) nodeLocator(path, node string) (netip.Prefix, bool) {
	if node == "" {
		v.errf(path, "required")
		return netip.Prefix{}, false
	}
	n := v.d.Nodes[node]
	if n == nil {
		v.errf(path, "unknown node %q", node)
		return netip.Prefix{}, false
	}
	if n.Locator == "" {
		v.errf(path, "node %s (role %s) has no locator", node, n.Role)
		return netip.Prefix{}, false
	}
	loc, err := netip.ParsePrefix(n.Locator)
	return loc, err == nil && loc.Bits() == v.f.LocatorBits
}

// behavior checks a behaviour name and its parameters on node.
func (v *validator) behavior(p, node, behavior string, prm Params, allowed []string) {
	if behavior == "" {
		v.errf(p+".behavior", "required (one of %s)", strings.Join(allowed, ", "))
		return
	}
	if !contains(allowed, behavior) {
		if contains(Behaviors, behavior) {
			v.errf(p+".behavior", "%s does not decapsulate (one of %s)", behavior, strings.Join(allowed, ", "))
		} else {
			v.errf(p+".behavior", "unknown behavior %q (one of %s)", behavior, strings.Join(allowed, ", "))
		}
		return
	}
	spec := behaviorParams[behavior]
	set := map[string]bool{
		"nh4": prm.Nh4 != "", "nh6": prm.Nh6 != "", "oif": prm.Oif != "", "iif": prm.Iif != "",
		"table": prm.Table != 0, "vrftable": prm.VRFTable != 0, "segs": len(prm.Segs) > 0,
		"flavors": len(prm.Flavors) > 0,
	}
	for _, r := range spec.required {
		if !set[r] {
			v.errf(p+"."+r, "required by %s", behavior)
		}
	}
	for _, k := range []string{"nh4", "nh6", "oif", "iif", "table", "vrftable", "segs", "flavors"} {
		if set[k] && !contains(spec.required, k) && !contains(spec.optional, k) {
			v.errf(p+"."+k, "does not apply to %s", behavior)
		}
	}
	if prm.Nh4 != "" {
		if a, err := netip.ParseAddr(prm.Nh4); err != nil || !a.Is4() {
			v.errf(p+".nh4", "not an IPv4 address: %q", prm.Nh4)
		}
	}
	if prm.Nh6 != "" {
		if a, err := netip.ParseAddr(prm.Nh6); err != nil || !a.Is6() || a.Is4In6() {
			v.errf(p+".nh6", "not an IPv6 address: %q", prm.Nh6)
		}
	}
	if node != "" && v.d.Nodes[node] != nil {
		if prm.Oif != "" && !v.hasIface(node, prm.Oif) {
			v.errf(p+".oif", "node %s has no interface %q", node, prm.Oif)
		}
		if prm.Iif != "" && !v.hasIface(node, prm.Iif) {
			v.errf(p+".iif", "node %s has no interface %q", node, prm.Iif)
		}
	}
	if prm.Table < 0 {
		v.errf(p+".table", "table %d must be positive", prm.Table)
	}
	if prm.VRFTable < 0 {
		v.errf(p+".vrftable", "vrftable %d must be positive", prm.VRFTable)
	}
	if n := len(prm.Segs); n > 0 {
		if behavior == "End.B6" {
			n++ // the packet's own destination, kept as Segment List[0]
		}
		if max := srh.MaxPath(0); n > max {
			v.errf(p+".segs", "%d segments, an SRH holds at most %d", n, max)
		}
	}
	for i, s := range prm.Segs {
		if _, ok := v.d.Services[s]; ok {
			continue
		}
		if a, err := netip.ParseAddr(s); err != nil || !a.Is6() || a.Is4In6() {
			v.errf(fmt.Sprintf("%s.segs[%d]", p, i), "%q is neither a service nor an IPv6 address", s)
		}
	}
	seen := map[string]bool{}
	for i, fl := range prm.Flavors {
		fp := fmt.Sprintf("%s.flavors[%d]", p, i)
		switch {
		case !contains(Flavors, fl):
			v.errf(fp, "unknown flavor %q (one of %s)", fl, strings.Join(Flavors, ", "))
		case seen[fl]:
			v.errf(fp, "flavor %s given twice", fl)
		}
		seen[fl] = true
	}
}

func (v *validator) chains() {
	for _, name := range sortedKeys(v.d.Chains) {
		c := v.d.Chains[name]
		p := "chains." + name
		if c == nil {
			v.errf(p, "empty chain")
			continue
		}
		v.chain(p, c)
	}
}

func (v *validator) chain(p string, c *Chain) {
	// Ingress.
	if c.Ingress == "" {
		v.errf(p+".ingress", "required")
	} else if n := v.d.Nodes[c.Ingress]; n == nil {
		v.errf(p+".ingress", "unknown node %q", c.Ingress)
	} else if n.Role != RoleIngress && n.Role != RoleEdge {
		v.errf(p+".ingress", "node %s has role %s, want ingress or edge", c.Ingress, n.Role)
	}
	// Mode.
	encap := c.Mode != ModeInsert
	l2 := c.Mode == ModeL2Encap || c.Mode == ModeL2EncapRed
	if !contains(Modes, c.Mode) {
		v.errf(p+".mode", "unknown mode %q (one of %s)", c.Mode, strings.Join(Modes, ", "))
		encap, l2 = false, false
	}
	// Services.
	first := map[string]int{}
	for i, s := range c.Services {
		sp := fmt.Sprintf("%s.services[%d]", p, i)
		if _, ok := v.d.Services[s]; !ok {
			v.errf(sp, "unknown service %q", s)
			continue
		}
		if j, dup := first[s]; dup {
			v.errf(sp, "service %s already at services[%d]: a service appears at most once per chain", s, j)
			continue
		}
		first[s] = i
		if svc := v.d.Services[s]; svc != nil && strings.EqualFold(svc.Behavior, "End.B6") {
			// seg6_do_srh_inline makes the packet's destination, the
			// binding SID itself, the last segment of the SRH it
			// inserts: once through the policy the packet is back at
			// End.B6, which inserts again, until the hop limit runs out.
			v.errf(sp, "service %s is End.B6: Linux inserts its policy with the binding SID itself as the last segment, so a chain's packets come back to it after the policy and loop until their hop limit runs out; steer a chain with End.B6.Encaps", s)
		}
	}
	if len(c.Services) == 0 && c.Egress == nil {
		v.errf(p+".services", "a chain needs at least one service or an egress")
	}
	v.segmentList(p, c)
	// Match.
	fam := v.match(p+".match", c)
	v.chainProxies(p, c, fam)
	v.sameNodePairs(p, c)
	// Egress.
	switch {
	case c.Mode == ModeInsert && c.Egress != nil:
		v.errf(p+".egress", "insert mode has no egress: the packet's own destination is the last segment")
	case encap && c.Egress == nil:
		v.errf(p+".egress", "required in %s mode", c.Mode)
	case c.Egress != nil:
		v.egress(p+".egress", c.Egress, fam, l2)
	}
	// Bidirectional.
	if c.Bidirectional {
		if c.Match.Src == "" {
			v.errf(p+".match.src", "required by bidirectional (the reverse chain's destination)")
		}
		if c.Egress != nil && c.Egress.Node != "" {
			if n := v.d.Nodes[c.Egress.Node]; n != nil && n.Role != RoleEgress && n.Role != RoleEdge {
				v.errf(p+".egress.node", "bidirectional: node %s has role %s, want egress or edge", c.Egress.Node, n.Role)
			}
		}
		if c.Return != nil {
			if c.Return.Node != "" && c.Return.Node != c.Ingress {
				v.errf(p+".return.node", "the return egress is on the ingress node %s, not %s", c.Ingress, c.Return.Node)
			} else {
				v.egress(p+".return", c.Return, fam, l2)
			}
		}
	} else if c.Return != nil {
		v.errf(p+".return", "only with bidirectional: true")
	}
	// HMAC.
	if c.HMAC != "" {
		if _, ok := v.d.Security.HMAC[c.HMAC]; !ok {
			v.errf(p+".hmac", "unknown key %q (define it in security.hmac)", c.HMAC)
		}
	}
}

// segmentList checks that the chain's SID list fits one SRH as apply
// encodes it (dataplane.EncodeSRH): a segment per service, the egress's,
// in insert mode a slot for the packet's own destination, and the HMAC
// TLV of a signed chain; and that it fits the header buffer of each
// service whose data path keeps the packet's outer headers (a dynamic
// proxy's cache, End.AN.NF's copy: service.HeaderLimited).
func (v *validator) segmentList(p string, c *Chain) {
	n := len(c.Services)
	if c.Egress != nil {
		n++
	}
	if c.Mode == ModeInsert {
		n++
	}
	tlv := 0
	if c.HMAC != "" {
		tlv = srh.HMACTLVLen
	}
	if max := srh.MaxPath(tlv); n > max {
		what := "an SRH holds at most %d"
		if tlv > 0 {
			what += " with its HMAC TLV"
		}
		v.errf(p+".services", "%d services make a segment list of %d, "+what+" (RFC 8754: 8-bit header length)", len(c.Services), n, max)
		return
	}
	// The outer headers a proxy or End.AN.NF keeps: the outer IPv6
	// header (40) and the SRH (8 + 16 a segment + TLVs); in insert mode
	// there is no outer header of segchain's.
	hdr := 8 + 16*n + tlv
	if c.Mode != ModeInsert {
		hdr += 40
	}
	for i, sn := range c.Services {
		s := v.d.Services[sn]
		if s == nil {
			continue
		}
		if max := s.HeaderMax(); max > 0 && hdr > max {
			v.errf(fmt.Sprintf("%s.services[%d]", p, i), "service %s (%s) keeps at most %d bytes of outer headers, this chain's are %d (%d segments): shorten the chain", sn, s.EffectiveBehavior(), max, hdr, n)
		}
	}
}

// egress checks a decapsulating egress (or return) for address family fam.
func (v *validator) egress(p string, e *Egress, fam int, l2 bool) {
	v.nodeLocator(p+".node", e.Node)
	v.behavior(p, e.Node, e.Behavior, e.Params, EgressBehaviors)
	if !contains(EgressBehaviors, e.Behavior) {
		return
	}
	var want []string
	switch {
	case l2:
		want = []string{"End.DX2"}
	case fam == 4:
		want = []string{"End.DX4", "End.DT4", "End.DT46"}
	case fam == 6:
		want = []string{"End.DX6", "End.DT6", "End.DT46"}
	default:
		return
	}
	if !contains(want, e.Behavior) {
		what := fmt.Sprintf("IPv%d", fam)
		if l2 {
			what = "l2encap"
		}
		v.errf(p+".behavior", "%s does not decapsulate %s traffic (want %s)", e.Behavior, what, strings.Join(want, ", "))
	}
}

// match checks the classifier and returns its address family (0 unknown).
func (v *validator) match(p string, c *Chain) int {
	m := c.Match
	fam := 0
	if m.Dst == "" {
		v.errf(p+".dst", "required")
	} else if dst, err := netip.ParsePrefix(m.Dst); err != nil {
		v.errf(p+".dst", "not a prefix: %q", m.Dst)
	} else {
		fam = 6
		if dst.Addr().Is4() {
			fam = 4
		}
	}
	if m.Family != 0 && m.Family != 4 && m.Family != 6 {
		v.errf(p+".family", "family %d: want 4 or 6", m.Family)
	} else if m.Family != 0 && fam != 0 && m.Family != fam {
		v.errf(p+".family", "family %d but dst %s is IPv%d", m.Family, m.Dst, fam)
	}
	if m.Src != "" {
		if src, err := netip.ParsePrefix(m.Src); err != nil {
			v.errf(p+".src", "not a prefix: %q", m.Src)
		} else if sf := map[bool]int{true: 4, false: 6}[src.Addr().Is4()]; fam != 0 && sf != fam {
			v.errf(p+".src", "src %s is IPv%d, dst is IPv%d", m.Src, sf, fam)
		}
	}
	proto := -1
	if m.Proto != "" {
		if n, ok := protoNumbers[strings.ToLower(m.Proto)]; ok {
			proto = n
		} else if n, err := strconv.Atoi(m.Proto); err == nil && n >= 0 && n <= 255 {
			proto = n
		} else {
			v.errf(p+".proto", "unknown protocol %q (tcp, udp, icmp, ipv6-icmp, sctp or 0..255)", m.Proto)
		}
	}
	for _, pp := range []struct{ key, s string }{{"sport", m.Sport}, {"dport", m.Dport}} {
		if pp.s == "" {
			continue
		}
		if !portRange(pp.s) {
			v.errf(p+"."+pp.key, "%q: want N or N-M with 0 ≤ N ≤ M ≤ 65535", pp.s)
		} else if m.Proto == "" || (proto != -1 && proto != 6 && proto != 17) {
			v.errf(p+"."+pp.key, "ports need proto tcp or udp")
		}
	}
	if m.Iif != "" && c.Ingress != "" && v.d.Nodes[c.Ingress] != nil && !v.hasIface(c.Ingress, m.Iif) {
		v.errf(p+".iif", "ingress node %s has no interface %q", c.Ingress, m.Iif)
	}
	return fam
}

func portRange(s string) bool {
	m := portRE.FindStringSubmatch(s)
	if m == nil {
		return false
	}
	lo, err1 := strconv.Atoi(m[1])
	hi := lo
	var err2 error
	if m[2] != "" {
		hi, err2 = strconv.Atoi(m[2])
	}
	return err1 == nil && err2 == nil && lo <= hi && hi <= 65535
}

func (v *validator) security() {
	ids := map[int]string{}
	for _, name := range v.inFileOrder("security.hmac.", sortedKeys(v.d.Security.HMAC)) {
		k := v.d.Security.HMAC[name]
		p := "security.hmac." + name
		if k == nil {
			v.errf(p, "empty key")
			continue
		}
		if k.ID < 1 || k.ID > maxKeyID {
			v.errf(p+".id", "key id %d not in 1..%d", k.ID, int64(maxKeyID))
		} else if other, dup := ids[k.ID]; dup {
			v.errf(p+".id", "key id %d already used by key %s", k.ID, other)
		} else {
			ids[k.ID] = name
		}
		if !contains(HMACAlgorithms, k.Algorithm) {
			v.errf(p+".algorithm", "unknown algorithm %q (one of %s)", k.Algorithm, strings.Join(HMACAlgorithms, ", "))
		}
		if k.SecretFile == "" {
			v.errf(p+".secret_file", "required")
		} else if _, err := v.d.Secret(name); err != nil {
			v.errf(p+".secret_file", "%s", strings.TrimPrefix(err.Error(), fmt.Sprintf("hmac key %q: ", name)))
		}
	}
	for i, n := range v.d.Security.RequireHMAC {
		if v.d.Nodes[n] == nil {
			v.errf(fmt.Sprintf("security.require_hmac[%d]", i), "unknown node %q", n)
		}
	}
	v.boundary()
	v.agents()
}

// boundary checks security.boundary: every name is an SR node (and, for
// interfaces, one of its link interfaces), and no interface is both a
// boundary and trusted.
func (v *validator) boundary() {
	b := v.d.Security.Boundary
	srNode := func(p, n string) bool {
		nd := v.d.Nodes[n]
		switch {
		case nd == nil:
			v.errf(p, "unknown node %q", n)
		case nd.Role == RoleHost || nd.Role == RoleSF:
			v.errf(p, "node %q is %s, outside the SR domain: it has no boundary", n, nd.Role)
		default:
			return true
		}
		return false
	}
	added := map[string]bool{}
	for i, ep := range b.Interfaces {
		p := fmt.Sprintf("security.boundary.interfaces[%d]", i)
		n, ifc, ok := splitEndpoint(ep)
		if !ok {
			v.errf(p, "%q: want node:iface", ep)
			continue
		}
		if srNode(p, n) && !v.hasIface(n, ifc) {
			v.errf(p, "node %s has no link interface %q (interfaces the file does not describe are boundary interfaces already)", n, ifc)
		}
		added[ep] = true
	}
	for i, ep := range b.Trusted {
		p := fmt.Sprintf("security.boundary.trusted[%d]", i)
		n, ifc, ok := splitEndpoint(ep)
		if !ok {
			if strings.Contains(ep, ":") {
				v.errf(p, "%q: want node or node:iface", ep)
				continue
			}
			n = ep
		}
		if !srNode(p, n) {
			continue
		}
		if ifc != "" && (ifc == "lo" || len(ifc) > 15) {
			v.errf(p, "%q: not a filterable interface name", ifc)
		}
		if added[ep] {
			v.errf(p, "%s is also in security.boundary.interfaces", ep)
		}
	}
	for i, n := range b.SFReachable {
		p := fmt.Sprintf("security.boundary.sf_reachable[%d]", i)
		switch nd := v.d.Nodes[n]; {
		case nd == nil:
			v.errf(p, "unknown node %q", n)
		case nd.Role != RoleSF:
			v.errf(p, "node %q is %s, not sf", n, nd.Role)
		}
	}
}

func (v *validator) routing() {
	switch m := v.d.Routing.Mode; m {
	case RoutingStatic, RoutingBGP:
	case "frr", "gobgp":
		v.errf("routing.mode", "%s: say mode: bgp (GoBGP in the segchain agents, FRR on router nodes; docs/routing.md)", m)
	default:
		v.errf("routing.mode", "unknown mode %q (%s)", m, strings.Join(RoutingModes, ", "))
	}
	v.bgp()
	v.summaries()
}
