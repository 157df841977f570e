package config

import (
	"strings"
	"unicode"
)

// Patterns of the domain file's string values that JSON Schema can check,
// so that an editor flags most of what validate does. They are RE2 and
// ECMA-262 compatible (no lookaround), since editors use the latter.
const (
	v6AddrRE   = `[0-9A-Fa-f]{0,4}(:[0-9A-Fa-f]{0,4}){2,7}(:[0-9]{1,3}(\.[0-9]{1,3}){3})?`
	v4AddrRE   = `[0-9]{1,3}(\.[0-9]{1,3}){3}`
	v6LenRE    = `/(12[0-8]|1[01][0-9]|[1-9]?[0-9])`
	v4LenRE    = `/(3[0-2]|[12]?[0-9])`
	nodeRE     = `[a-z0-9-]{1,10}`
	ifaceRE    = `[A-Za-z0-9._-]{1,15}`
	portRE1    = `([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])`
	numberRE   = `(0x[0-9a-fA-F]+|[0-9]+)`
	protoNames = `tcp|udp|icmp|ipv6-icmp|icmpv6|sctp`
)

func anchored(re string) map[string]any { return map[string]any{"pattern": "^" + re + "$"} }

func withFormat(format, re string) map[string]any {
	m := anchored(re)
	m["format"] = format
	return m
}

// caseless turns a behaviour name into a pattern that matches it in any
// case ("End.X" → "[Ee][Nn][Dd]\.[Xx]"), as validate accepts it.
func caseless(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case unicode.IsLetter(r):
			b.WriteString("[" + string(unicode.ToUpper(r)) + string(unicode.ToLower(r)) + "]")
		case r == '.':
			b.WriteString(`\.`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// caselessAlts makes every alternative of "a|b|c" match in any case.
func caselessAlts(alts string) string {
	parts := strings.Split(alts, "|")
	for i, p := range parts {
		parts[i] = caseless(p)
	}
	return strings.Join(parts, "|")
}

func behaviorPattern(names []string) map[string]any {
	alts := make([]string, len(names))
	for i, n := range names {
		alts[i] = caseless(n)
	}
	// The enum (iproute2 spelling) stays in the reference; the schema takes
	// any case, as validate does.
	return map[string]any{"pattern": "^(" + strings.Join(alts, "|") + ")$", "enum": nil}
}

// schemaFormats adds formats and patterns per field (applied after
// schemaEnum and schemaExtra; a nil value removes a keyword).
var schemaFormats = map[string]map[string]any{
	"Node.locator":          anchored(v6AddrRE + v6LenRE),
	"Node.sysctls":          {"propertyNames": map[string]any{"pattern": `^net\.[A-Za-z0-9._/-]+$`}},
	"Link.ipv6":             anchored(v6AddrRE + v6LenRE),
	"Link.ipv4":             anchored(v4AddrRE + v4LenRE),
	"Link.endpoints":        {"items": anchored(nodeRE + ":" + ifaceRE)},
	"Service.node":          anchored(nodeRE),
	"Service.behavior":      behaviorPattern(Behaviors),
	"Service.sid":           withFormat("ipv6", v6AddrRE),
	"Service.function":      anchored(numberRE),
	"Service.sf_nh6":        withFormat("ipv6", v6AddrRE),
	"Service.sf_nh4":        withFormat("ipv4", v4AddrRE),
	"Service.sf_mac":        anchored(`(([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}|([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4})`),
	"Service.iface_out":     anchored(ifaceRE),
	"Service.iface_in":      anchored(ifaceRE),
	"Params.nh6":            withFormat("ipv6", v6AddrRE),
	"Params.nh4":            withFormat("ipv4", v4AddrRE),
	"Params.oif":            anchored(ifaceRE),
	"Params.iif":            anchored(ifaceRE),
	"Chain.ingress":         anchored(nodeRE),
	"Match.src":             anchored("(" + v6AddrRE + v6LenRE + "|" + v4AddrRE + v4LenRE + ")"),
	"Match.dst":             anchored("(" + v6AddrRE + v6LenRE + "|" + v4AddrRE + v4LenRE + ")"),
	"Match.sport":           anchored(portRE1 + "(-" + portRE1 + ")?"),
	"Match.dport":           anchored(portRE1 + "(-" + portRE1 + ")?"),
	"Match.proto":           anchored("(" + caselessAlts(protoNames) + "|[0-9]{1,3})"),
	"Match.iif":             anchored(ifaceRE),
	"Egress.node":           anchored(nodeRE),
	"Egress.behavior":       behaviorPattern(EgressBehaviors),
	"Egress.sid":            withFormat("ipv6", v6AddrRE),
	"Security.require_hmac": {"items": anchored(nodeRE)},
	"Firewall.rules_file":   {"minLength": 1},
	"HMACKey.secret_file":   {"minLength": 1},
	"Domain.name":           {"minLength": 1},
	"Chain.services":        {"uniqueItems": true},
	"Params.segs":           {"minItems": 1},
}

// applyFormats merges schemaFormats[key] into a field's schema s.
func applyFormats(key string, s map[string]any) {
	for k, v := range schemaFormats[key] {
		if v == nil {
			delete(s, k)
			continue
		}
		if k == "items" {
			if it, ok := s["items"].(map[string]any); ok {
				for ik, iv := range v.(map[string]any) {
					it[ik] = iv
				}
				continue
			}
		}
		s[k] = v
	}
}
