package firewall

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service"
)

// Name is the kind's name (services.NAME.kind: firewall).
const Name = "firewall"

// Spec is one planned (or observed) SR-aware firewall instance
// (End.AN.FW) in plain data, the Spec of a nodestate.Service of this kind:
// SID is the LOC:FUNCT prefix it serves (every ARGS value), ArgsBits the
// ARGS width, Policy "accept" or "drop", Rules in canonical ip6tables
// syntax (fwrule.Rule.String(), IPv4 rules with -4), Args the eval-args
// table (ARGS value → action name). internal/dataplane/firewall installs it as an
// firewall.Instance (the node half).
type Spec struct {
	SID      netip.Prefix      `json:"-"`
	ArgsBits int               `json:"args_bits"`
	Policy   string            `json:"policy"`
	Rules    []string          `json:"rules,omitempty"`
	Args     map[uint32]string `json:"args,omitempty"`
	// CSIDLBLen/CSIDNFLen: a uSID instance (docs/usid.md); go-next shifts
	// the container.
	CSIDLBLen int `json:"csid_lblen,omitempty"`
	CSIDNFLen int `json:"csid_nflen,omitempty"`
}

// String is the instance on one line (its rules follow in Lines).
func (f Spec) String() string {
	keys := make([]uint32, 0, len(f.Args))
	for k := range f.Args {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	args := make([]string, len(keys))
	for i, k := range keys {
		args[i] = fmt.Sprintf("%d=%s", k, f.Args[k])
	}
	usid := ""
	if f.CSIDNFLen > 0 {
		usid = fmt.Sprintf(" usid %d/%d", f.CSIDLBLen, f.CSIDNFLen)
	}
	return fmt.Sprintf("firewall %s End.AN.FW args_bits %d policy %s args %s rules %d%s",
		f.SID, f.ArgsBits, f.Policy, strings.Join(args, ","), len(f.Rules), usid)
}

// Lines is the instance and its numbered rules, the form plans print.
func (f Spec) Lines() []string {
	out := []string{f.String()}
	for i, r := range f.Rules {
		out = append(out, fmt.Sprintf("  %d: %s", i+1, r))
	}
	return out
}

// Service is the instance as a node's service.
func (f Spec) Service() nodestate.Service {
	b, _ := json.Marshal(f) // strings and numbers: cannot fail
	return nodestate.Service{Kind: Name, SID: f.SID, Spec: b}
}

// SpecOf reads a service of this kind.
func SpecOf(s nodestate.Service) (Spec, error) {
	var f Spec
	if s.Kind != Name {
		return f, fmt.Errorf("service %s is of kind %q, not %s", s.SID, s.Kind, Name)
	}
	if err := json.Unmarshal(s.Spec, &f); err != nil {
		return f, fmt.Errorf("firewall %s: %w", s.SID, err)
	}
	f.SID = s.SID
	return f, nil
}

// SpecFrom is a resolved block as the instance at prefix.
func SpecFrom(prefix netip.Prefix, argsBits int, r Resolved) Spec {
	f := Spec{SID: prefix, ArgsBits: argsBits, Policy: r.Policy.String(), Args: map[uint32]string{}}
	for _, rule := range r.Rules {
		f.Rules = append(f.Rules, rule.String())
	}
	for k, v := range r.Args {
		f.Args[k] = v.String()
	}
	return f
}

// Parse resolves the plain-data instance: its policy, rules and ARGS
// table parsed (the default table when it has none).
func (f Spec) Parse() (Resolved, error) {
	var r Resolved
	var err error
	if r.Policy, err = fwrule.ParseTargetKind(f.Policy); err != nil {
		return Resolved{}, fmt.Errorf("firewall %s: policy: %w", f.SID, err)
	}
	for i, line := range f.Rules {
		rule, err := fwrule.ParseLine(line, fwrule.IPv6)
		if err != nil {
			return Resolved{}, fmt.Errorf("firewall %s: rule %d: %w", f.SID, i+1, err)
		}
		r.Rules = append(r.Rules, rule)
	}
	if len(f.Args) == 0 {
		r.Args = fwrule.DefaultArgs()
		return r, nil
	}
	r.Args = map[uint32]fwrule.TargetKind{}
	for k, v := range f.Args {
		if r.Args[k], err = fwrule.ParseTargetKind(v); err != nil {
			return Resolved{}, fmt.Errorf("firewall %s: args %d: %w", f.SID, k, err)
		}
	}
	return r, nil
}

// Kind is the firewall kind's intent half: the SR-aware firewall
// End.AN.FW, served by internal/dataplane/firewall.
type Kind struct{}

var _ service.Kind = Kind{}

func (Kind) Name() string   { return Name }
func (Kind) Noun() string   { return "a firewall" }
func (Kind) Plural() string { return "firewalls" }

// Block: config declares the `firewall:` block itself (config.Service
// .Firewall, for compatibility) and hands the *Config as Input.Block.
func (Kind) Block() (string, any) { return "", nil }

// MatchesArgs: the firewall serves every ARGS value (eval-args).
func (Kind) MatchesArgs() bool { return true }

func (Kind) Behavior(service.Input) string { return Behavior }

// Validate checks a firewall service: no behaviour of its own, a
// firewall block whose rules, rules file, policy and ARGS table resolve.
func (Kind) Validate(in service.Input) []service.FieldError {
	var out []service.FieldError
	if in.Behavior != "" {
		out = append(out, service.Errorf("behavior", "must be empty for kind %s (it is %s)", Name, Behavior))
	}
	c, _ := in.Block.(*Config)
	if c == nil {
		return append(out, service.Errorf("firewall", "required for kind %s (at least a policy or rules)", Name))
	}
	_, err := Resolve(c, in.Dir, in.ArgsBits)
	for _, e := range unjoin(err) {
		var fe *FieldError
		if errors.As(e, &fe) {
			out = append(out, service.FieldError{Path: fe.Path, Msg: fe.Msg})
		} else {
			out = append(out, service.Errorf("firewall", "%v", e))
		}
	}
	return out
}

func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Plan emits the instance: rules in canonical syntax, the policy and the
// eval-args table.
func (Kind) Plan(in service.Input) (nodestate.Service, error) {
	c, _ := in.Block.(*Config)
	r, err := Resolve(c, in.Dir, in.ArgsBits)
	if err != nil {
		return nodestate.Service{}, fmt.Errorf("services.%s: %w", in.Name, err)
	}
	s := SpecFrom(in.Prefix, in.ArgsBits, r)
	s.CSIDLBLen, s.CSIDNFLen = in.CSIDLBLen, in.CSIDNFLen
	return s.Service(), nil
}

// Lines is the instance and its numbered rules, as given.
func (Kind) Lines(s nodestate.Service) []string {
	f, err := SpecOf(s)
	if err != nil {
		return []string{"firewall " + s.SID.String() + " " + string(s.Spec)}
	}
	return f.Lines()
}

// Canonical is the instance's text with its rules re-parsed and printed
// and the default ARGS table made explicit, so equal instances spelled
// differently compare equal.
func (k Kind) Canonical(s nodestate.Service) string {
	f, err := SpecOf(s)
	if err != nil {
		return strings.Join(k.Lines(s), "\n")
	}
	r, err := f.Parse()
	if err != nil {
		return strings.Join(f.Lines(), "\n")
	}
	c := SpecFrom(f.SID.Masked(), f.ArgsBits, r)
	c.CSIDLBLen, c.CSIDNFLen = f.CSIDLBLen, f.CSIDNFLen
	return strings.Join(c.Lines(), "\n")
}

func (Kind) ServiceBehavior(nodestate.Service) string { return Behavior }

// Services is the instances as a node's services.
func Services(fs ...Spec) []nodestate.Service { return service.Encode(fs...) }

// SpecsOf reads the services of this kind in list, in order.
func SpecsOf(list []nodestate.Service) ([]Spec, error) { return service.Decode(list, Name, SpecOf) }

// Limits of the firewall's data path (FW_MAX_RULES and FW_MAX_INSTANCES
// of bpf/fw_tc.bpf.c; internal/dataplane/firewall's TestIntentLimitsMatchProgram fails on
// drift). The shared pools (bitmaps, value blocks) depend on the rules
// compiled together: the agent checks them before apply (Check).
const (
	MaxRules     = 4096 // rules per firewall SID
	MaxInstances = 16   // firewall SIDs per node
)

// PerNode implements service.Limited.
func (Kind) PerNode() int { return MaxInstances }

// HeaderMax implements service.Limited: the firewall reads headers in
// place, it keeps none.
func (Kind) HeaderMax(string) int { return 0 }
