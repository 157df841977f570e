// Package fwrule is the rule model of segchain's SR-aware firewall
// (End.AN.FW, after SERA): rules in ip6tables/iptables syntax, the
// iptables-save importer, and a pure-Go reference classifier that defines
// what a rule set means. The eBPF data path compiles the same rules into
// lookup tables and is tested differentially against Classify.
package fwrule
