package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/segchain/segchain/internal/service"
	"github.com/segchain/segchain/internal/service/srunaware"
)

// fieldDoc describes every field of the domain file, keyed "Type.key". The
// JSON Schema and docs/config.md are generated from it.
var fieldDoc = map[string]string{
	"Domain":          "An SRv6 domain: nodes, how they are wired, the service functions they host and the chains that steer traffic through them.",
	"Domain.name":     "Name of the domain (free text, shown by plan and status).",
	"Domain.sid":      "How SIDs split into LOC:FUNCT:ARGS. Default 64/48/16.",
	"Domain.nodes":    "The nodes, by name (1..10 characters of a-z, 0-9, '-': names become namespace names).",
	"Domain.links":    "Point-to-point links (veth pairs in the lab).",
	"Domain.services": "Service functions, by name: one SID each on one node.",
	"Domain.chains":   "Service chains, by name.",
	"Domain.routing":  "How locators and link prefixes are reached.",
	"Domain.security": "HMAC keys, the nodes that require HMAC and the SR domain boundary.",

	"SIDFormat":               "The SID structure. Absent fields take their default; args_bits: 0 means no ARGS.",
	"SIDFormat.locator_bits":  "Bits of the locator (default 64, at least 16). Every node locator must be a prefix of exactly this length.",
	"SIDFormat.function_bits": "Bits of FUNCT after the locator (default 48, at most 64).",
	"SIDFormat.args_bits":     "Bits of ARGS after FUNCT (default 16, at most 64). locator_bits+function_bits+args_bits ≤ 128.",
	"SIDFormat.format":        "full (default: every SID is 128 bits) or compressed SIDs (RFC 9800 NEXT-C-SID, 16-bit uSIDs after a locator block): f3216 (a /32 block), f4816 (a /48 block) or csid (a block of any length that is a multiple of 8, 8..96). Each SR node gets the uN locator block:ID00::/(LBL+8) (node id ≤ 255), compressible functions (native End, End.X, and the decapsulating egress behaviours) get one uSID each and chains pack them into containers of (128 − LBL) / 16 uSIDs (docs/usid.md).",
	"SIDFormat.block":         "The locator block of a compressed format; its length is the LBL (the kernel's lblen). f3216: a /32 (default fcbb:bb00::/32); f4816: a /48 (required); csid: a /8../96 whose length is a multiple of 8 (required). Must not overlap a locator or a link prefix.",
	"SIDFormat.usid_bits":     "Bits of one uSID (LNL+FL, the kernel's nflen) in a compressed format: 16 (the default and the only length offered: a uSID is the node id's 8 bits and the function's 8).",

	"Node":         "One machine (a network namespace in the lab).",
	"Node.role":    "host (traffic source/sink outside the SR domain), ingress (classifies, pushes SID lists), egress (decapsulates), router (plain IPv6 transit), nfv (hosts service functions), edge (ingress and egress) or sf (runs an SR-unaware service function: a leaf like a host, but it forwards).",
	"Node.id":      "Node number 1..65535, unique; the host part of the node's address on every link.",
	"Node.locator": "SID prefix of the node (IPv6, exactly sid.locator_bits long, no host bits, unique). Required for every role but host, router and sf; forbidden for hosts and sf.",
	"Node.netns":   "Network namespace of the node outside a lab (in a lab, the lab names it).",
	"Node.sysctls": "Extra net.* sysctls for the node.",
	"Node.agent":   "HOST:PORT of the node's segchain agent (segchain agent): the node is programmed over gRPC with mutual TLS (security.pki) instead of in-process. Without it the node is a namespace on the controller's machine. See docs/agents.md.",
	"Node.bgp":     "The node's BGP identity under routing: bgp (SR nodes only).",

	"NodeBGP":           "A node's BGP identity.",
	"NodeBGP.asn":       "Autonomous system number, unique per node (eBGP between nodes). Default 4200000000 + the node's id (private 4-byte ASNs).",
	"NodeBGP.router_id": "BGP router id, an IPv4 address, unique. Default 10.X.Y.Z from the node's id.",

	"Link":           "A point-to-point link. Each end's address is the link prefix with the node id as host part (fc00:12::/64 gives node 2 fc00:12::2/64).",
	"Link.endpoints": "Exactly two \"node:iface\" ends; interface names are 1..15 characters of [A-Za-z0-9._-], unique per node, not lo.",
	"Link.ipv6":      "IPv6 prefix of the link (required). Node ids must fit its host bits.",
	"Link.ipv4":      "IPv4 prefix of the link (optional). Node ids must fit its host bits.",

	"Service":              "A function bound to one SID on one node.",
	"Service.node":         "Node hosting the service; it must have a locator.",
	"Service.behavior":     "Endpoint behaviour, iproute2 spelling (required for native services, empty for sr-unaware ones).",
	"Service.sid":          "Pins the SID (inside the node's locator, ARGS zero). Exclusive with function.",
	"Service.function":     "Pins the FUNCT value, hex (0xf1) or decimal. 0 is reserved. Exclusive with sid.",
	"Service.kind":         "native (default): behavior is a kernel endpoint behaviour. sr-unaware: an SR-unaware service function behind an SR proxy on node (behavior must be empty; it is derived from proxy). firewall: the SR-aware firewall End.AN.FW on node, configured by firewall (behavior must be empty).",
	"Service.proxy":        "sr-unaware only, required: static (End.AS), dynamic (End.AD), dynamic-flow (End.AD with a per-flow cache) or masquerading (End.AM, IPv6 chains only). A static or dynamic proxy serves one chain direction; a static proxy needs its chain.",
	"Service.inner":        "sr-unaware only: the packet handed to the SF, ipv4, ipv6 or ethernet (required; not for masquerading). ipv4/ipv6 must agree with the family of the chains using the service; ethernet hands the SF the whole frame of an l2encap or l2encap.red chain, its own MACs kept (static or dynamic only, no SF address).",
	"Service.sf_nh6":       "sr-unaware only: IPv6 address of the SF on iface_out. Exactly one of sf_nh6, sf_nh4, sf_mac (none for inner ethernet).",
	"Service.sf_nh4":       "sr-unaware only: IPv4 address of the SF (inner ipv4 only).",
	"Service.sf_mac":       "sr-unaware only: Ethernet address of the SF.",
	"Service.iface_out":    "sr-unaware only, required: interface of node towards the SF.",
	"Service.iface_in":     "sr-unaware only, required: interface of node the SF returns packets on (may equal iface_out). One proxy per interface and node, except that masquerading proxies may share one.",
	"Service.flow_timeout": "dynamic-flow only: idle timeout of a flow's cache entry in seconds.",
	"Service.flow_max":     "dynamic-flow only: caps the flows the SID caches, in a cache of its own (1..65536; needs flow_timeout). Default: the node-wide LRU shared by every per-flow SID.",
	"Service.firewall":     "firewall only, required: the SR-aware firewall's rules, policy and eval-args table.",
	"Service.external":     "The SID is reachable from outside the SR domain (e.g. the segment of an SR-aware host): boundary interfaces let packets addressed to it in. Default false: the SID space is closed at the boundary (RFC 8754 section 5.1).",

	"Firewall":            "The SR-aware firewall End.AN.FW (after SERA). Rules without -m srh match the original packet (the inner packet in encap mode; the source, Segment List[0] and the transport header in insert mode); -m srh rules match the outer header and the SRH. The SID gets sid.args_bits ARGS bits for eval-args.",
	"Firewall.policy":     "What happens to packets no rule matches: accept (go to the next segment) or drop. Default: the rules_file's FORWARD policy, else accept.",
	"Firewall.rules":      "Rules in ip6tables syntax (-s -d -p --sport --dport --icmpv6-type, ! negation, -m srh --srh-…, -j ACCEPT|DROP|REJECT|SEG6 --seg6-action go-next|skip-next|go-last|eval-args); iptables syntax after -4. First match wins; they come after the rules_file's.",
	"Firewall.rules_file": "ip6tables-save or iptables-save output, relative to the domain file: its filter table's FORWARD chain, in order. Unsupported lines are errors naming the line.",
	"Firewall.args":       "eval-args table: ARGS value (a number that fits sid.args_bits) → action (go-next, skip-next, go-last, accept, drop, reject). Default 0 go-next, 1 drop, 2 skip-next, 3 go-last; an ARGS value not in the table is answered with ICMPv6 Parameter Problem.",

	"Params.nh4":      "IPv4 next hop (End.DX4).",
	"Params.nh6":      "IPv6 next hop (End.X, End.DX6).",
	"Params.oif":      "Outgoing interface: a link interface of the node or lo (End.DX2 required; End.X, End.DX4, End.DX6 optional).",
	"Params.iif":      "Incoming interface (no native behaviour takes one yet: always an error).",
	"Params.table":    "Routing table for the lookup (End.T, End.DT6).",
	"Params.vrftable": "VRF table (End.DT4, End.DT46; needs VRF support in the kernel).",
	"Params.segs":     "New segment list of a binding SID (End.B6, End.B6.Encaps): service names or IPv6 SIDs, first segment first.",
	"Params.flavors":  "seg6local flavors (End, End.X, End.T only).",
	"Params.count":    "Per-SID counters (default true).",

	"Chain":               "Steers the traffic a classifier matches at an ingress node through an ordered list of services.",
	"Chain.ingress":       "Headend node (role ingress or edge).",
	"Chain.match":         "The classifier: every field given must match.",
	"Chain.mode":          "Headend mode as iproute2 spells it: encap (H.Encaps), insert (H.Insert, iproute2 inline), l2encap (H.Encaps.L2), encap.red, l2encap.red. Default encap.",
	"Chain.services":      "Services in visiting order; each at most once. May be empty when an egress is given.",
	"Chain.egress":        "The decapsulating last segment: required for the encap modes, forbidden for insert (the packet's own destination is the last segment).",
	"Chain.bidirectional": "Also build the reverse chain: headend at the egress node (role egress or edge), services in reverse order, decapsulation at the ingress node. Needs match.src.",
	"Chain.return":        "The reverse chain's egress at the ingress node (only with bidirectional). Default for IPv6 chains: End.DT6 table 254.",
	"Chain.hmac":          "Name of a security.hmac key to sign the SRH with.",

	"Match":        "Ingress classifier.",
	"Match.family": "4 or 6; default: the family of dst. Must agree with dst.",
	"Match.src":    "Source prefix, same family as dst.",
	"Match.dst":    "Destination prefix (required).",
	"Match.proto":  "tcp, udp, icmp, ipv6-icmp, sctp or a number 0..255.",
	"Match.sport":  "Source port N or range N-M (tcp or udp only).",
	"Match.dport":  "Destination port N or range N-M (tcp or udp only).",
	"Match.iif":    "Incoming interface on the ingress node.",

	"Egress":          "Where a chain's SRv6 encapsulation is removed. IPv6 chains: End.DX6, End.DT6, End.DT46; IPv4: End.DX4, End.DT4, End.DT46; l2encap: End.DX2.",
	"Egress.node":     "Decapsulating node (with a locator). For return, the chain's ingress (may be omitted).",
	"Egress.behavior": "Decapsulating behaviour, iproute2 spelling.",
	"Egress.sid":      "Pins the SID (inside the node's locator, ARGS zero).",

	"Routing":           "Routing of locators and link prefixes.",
	"Routing.mode":      "static (default): shortest-path static routes computed from the links. bgp: eBGP in IPv6 unicast between the SR nodes over every link; each node advertises its locator, its LOC::1 address and its link prefixes. GoBGP runs inside every SR node's segchain agent (nodes need agents: segchain lab up starts them for a bgp domain), FRR on router nodes; hosts and sf nodes keep static default routes. See docs/routing.md.",
	"Routing.bgp":       "BGP timers and BFD (routing.mode: bgp only).",
	"Routing.summaries": "Opt-in: IPv6 blocks (one per pod of a fabric). A node is a member of a block when its locator lies in it (a node without a locator: when one of its link addresses does). Static mode: a node outside a block gets one route to the whole block, towards the nearest member, instead of one per locator and link prefix in it; members keep specific routes to everything inside; plan refuses a block whose members' shortest paths to its prefixes leave it. BGP mode: every FRR router that is a member announces the block as one prefix (aggregate-address) to its neighbours outside it, which get none of the prefixes inside; plan refuses a block whose members are not linked among themselves. Either mode: the boundary filter protects the block instead of the locators inside it. See docs/routing.md.",

	"BGPRouting":                "Settings of routing.mode: bgp.",
	"BGPRouting.keepalive":      "Keepalive interval in seconds (default 1).",
	"BGPRouting.hold":           "Hold time in seconds (default 3, at least 3, more than keepalive): a session whose peer falls silent is dropped after it, and its routes withdrawn.",
	"BGPRouting.bfd":            "Run BFD (RFC 5880/5881, single hop) on every BGP session: segchain's own BFD in the agents' speakers, FRR's bfdd on routers. A session whose BFD goes down is shut and routed around at once, well before the hold time (a silent failure: the carrier stays). Default off.",
	"BGPRouting.bfd_interval":   "BFD transmit and receive interval in milliseconds once a session is up (default 300; 50..60000; before up, 1 s).",
	"BGPRouting.bfd_multiplier": "BFD detect multiplier: the peer is declared down after this many intervals without a packet (default 3; 2..255).",

	"Security":              "SRv6 domain security.",
	"Security.hmac":         "HMAC keys of the kernel's seg6 HMAC table, by name.",
	"Security.require_hmac": "Nodes that drop SRv6 packets without a valid HMAC (seg6_require_hmac = 1). Every node hosting a SID of a chain with hmac is added automatically.",
	"Security.boundary":     "Where the SR domain ends (RFC 8754 section 5.1). Filtering is on by default; see docs/security.md.",
	"Security.pki":          "The controller's TLS files toward the agents (required when a node has an agent).",

	"PKI":      "Mutual-TLS files of the controller (segchain pki issue --controller NAME), relative to the domain file.",
	"PKI.ca":   "The domain CA's certificate (ca.crt): agents must present a node certificate it signed naming their node.",
	"PKI.cert": "The controller's certificate (controller-NAME.crt).",
	"PKI.key":  "The controller's private key (controller-NAME.key).",

	"Boundary":              "SR domain boundary. Default: every interface of an SR node that faces a host, an sf node it does not serve, or anything the domain file does not describe (an interface not in links) is a boundary interface: packets arriving there addressed into a locator (unless to an external service's SID), or carrying an SRH addressed to a domain node, or addressed to an sf node at all, are dropped and counted; packets leaving there addressed into a locator are dropped and counted.",
	"Boundary.off":          "Turn boundary filtering off on every node (the SIDs become reachable from outside; plan warns).",
	"Boundary.interfaces":   "Extra boundary interfaces, \"node:iface\", among those the defaults consider inside the domain (links between SR nodes).",
	"Boundary.trusted":      "Interfaces (\"node:iface\") or whole nodes (\"node\") not to filter although the defaults would.",
	"Boundary.sf_reachable": "sf nodes plain traffic from outside may reach directly. Default: none: every packet arriving at a boundary interface addressed to an sf node is dropped and counted (to-sf), since an SF receives its packets from its proxy only; SRv6 to an SF named here is still dropped (srh-to-node).",

	"HMACKey":             "One HMAC key.",
	"HMACKey.id":          "Key id 1..4294967295, unique.",
	"HMACKey.algorithm":   "sha256 (default) or sha1.",
	"HMACKey.secret_file": "File holding the secret, relative to the domain file; one trailing newline is ignored; at least the hash output (20 bytes for sha1, 32 for sha256: RFC 2104 §3), at most 64 bytes.",
}

