package nodestate

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Proto is the rtnetlink protocol number segchain stamps on every route and
// rule it installs, so that reads, diffs and destroy see only its own objects.
// segchain's protocols, 199 to 203:
//
//	199 ProtoBGP      BGP best paths (routing: bgp)
//	200 ProtoNFLoop   End.AN.NF's netfilter loop rules and routes
//	201 srv6svc.RouteProtocol  userspace services' on-failure bypass routes
//	202 Proto         domain routes and rules (apply)
//	203 ProtoManual   hand-made local SIDs (segchain sid add)
//
// None of them is named by the kernel (include/uapi/linux/rtnetlink.h:
// RTPROT_* stops at 192, EIGRP), by iproute2's /etc/iproute2/rt_protos
// (up to 192) or by FRR, whose zebra numbers its daemons' routes 186-198
// (zebra/rt_netlink.h; Debian's frr package names 186-197 in
// /etc/iproute2/rt_protos.d/frr.conf). Older segchain versions used 197 and
// 198 (ProtoLegacy, ProtoManualLegacy), which zebra takes for its own:
// FRR 8.4.4's zebra, started in a namespace holding segchain's routes,
// reads a protocol-197 route as an OpenFabric route and installs a copy of
// it (metric 20, same protocol) in front of it, and a protocol-198 route
// as an SR-TE one (docs/apply.md). Routes and rules of the old numbers
// are observed as segchain's with Route.Proto / Rule.Proto set, so that
// apply renumbers them in place and destroy removes them.
// ProtoBGP keeps 199: zebra reads a protocol-199 route as a kernel route
// (K) and neither copies nor removes it.
const Proto = 0xca // 202

// ProtoManual is the rtnetlink protocol of local SIDs made by hand with
// `segchain sid add`. They are not the domain's: apply and destroy neither
// see nor remove them, and a domain SID at the same destination is a
// conflict plan reports.
const ProtoManual = 0xcb // 203

// ProtoLegacy is the protocol older segchain versions stamped on the
// domain's routes and rules (197, FRR's RTPROT_OPENFABRIC). Observation
// takes such routes and rules for segchain's own (Route.Proto and
// Rule.Proto say so); apply renumbers them to Proto in place, destroy
// removes them.
const ProtoLegacy = 0xc5 // 197

// ProtoManualLegacy is the protocol older segchain versions stamped on
// hand-made local SIDs (198, FRR's RTPROT_SRTE): still hand-made
// everywhere (Origin, segchain sid), renumbered to ProtoManual by apply.
const ProtoManualLegacy = 0xc6 // 198

// ProtoNFLoop stamps End.AN.NF's loop rules and routes (internal/dataplane/netfilter):
// neither the domain's nor hand-made, so observation never takes them for
// drift.
const ProtoNFLoop = 0xc8 // 200

// ProtoBGP stamps the best paths a node's BGP speaker installs (routing:
// bgp, internal/bgp): neither the domain's static routes nor foreign, so
// plan, apply and destroy never take them for drift; the speaker adds and
// removes them as its RIB changes.
const ProtoBGP = 0xc7 // 199

// Owned reports whether protocol is the domain's: Proto, or ProtoLegacy
// left by an older segchain.
func Owned(protocol int) bool { return protocol == Proto || protocol == ProtoLegacy }

// HandMade reports whether protocol is a hand-made SID's: ProtoManual, or
// ProtoManualLegacy left by an older segchain.
func HandMade(protocol int) bool { return protocol == ProtoManual || protocol == ProtoManualLegacy }

// Origin says who installed a route, from its protocol: "domain" (apply),
// "hand-made" (segchain sid add), or "" (not segchain).
func Origin(protocol int) string {
	switch {
	case Owned(protocol):
		return "domain"
	case HandMade(protocol):
		return "hand-made"
	}
	return ""
}

