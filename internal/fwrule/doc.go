// Package fwrule is the rule model of segchain's SR-aware firewall
// (End.AN.FW, after SERA): rules in ip6tables/iptables syntax, the
// iptables-save importer, and a pure-Go reference classifier that defines
// what a rule set means. The eBPF data path compiles the same rules into
// lookup tables and is tested differentially against Classify.
//
// Parse/ParseLine read one rule (errors name the offending token) and
// Rule.String prints it back canonically (IPv4 rules start with -4);
// Import reads iptables-save/ip6tables-save output (the filter FORWARD
// chain and its policy; every unsupported line is reported with its
// number). Extract reads a packet once into the Packet the classifier
// sees; Matches and Classify (first match wins) are the semantics, spelled
// out on Matches.
package fwrule