// schemaEnum lists allowed values per field.
var schemaEnum = map[string][]any{
	"Node.role":           strs(Roles),
	"Service.behavior":    strs(Behaviors),
	"Service.kind":        strs(Kinds),
	"Service.proxy":       strs(Proxies),
	"Service.inner":       strs(Inners),
	"Egress.behavior":     strs(EgressBehaviors),
	"Chain.mode":          strs(Modes),
	"Params.flavors":      strs(Flavors),
	"HMACKey.algorithm":   strs(HMACAlgorithms),
	"Routing.mode":        strs(RoutingModes),
	"Match.family":        {4, 6},
	"Firewall.policy":     {PolicyAccept, PolicyDrop},
	"SIDFormat.format":    strs(SIDFormats),
	"SIDFormat.usid_bits": {USIDBits},
}

// schemaExtra adds keywords per field.
var schemaExtra = map[string]map[string]any{
	"Domain.nodes":              {"propertyNames": map[string]any{"pattern": "^[a-z0-9-]{1,10}$"}, "minProperties": 1},
	"Node.id":                   {"minimum": 1, "maximum": maxNodeID},
	"HMACKey.id":                {"minimum": 1, "maximum": maxKeyID},
	"Link.endpoints":            {"minItems": 2, "maxItems": 2},
	"Match.sport":               {"pattern": `^[0-9]+(-[0-9]+)?$`},
	"Match.dport":               {"pattern": `^[0-9]+(-[0-9]+)?$`},
	"SIDFormat.locator_bits":    {"minimum": 16, "maximum": 128},
	"SIDFormat.function_bits":   {"minimum": 0, "maximum": 64},
	"SIDFormat.args_bits":       {"minimum": 0, "maximum": 64},
	"Params.table":              {"minimum": 1},
	"Service.flow_timeout":      {"minimum": 1},
	"Service.flow_max":          {"minimum": 1, "maximum": srunaware.FlowsMax},
	"Params.vrftable":           {"minimum": 1},
	"NodeBGP.asn":               {"minimum": 1, "maximum": maxASN},
	"BGPRouting.keepalive":      {"minimum": 1, "maximum": maxBGPTimer},
	"BGPRouting.hold":           {"minimum": 3, "maximum": maxBGPTimer},
	"BGPRouting.bfd_interval":   {"minimum": minBFDInterval, "maximum": maxBFDInterval},
	"BGPRouting.bfd_multiplier": {"minimum": minBFDMultiplier, "maximum": maxBFDMultiplier},
	"Firewall.args": {"propertyNames": map[string]any{"pattern": "^(0x[0-9a-fA-F]+|[0-9]+)$"},
		"additionalProperties": map[string]any{"type": "string", "enum": []any{"go-next", "skip-next", "go-last", "accept", "drop", "reject"}}},
}