// Node is the desired (or observed) SRv6 state of one node.
type Node struct {
	Name     string    `json:"name"`
	Sysctls  []Sysctl  `json:"sysctls,omitempty"`
	TunSrc   string    `json:"tunsrc,omitempty"` // ip sr tunsrc; "" leaves it alone
	HMACKeys []HMACKey `json:"hmac_keys,omitempty"`
	Routes   []Route   `json:"routes,omitempty"`
	Rules    []Rule    `json:"rules,omitempty"`
	// Services are the node's SIDs served by a service kind's data path
	// (SR proxies, the SR-aware firewall ...) rather than by seg6local
	// routes: one list for every kind (internal/service).
	Services []Service `json:"services,omitempty"`
	// Boundary is the node's SR domain boundary filter; nil = none.
	Boundary *Boundary `json:"boundary,omitempty"`
	// Faults are what observation found broken in the eBPF objects
	// behind Services, by service kind (a program not attached, a link pin
	// missing or foreign, a map missing or of another layout, orphaned
	// pins): drift even when the service lists match. Only observed state
	// has them.
	Faults map[string][]string `json:"faults,omitempty"`
	// Foreign are the local SIDs (seg6local routes) the domain did not
	// install: made by hand with segchain sid add or by another tool. Only
	// observed, never changed; a desired route at the same destination,
	// table and metric is a conflict.
	Foreign []ForeignRoute `json:"foreign,omitempty"`
	// BGP is the node's BGP speaker intent (routing: bgp); nil = no
	// speaker. Observed: what the node's agent runs now.
	BGP *BGP `json:"bgp,omitempty"`
	// BGPSessions are the speaker's sessions as observed (state, prefixes
	// received); never part of the diff.
	BGPSessions []BGPSession `json:"bgp_sessions,omitempty"`
}

// ForeignRoute is a route the domain does not own, with its protocol.
type ForeignRoute struct {
	Route    Route `json:"route"`
	Protocol int   `json:"protocol"`
}

// Sysctl is one /proc/sys/net value, Key written with dots
// ("net.ipv6.conf.eth0.seg6_enabled").
type Sysctl struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func (s Sysctl) String() string { return "sysctl " + s.Key + "=" + s.Value }

// HMACKey is one entry of the kernel's seg6 HMAC key table (ip sr hmac set).
type HMACKey struct {
	ID     uint32 `json:"id"`
	Alg    string `json:"alg"` // "sha1" or "sha256"
	Secret []byte `json:"-"`
}

// String never prints the secret, only a short fingerprint-free marker.
func (k HMACKey) String() string {
	return fmt.Sprintf("hmac %d %s (%d-byte secret)", k.ID, k.Alg, len(k.Secret))
}

// Route is an IPv4 or IPv6 route, optionally with a seg6 (headend) or
// seg6local (endpoint) lightweight tunnel.
type Route struct {
	Dst       netip.Prefix `json:"dst"`
	Table     int          `json:"table,omitempty"` // 0 = main
	Dev       string       `json:"dev,omitempty"`
	Via       netip.Addr   `json:"via,omitempty"`
	Metric    int          `json:"metric,omitempty"`
	Seg6      *Seg6Encap   `json:"seg6,omitempty"`
	Seg6Local *Seg6Local   `json:"seg6local,omitempty"`
	// Local makes a plain route of type local (dev lo): packets looked up
	// in its table are delivered to the node. A decapsulating End.DT6
	// looks up its table alone, so the node's own addresses need one
	// there (plan: a bidirectional chain's return at its headend).
	Local bool `json:"local,omitempty"`
	// Owner names the domain object the route serves ("chain web", "service fw1");
	// informational only, never part of the identity.
	Owner string `json:"owner,omitempty"`
	// Proto is the route's rtnetlink protocol when it is not Proto (0):
	// observed ProtoLegacy (an older segchain's, renumbered by apply), or
	// ProtoManual / ProtoManualLegacy on the ops that renumber a hand-made
	// SID. Desired routes of the domain leave it 0. Part of String (a
	// renumbering is a change) but not of Key (it happens in place).
	Proto int `json:"proto,omitempty"`
}

