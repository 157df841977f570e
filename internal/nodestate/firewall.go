package nodestate

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Firewall is one SR-aware firewall instance (End.AN.FW) in plain data:
// SID is the LOC:FUNCT prefix it serves (every ARGS value), ArgsBits the
// ARGS width, Policy "accept" or "drop", Rules in canonical ip6tables
// syntax (fwrule.Rule.String(), IPv4 rules with -4), Args the eval-args
// table (ARGS value → action name).
type Firewall struct {
	SID      netip.Prefix      `json:"sid"`
	ArgsBits int               `json:"args_bits"`
	Policy   string            `json:"policy"`
	Rules    []string          `json:"rules,omitempty"`
	Args     map[uint32]string `json:"args,omitempty"`
}

// String is the instance on one line (its rules follow in Lines).
func (f Firewall) String() string {
	keys := make([]uint32, 0, len(f.Args))
	for k := range f.Args {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	args := make([]string, len(keys))
	for i, k := range keys {
		args[i] = fmt.Sprintf("%d=%s", k, f.Args[k])
	}
	return fmt.Sprintf("firewall %s End.AN.FW args_bits %d policy %s args %s rules %d",
		f.SID, f.ArgsBits, f.Policy, strings.Join(args, ","), len(f.Rules))
}

// Lines is the instance and its numbered rules, the canonical form diffs
// compare and plans print.
func (f Firewall) Lines() []string {
	out := []string{f.String()}
	for i, r := range f.Rules {
		out = append(out, fmt.Sprintf("  %d: %s", i+1, r))
	}
	return out
}