// schemaRequired lists the required keys per type.
var schemaRequired = map[string][]string{
	"Domain":  {"nodes"},
	"Node":    {"role", "id"},
	"Link":    {"endpoints", "ipv6"},
	"Service": {"node"},
	"Chain":   {"ingress", "match"},
	"Match":   {"dst"},
	"Egress":  {"behavior"},
	"HMACKey": {"id", "secret_file"},
}

func strs(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// SchemaID is the $id of the published schema.
const SchemaID = "https://github.com/segchain/segchain/docs/domain.schema.json"

// field is one YAML key of a struct, with the type that declares it (for
// inline Params, "Params").
type field struct {
	key, owner string
	typ        reflect.Type
}

func structFields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") {
			in := structFields(f.Type)
			if f.Type.PkgPath() != t.PkgPath() {
				// A kind's fields inline in the service (srunaware.Config)
				// are documented as the service's.
				for j := range in {
					in[j].owner = schemaName(t)
				}
			}
			out = append(out, in...)
			continue
		}
		out = append(out, field{key: name, owner: schemaName(t), typ: f.Type})
	}
	blocks := kindBlocks(t)
	keys := make([]string, 0, len(blocks))
	for k := range blocks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, field{key: k, owner: schemaName(t), typ: reflect.PointerTo(blocks[k])})
	}
	return out
}