// Seg6Encap is a headend policy: H.Encaps, H.Insert, H.Encaps.L2 and the
// reduced variants. Segs is in path order: Segs[0] is the first SID visited.
type Seg6Encap struct {
	Mode      string       `json:"mode"` // encap, inline, l2encap, encap.red, l2encap.red
	Segs      []netip.Addr `json:"segs"`
	HMACKeyID uint32       `json:"hmac,omitempty"`
	// OFlag sets the SRH's O-flag (0x20, RFC 9259 §2.1) on every packet
	// the route encapsulates: the O-flagged copy of a sampled chain's
	// route (internal/oam), never a domain route.
	OFlag bool `json:"oflag,omitempty"`
}

// Seg6Local is an endpoint behaviour bound to a local SID.
type Seg6Local struct {
	Action   string       `json:"action"` // iproute2 spelling: End, End.X, End.DX6 ...
	Nh4      netip.Addr   `json:"nh4,omitzero"`
	Nh6      netip.Addr   `json:"nh6,omitzero"`
	Table    int          `json:"table,omitempty"`
	VRFTable int          `json:"vrftable,omitempty"`
	Iif      string       `json:"iif,omitempty"`
	Oif      string       `json:"oif,omitempty"`
	Segs     []netip.Addr `json:"segs,omitempty"` // End.B6 / End.B6.Encaps, path order
	HMAC     uint32       `json:"hmac,omitempty"`
	Flavors  []string     `json:"flavors,omitempty"` // psp, usp, usd, next-csid
	// LBLen and NFLen are the NEXT-C-SID flavor's Locator-Block and
	// Locator-Node+Function lengths in bits (SEG6_LOCAL_FLV_LCBLOCK_BITS,
	// SEG6_LOCAL_FLV_LCNODE_FN_BITS; iproute2's lblen and nflen), sent
	// with next-csid; 0 with next-csid means the kernel's default (32,
	// 16). Only with next-csid.
	LBLen int  `json:"lblen,omitempty"`
	NFLen int  `json:"nflen,omitempty"`
	Count bool `json:"count,omitempty"`
	// BPF names a pinned program path for End.BPF.
	BPF string `json:"bpf,omitempty"`
}

// Kernel defaults of the NEXT-C-SID lengths (SEG6_LOCAL_LCBLOCK_DBITS,
// SEG6_LOCAL_LCNODE_FN_DBITS): F3216.
const (
	DefaultCSIDLBLen = 32
	DefaultCSIDNFLen = 16
)

// CSIDLengths are the NEXT-C-SID lengths the kernel applies to l (what it
// dumps and iproute2 prints): LBLen/NFLen, the kernel's defaults when
// neither is set, and 0, 0 without flavor next-csid.
func (l *Seg6Local) CSIDLengths() (lblen, nflen int) {
	if !slices.Contains(l.Flavors, "next-csid") {
		return 0, 0
	}
	if l.LBLen == 0 && l.NFLen == 0 {
		return DefaultCSIDLBLen, DefaultCSIDNFLen
	}
	return l.LBLen, l.NFLen
}

// Rule is a policy-routing rule steering classified traffic into a table.
type Rule struct {
	Family   int          `json:"family"` // 4 or 6
	Priority int          `json:"priority"`
	Src      netip.Prefix `json:"src,omitzero"`
	Dst      netip.Prefix `json:"dst,omitzero"`
	IPProto  int          `json:"ipproto,omitempty"`
	Sport    PortRange    `json:"sport,omitzero"`
	Dport    PortRange    `json:"dport,omitzero"`
	Iif      string       `json:"iif,omitempty"`
	Table    int          `json:"table"`
	Owner    string       `json:"owner,omitempty"`
	// Proto is the rule's rtnetlink protocol when it is not Proto (0):
	// observed ProtoLegacy, an older segchain's. Part of String and so of
	// Key: apply adds the rule with Proto, then deletes the old one.
	Proto int `json:"proto,omitempty"`
}

// PortRange is an inclusive port range; the zero value means any port.
type PortRange struct {
	From uint16 `json:"from"`
	To   uint16 `json:"to"`
}

func (p PortRange) IsZero() bool { return p.From == 0 && p.To == 0 }

