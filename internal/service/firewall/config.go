package firewall

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/segchain/segchain/internal/fwrule"
)

// Behavior is the behaviour of a kind: firewall service.
const Behavior = "End.AN.FW"

// Firewall policies.
const (
	PolicyAccept = "accept" // unmatched packets go to the next segment (End)
	PolicyDrop   = "drop"
)

// Config is the `firewall:` block of a kind: firewall service (after
// SERA): rules in ip6tables/iptables syntax (internal/fwrule), from the
// file and/or a save file, a default policy and the eval-args table.
type Config struct {
	// Policy applies to packets no rule matches: accept (default; = go-next)
	// or drop. Without it, a rules_file's FORWARD policy applies.
	Policy string `yaml:"policy,omitempty" json:"policy,omitempty"`
	// Rules in ip6tables syntax (iptables syntax after -4), first match wins.
	Rules []string `yaml:"rules,omitempty" json:"rules,omitempty"`
	// RulesFile is ip6tables-save or iptables-save output (relative to the
	// domain file); its filter FORWARD chain comes before Rules.
	RulesFile string `yaml:"rules_file,omitempty" json:"rules_file,omitempty"`
	// Args maps ARGS values of the SID to actions for eval-args rules;
	// default 0 go-next, 1 drop, 2 skip-next, 3 go-last.
	Args map[string]string `yaml:"args,omitempty" json:"args,omitempty"`
}

// Resolved is a firewall service's block resolved: parsed rules (the
// rules_file's first), the policy and the eval-args table.
type Resolved struct {
	Rules  []fwrule.Rule
	Policy fwrule.TargetKind
	Args   map[uint32]fwrule.TargetKind
}

// FieldError is one problem of a firewall block, with the path of the
// offending key (relative to the service: "firewall.rules[2]").
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// Resolve parses the firewall block fw of a service; relative
// rules_file paths resolve against dir. argsBits is the SID format's ARGS
// width. Every problem is returned (as *FieldError values joined).
func Resolve(fw *Config, dir string, argsBits int) (Resolved, error) {
	var errs []error
	bad := func(path, format string, a ...any) {
		errs = append(errs, &FieldError{Path: "firewall" + path, Msg: fmt.Sprintf(format, a...)})
	}
	out := Resolved{Policy: fwrule.Accept}
	if fw == nil {
		return out, nil
	}
	policySet := false
	switch fw.Policy {
	case "":
	case PolicyAccept:
		policySet = true
	case PolicyDrop:
		out.Policy, policySet = fwrule.Drop, true
	default:
		bad(".policy", "unknown policy %q (accept or drop)", fw.Policy)
	}
	if fw.RulesFile != "" {
		path := fw.RulesFile
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		f, err := os.Open(path)
		if err != nil {
			bad(".rules_file", "%v", err)
		} else {
			res, err := fwrule.Import(f)
			f.Close()
			var ie *fwrule.ImportError
			switch {
			case errors.As(err, &ie):
				for _, l := range ie.Lines {
					bad(".rules_file", "%s line %d: %s", fw.RulesFile, l.Line, l.Reason)
				}
			case err != nil:
				bad(".rules_file", "%v", err)
			default:
				out.Rules = append(out.Rules, res.Rules...)
				if res.Policy != nil && !policySet {
					out.Policy = *res.Policy
				}
			}
		}
	}
	for i, line := range fw.Rules {
		r, err := fwrule.ParseLine(line, fwrule.IPv6)
		if err != nil {
			bad(fmt.Sprintf(".rules[%d]", i), "%v", err)
			continue
		}
		out.Rules = append(out.Rules, r)
	}
	if len(out.Rules) > MaxRules {
		errs = append(errs, &FieldError{Path: "firewall.rules", Msg: fmt.Sprintf("%d rules (rules_file's and rules), the data path holds at most %d per firewall SID", len(out.Rules), MaxRules)})
	}
	for i, r := range out.Rules {
		if r.Target.Kind == fwrule.EvalArgs && argsBits == 0 {
			errs = append(errs, &FieldError{Path: "firewall.rules", Msg: fmt.Sprintf("rule %d (%s) uses eval-args but the SID format has no ARGS bits (sid.args_bits: 0)", i+1, r)})
		}
	}
	out.Args = fwrule.DefaultArgs()
	if len(fw.Args) > 0 {
		out.Args = map[uint32]fwrule.TargetKind{}
		keys := make([]string, 0, len(fw.Args))
		for k := range fw.Args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := ".args." + k
			n, err := strconv.ParseUint(k, 0, 32)
			if err != nil {
				bad(p, "not an ARGS value: %q (a number)", k)
				continue
			}
			if argsBits < 32 && n >= 1<<argsBits {
				bad(p, "%d does not fit %d ARGS bits", n, argsBits)
				continue
			}
			kind, err := fwrule.ParseTargetKind(fw.Args[k])
			switch {
			case err != nil:
				bad(p, "%v", err)
				continue
			case kind == fwrule.EvalArgs:
				bad(p, "eval-args cannot be an ARGS action")
				continue
			}
			out.Args[uint32(n)] = kind
		}
	}
	return out, errors.Join(errs...)
}
