package fwrule

import "strconv"

// Protocol numbers the rule language names.
const (
	ProtoICMP    = 1
	ProtoTCP     = 6
	ProtoUDP     = 17
	ProtoIPv6    = 41
	ProtoIPv4    = 4
	ProtoICMPv6  = 58
	ProtoSCTP    = 132
	ProtoUDPLite = 136
)

// protoNames maps the protocol names iptables accepts (from
// /etc/protocols and xtables' built-in table) to numbers.
var protoNames = map[string]uint8{
	"icmp": 1, "igmp": 2, "ipencap": 4, "ipip": 4, "tcp": 6, "egp": 8, "udp": 17,
	"ipv6": 41, "ipv6-route": 43, "ipv6-frag": 44, "rsvp": 46, "gre": 47,
	"esp": 50, "ah": 51, "ipv6-icmp": 58, "icmpv6": 58, "ipv6-nonxt": 59,
	"ipv6-opts": 60, "ospf": 89, "pim": 103, "vrrp": 112, "l2tp": 115,
	"sctp": 132, "mh": 135, "udplite": 136, "mpls-in-ip": 137,
}

// protoName is the spelling ip6tables-save uses for a protocol number.
func protoName(p uint8) string {
	switch p {
	case 1:
		return "icmp"
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 47:
		return "gre"
	case 50:
		return "esp"
	case 51:
		return "ah"
	case 58:
		return "ipv6-icmp"
	case 132:
		return "sctp"
	case 136:
		return "udplite"
	}
	return strconv.Itoa(int(p))
}

// hasPorts reports whether protocol p carries 16-bit source and destination
// ports in its first four bytes (the protocols iptables' port matches serve).
func hasPorts(p uint8) bool {
	return p == ProtoTCP || p == ProtoUDP || p == ProtoSCTP || p == ProtoUDPLite
}

type icmpName struct {
	name    string
	typ     uint8
	code    uint8
	anyCode bool
}

// icmpv6Names is libip6t_icmp6's table of --icmpv6-type names.
var icmpv6Names = []icmpName{
	{"destination-unreachable", 1, 0, true},
	{"no-route", 1, 0, false},
	{"communication-prohibited", 1, 1, false},
	{"beyond-scope", 1, 2, false},
	{"address-unreachable", 1, 3, false},
	{"port-unreachable", 1, 4, false},
	{"failed-policy", 1, 5, false},
	{"reject-route", 1, 6, false},
	{"packet-too-big", 2, 0, true},
	{"time-exceeded", 3, 0, true},
	{"ttl-exceeded", 3, 0, true},
	{"ttl-zero-during-transit", 3, 0, false},
	{"ttl-zero-during-reassembly", 3, 1, false},
	{"parameter-problem", 4, 0, true},
	{"bad-header", 4, 0, false},
	{"unknown-header-type", 4, 1, false},
	{"unknown-option", 4, 2, false},
	{"echo-request", 128, 0, true},
	{"ping", 128, 0, true},
	{"echo-reply", 129, 0, true},
	{"pong", 129, 0, true},
	{"mld-listener-query", 130, 0, true},
	{"mld-listener-report", 131, 0, true},
	{"mld-listener-done", 132, 0, true},
	{"mld-listener-reduction", 132, 0, true},
	{"router-solicitation", 133, 0, true},
	{"router-advertisement", 134, 0, true},
	{"neighbour-solicitation", 135, 0, true},
	{"neighbor-solicitation", 135, 0, true},
	{"neighbour-advertisement", 136, 0, true},
	{"neighbor-advertisement", 136, 0, true},
	{"redirect", 137, 0, true},
}

