// Package firewall is the data path of segchain's SR-aware firewall (End.AN.FW,
// after SERA): a compiler from fwrule rules to per-field lookup tables and
// bitmaps (classification cost independent of the rule count), the tc eBPF
// program that uses them, pinned per network namespace, and the API the
// CLI, the `segchain sid` extension and the agent call (Apply, Remove, List).
package firewall