// schemaName names a struct type in the schema and the reference: a
// service kind's block type by its key ("netfilter" → "Netfilter"), a
// type called Config of another package (firewall.Config) by its package
// ("Firewall").
func schemaName(t reflect.Type) string {
	for key, bt := range kindBlocks(reflect.TypeOf(Service{})) {
		if bt == t {
			return strings.ToUpper(key[:1]) + key[1:]
		}
	}
	if t.PkgPath() != reflect.TypeOf(Domain{}).PkgPath() && t.Name() == "Config" {
		pkg := t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:]
		return strings.ToUpper(pkg[:1]) + pkg[1:]
	}
	return t.Name()
}

// doc is the description of a schema key ("Type" or "Type.key"): config's
// own, or a service kind's (its block's FieldDocs).
func doc(key string) (string, bool) {
	if d, ok := fieldDoc[key]; ok {
		return d, true
	}
	for _, k := range registry().Kinds() {
		if _, zero := k.Block(); zero != nil {
			if dd, ok := zero.(service.Documented); ok {
				if d, ok := dd.FieldDocs()[key]; ok {
					return d, true
				}
			}
		}
	}
	return "", false
}

// Schema generates the JSON Schema (draft 2020-12) of the domain file from
// the Go types, with descriptions, enums and additionalProperties: false.
func Schema() ([]byte, error) {
	defs := map[string]any{}
	root := objectSchema(reflect.TypeOf(Domain{}), defs)
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = SchemaID
	root["title"] = "segchain domain file"
	delete(defs, "Domain")
	root["$defs"] = defs
	b, err := json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("marshal schema: %w", err)
	}
	return append(b, '\n'), nil
}