// Bounds is the range's first and last port (To 0: the range is From
// alone; the zero range: 0, 0).
func (p PortRange) Bounds() (from, to uint16) {
	if p.To == 0 {
		return p.From, p.From
	}
	return p.From, p.To
}

func (p PortRange) String() string {
	if p.From == p.To {
		return fmt.Sprint(p.From)
	}
	return fmt.Sprintf("%d-%d", p.From, p.To)
}

func joinAddrs(a []netip.Addr) string {
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = x.String()
	}
	return strings.Join(s, ",")
}

// String renders the encap the way `ip route` does.
func (e *Seg6Encap) String() string {
	s := "encap seg6 mode " + e.Mode + " segs " + joinAddrs(e.Segs)
	if e.HMACKeyID != 0 {
		s += fmt.Sprintf(" hmac %d", e.HMACKeyID)
	}
	if e.OFlag {
		s += " oflag"
	}
	return s
}

// String renders the behaviour the way `ip route` does.
func (l *Seg6Local) String() string {
	var b strings.Builder
	b.WriteString("encap seg6local action " + l.Action)
	if len(l.Flavors) > 0 {
		b.WriteString(" flavors " + strings.Join(l.Flavors, ","))
	}
	if lb, nf := l.CSIDLengths(); lb != 0 {
		fmt.Fprintf(&b, " lblen %d nflen %d", lb, nf)
	}
	if l.Nh4.IsValid() {
		b.WriteString(" nh4 " + l.Nh4.String())
	}
	if l.Nh6.IsValid() {
		b.WriteString(" nh6 " + l.Nh6.String())
	}
	if l.Table != 0 {
		fmt.Fprintf(&b, " table %d", l.Table)
	}
	if l.VRFTable != 0 {
		fmt.Fprintf(&b, " vrftable %d", l.VRFTable)
	}
	if l.Iif != "" {
		b.WriteString(" iif " + l.Iif)
	}
	if l.Oif != "" {
		b.WriteString(" oif " + l.Oif)
	}
	if len(l.Segs) > 0 {
		b.WriteString(" srh segs " + joinAddrs(l.Segs))
		if l.HMAC != 0 {
			fmt.Fprintf(&b, " hmac %d", l.HMAC)
		}
	}
	if l.BPF != "" {
		b.WriteString(" endpoint " + l.BPF)
	}
	if l.Count {
		b.WriteString(" count")
	}
	return b.String()
}

// Key identifies a route in its table: two routes with the same key cannot
// coexist, so a changed route is replaced in place (make-before-break).
func (r Route) Key() string {
	// "DST table T metric M", built without fmt: observation and diffs
	// key every route of every node.
	b := make([]byte, 0, 64)
	if r.Dst.IsValid() {
		b = r.Dst.AppendTo(b)
	} else {
		b = append(b, r.Dst.String()...)
	}
	b = append(b, " table "...)
	b = strconv.AppendInt(b, int64(r.tableOrMain()), 10)
	b = append(b, " metric "...)
	b = strconv.AppendInt(b, int64(r.Metric), 10)
	return string(b)
}

func (r Route) tableOrMain() int {
	if r.Table == 0 {
		return 254
	}
	return r.Table
}

// String is the canonical form used for diffs; it excludes Owner.
func (r Route) String() string { return string(r.appendTo(make([]byte, 0, 96))) }

// appendTo appends String's text to b (digests render every route of a
// node on every request: one allocation instead of a dozen).
func (r Route) appendTo(b []byte) []byte {
	if r.Dst.IsValid() {
		b = r.Dst.AppendTo(b)
	} else {
		b = append(b, r.Dst.String()...)
	}
	if r.Seg6 != nil {
		b = append(b, ' ')
		b = append(b, r.Seg6.String()...)
	}
	if r.Seg6Local != nil {
		b = append(b, ' ')
		b = append(b, r.Seg6Local.String()...)
	}
	if r.Local {
		b = append(b, " local"...)
	}
	if r.Via.IsValid() {
		b = append(b, " via "...)
		b = r.Via.AppendTo(b)
	}
	if r.Dev != "" {
		b = append(b, " dev "...)
		b = append(b, r.Dev...)
	}
	if r.Table != 0 && r.Table != 254 {
		b = append(b, " table "...)
		b = strconv.AppendInt(b, int64(r.Table), 10)
	}
	if r.Metric != 0 {
		b = append(b, " metric "...)
		b = strconv.AppendInt(b, int64(r.Metric), 10)
	}
	if r.Proto != 0 {
		b = append(b, " proto "...)
		b = strconv.AppendInt(b, int64(r.Proto), 10)
	}
	return b
}