// icmpNames is libipt_icmp's table of --icmp-type names.
var icmpNames = []icmpName{
	{"any", 255, 0, true},
	{"echo-reply", 0, 0, true},
	{"pong", 0, 0, true},
	{"destination-unreachable", 3, 0, true},
	{"network-unreachable", 3, 0, false},
	{"host-unreachable", 3, 1, false},
	{"protocol-unreachable", 3, 2, false},
	{"port-unreachable", 3, 3, false},
	{"fragmentation-needed", 3, 4, false},
	{"source-route-failed", 3, 5, false},
	{"network-unknown", 3, 6, false},
	{"host-unknown", 3, 7, false},
	{"network-prohibited", 3, 9, false},
	{"host-prohibited", 3, 10, false},
	{"TOS-network-unreachable", 3, 11, false},
	{"TOS-host-unreachable", 3, 12, false},
	{"communication-prohibited", 3, 13, false},
	{"host-precedence-violation", 3, 14, false},
	{"precedence-cutoff", 3, 15, false},
	{"source-quench", 4, 0, true},
	{"redirect", 5, 0, true},
	{"network-redirect", 5, 0, false},
	{"host-redirect", 5, 1, false},
	{"TOS-network-redirect", 5, 2, false},
	{"TOS-host-redirect", 5, 3, false},
	{"echo-request", 8, 0, true},
	{"ping", 8, 0, true},
	{"router-advertisement", 9, 0, true},
	{"router-solicitation", 10, 0, true},
	{"time-exceeded", 11, 0, true},
	{"ttl-exceeded", 11, 0, true},
	{"ttl-zero-during-transit", 11, 0, false},
	{"ttl-zero-during-reassembly", 11, 1, false},
	{"parameter-problem", 12, 0, true},
	{"ip-header-bad", 12, 0, false},
	{"required-option-missing", 12, 1, false},
	{"timestamp-request", 13, 0, true},
	{"timestamp-reply", 14, 0, true},
	{"address-mask-request", 17, 0, true},
	{"address-mask-reply", 18, 0, true},
}

// rejectWith lists the --reject-with values per family, canonical spelling
// first, with the aliases iptables accepts.
var rejectWith6 = map[string]string{
	"icmp6-no-route": "icmp6-no-route", "no-route": "icmp6-no-route",
	"icmp6-adm-prohibited": "icmp6-adm-prohibited", "adm-prohibited": "icmp6-adm-prohibited",
	"icmp6-addr-unreachable": "icmp6-addr-unreachable", "addr-unreach": "icmp6-addr-unreachable",
	"icmp6-port-unreachable": "icmp6-port-unreachable", "port-unreach": "icmp6-port-unreachable",
	"icmp6-policy-fail": "icmp6-policy-fail", "policy-fail": "icmp6-policy-fail",
	"icmp6-reject-route": "icmp6-reject-route", "reject-route": "icmp6-reject-route",
	"tcp-reset": "tcp-reset",
}

var rejectWith4 = map[string]string{
	"icmp-net-unreachable": "icmp-net-unreachable", "net-unreach": "icmp-net-unreachable",
	"icmp-host-unreachable": "icmp-host-unreachable", "host-unreach": "icmp-host-unreachable",
	"icmp-proto-unreachable": "icmp-proto-unreachable", "proto-unreach": "icmp-proto-unreachable",
	"icmp-port-unreachable": "icmp-port-unreachable", "port-unreach": "icmp-port-unreachable",
	"icmp-net-prohibited": "icmp-net-prohibited", "net-prohib": "icmp-net-prohibited",
	"icmp-host-prohibited": "icmp-host-prohibited", "host-prohib": "icmp-host-prohibited",
	"icmp-admin-prohibited": "icmp-admin-prohibited", "admin-prohib": "icmp-admin-prohibited",
	"tcp-reset": "tcp-reset",
}

// DefaultRejectWith is the ICMP error a REJECT sends when the rule names
// none (what ip6tables/iptables fill in).
func DefaultRejectWith(fam Family) string {
	if fam == IPv4 {
		return "icmp-port-unreachable"
	}
	return "icmp6-port-unreachable"
}

// RejectICMP is the ICMP type and code a REJECT with the given
// --reject-with value sends (ok false for tcp-reset or an unknown value).
func RejectICMP(with string) (typ, code uint8, ok bool) {
	switch with {
	case "icmp6-no-route":
		return 1, 0, true
	case "icmp6-adm-prohibited":
		return 1, 1, true
	case "icmp6-addr-unreachable":
		return 1, 3, true
	case "icmp6-port-unreachable":
		return 1, 4, true
	case "icmp6-policy-fail":
		return 1, 5, true
	case "icmp6-reject-route":
		return 1, 6, true
	case "icmp-net-unreachable":
		return 3, 0, true
	case "icmp-host-unreachable":
		return 3, 1, true
	case "icmp-proto-unreachable":
		return 3, 2, true
	case "icmp-port-unreachable":
		return 3, 3, true
	case "icmp-net-prohibited":
		return 3, 9, true
	case "icmp-host-prohibited":
		return 3, 10, true
	case "icmp-admin-prohibited":
		return 3, 13, true
	}
	return 0, 0, false
}

// seg6Actions maps --seg6-action values (with or without the seg6- prefix
// of the SERA paper's listing) to targets.
var seg6Actions = map[string]TargetKind{
	"go-next": GoNext, "skip-next": SkipNext, "go-last": GoLast, "eval-args": EvalArgs,
	"seg6-go-next": GoNext, "seg6-skip-next": SkipNext, "seg6-go-last": GoLast, "seg6-eval-args": EvalArgs,
}