func objectSchema(t reflect.Type, defs map[string]any) map[string]any {
	props := map[string]any{}
	for _, f := range structFields(t) {
		key := f.owner + "." + f.key
		s := typeSchema(f.typ, defs)
		if d, ok := doc(key); ok {
			s["description"] = d
		}
		if e, ok := schemaEnum[key]; ok {
			if s["type"] == "array" {
				s["items"] = map[string]any{"enum": e}
			} else {
				s["enum"] = e
			}
		}
		for k, v := range schemaExtra[key] {
			s[k] = v
		}
		applyFormats(key, s)
		props[f.key] = s
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if d, ok := doc(schemaName(t)); ok {
		s["description"] = d
	}
	if r, ok := schemaRequired[schemaName(t)]; ok {
		s["required"] = r
	}
	return s
}

func typeSchema(t reflect.Type, defs map[string]any) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem(), defs)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem(), defs)}
	case reflect.Struct:
		if _, ok := defs[schemaName(t)]; !ok {
			defs[schemaName(t)] = nil // break cycles
			defs[schemaName(t)] = objectSchema(t, defs)
		}
		return map[string]any{"$ref": "#/$defs/" + schemaName(t)}
	}
	return map[string]any{}
}

// Reference renders the field reference of the domain file as Markdown
// (one table per type), from the same descriptions as the schema.
func Reference() string {
	var b strings.Builder
	seen := map[string]bool{}
	var walk func(t reflect.Type)
	var order []reflect.Type
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[schemaName(t)] {
			return
		}
		seen[schemaName(t)] = true
		order = append(order, t)
		for _, f := range structFields(t) {
			walk(f.typ)
		}
	}
	walk(reflect.TypeOf(Domain{}))
	for _, t := range order {
		d, _ := doc(schemaName(t))
		fmt.Fprintf(&b, "### %s\n\n%s\n\n", schemaName(t), d)
		b.WriteString("| key | type | required | description |\n|---|---|---|---|\n")
		req := map[string]bool{}
		for _, r := range schemaRequired[schemaName(t)] {
			req[r] = true
		}
		for _, f := range structFields(t) {
			key := f.owner + "." + f.key
			desc, _ := doc(key)
			if e, ok := schemaEnum[key]; ok {
				var vals []string
				for _, v := range e {
					vals = append(vals, fmt.Sprintf("`%v`", v))
				}
				desc += " One of " + strings.Join(vals, ", ") + "."
			}
			r := ""
			if req[f.key] {
				r = "yes"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.key, typeName(f.typ), r, strings.ReplaceAll(desc, "|", `\|`))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice:
		return "list of " + typeName(t.Elem())
	case reflect.Map:
		return "map of " + typeName(t.Elem())
	case reflect.Struct:
		return schemaName(t)
	case reflect.Int:
		return "integer"
	}
	return t.Kind().String()
}

// keysOfDoc is used by tests: every documented key must exist.
func keysOfDoc() []string {
	out := make([]string, 0, len(fieldDoc))
	for k := range fieldDoc {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