// Protocol is the rtnetlink protocol the route carries (Proto unless
// r.Proto says otherwise).
func (r Route) Protocol() int { return protoOr(r.Proto) }

// Protocol is the rtnetlink protocol the rule carries (Proto unless
// r.Proto says otherwise).
func (r Rule) Protocol() int { return protoOr(r.Proto) }

func protoOr(p int) int {
	if p == 0 {
		return Proto
	}
	return p
}

// Key identifies a rule; rules are never modified in place, only added and
// removed, so the whole canonical form is the key.
func (r Rule) Key() string { return r.String() }

// String renders the rule the way `ip rule` does.
func (r Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ipv%d rule %d:", r.Family, r.Priority)
	if r.Src.IsValid() {
		b.WriteString(" from " + r.Src.String())
	} else {
		b.WriteString(" from all")
	}
	if r.Dst.IsValid() {
		b.WriteString(" to " + r.Dst.String())
	}
	if r.Iif != "" {
		b.WriteString(" iif " + r.Iif)
	}
	if r.IPProto != 0 {
		fmt.Fprintf(&b, " ipproto %d", r.IPProto)
	}
	if !r.Sport.IsZero() {
		b.WriteString(" sport " + r.Sport.String())
	}
	if !r.Dport.IsZero() {
		b.WriteString(" dport " + r.Dport.String())
	}
	fmt.Fprintf(&b, " lookup %d", r.Table)
	if r.Proto != 0 {
		fmt.Fprintf(&b, " proto %d", r.Proto)
	}
	return b.String()
}

// sortRoutes sorts routes by Key, stably, computing each key once.
func sortRoutes(rs []Route) {
	if len(rs) > 1 {
		routeSorts.Add(1)
	}
	sort.Stable(routesByKey{rs, keysOf(rs)})
}

// routeSorts counts the lists of routes sorted (RouteSorts).
var routeSorts atomic.Int64

// RouteSorts is how many lists of two or more routes this process sorted
// (tests: a watched agent sorts its kept routes once per dump, not per
// request).
func RouteSorts() int64 { return routeSorts.Load() }

func keysOf(rs []Route) []string {
	keys := make([]string, len(rs))
	for i, r := range rs {
		keys[i] = r.Key()
	}
	return keys
}

type routesByKey struct {
	rs   []Route
	keys []string
}

func (s routesByKey) Len() int           { return len(s.rs) }
func (s routesByKey) Less(i, j int) bool { return s.keys[i] < s.keys[j] }
func (s routesByKey) Swap(i, j int) {
	s.rs[i], s.rs[j] = s.rs[j], s.rs[i]
	s.keys[i], s.keys[j] = s.keys[j], s.keys[i]
}

// Sort puts every list in a canonical order so that plans and golden files
// are stable.
func (n *Node) Sort() {
	sort.Slice(n.Sysctls, func(i, j int) bool { return n.Sysctls[i].Key < n.Sysctls[j].Key })
	sort.Slice(n.HMACKeys, func(i, j int) bool { return n.HMACKeys[i].ID < n.HMACKeys[j].ID })
	sort.SliceStable(n.Services, func(i, j int) bool {
		a, b := n.Services[i], n.Services[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.SID.Addr().Less(b.SID.Addr())
	})
	if n.Boundary != nil {
		n.Boundary.Sort()
	}
	n.BGP.Sort()
	sortRoutes(n.Routes)
	sort.Slice(n.Rules, func(i, j int) bool {
		if n.Rules[i].Priority != n.Rules[j].Priority {
			return n.Rules[i].Priority < n.Rules[j].Priority
		}
		return n.Rules[i].String() < n.Rules[j].String()
	})
}
