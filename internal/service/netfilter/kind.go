package netfilter

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service"
)

// Name is the kind's name (services.NAME.kind: netfilter).
const Name = "netfilter"

// Behavior is the behaviour of a kind: netfilter service.
const Behavior = "End.AN.NF"

// Config is the `netfilter:` block of a kind: netfilter service.
type Config struct {
	// Args is how many rightmost bits of the active SID become the packet
	// mark while the rules run (0: the mark is left alone); default the
	// domain's sid.args_bits, at most 32.
	Args *int `yaml:"args,omitempty" json:"args,omitempty"`
	// Ruleset is an nft -f file (relative to the domain file) that apply
	// loads into the node and destroy removes: it must declare its tables
	// (table FAMILY NAME { ... }) and must not flush the whole rule set.
	Ruleset string `yaml:"ruleset,omitempty" json:"ruleset,omitempty"`
}

// FieldDocs implements service.Documented.
func (*Config) FieldDocs() map[string]string {
	return map[string]string{
		"Netfilter":         "End.AN.NF: the node's netfilter rule set (nftables, iptables, conntrack, NAT) on the inner packet, the SID's ARGS as the mark, then End (docs/netfilter.md).",
		"Netfilter.args":    "Rightmost bits of the active SID copied into the packet mark while the rules run (0: mark untouched). Default sid.args_bits; at most 32 and at most sid.args_bits.",
		"Netfilter.ruleset": "nft -f file (relative to the domain file) loaded into the node on apply and removed on destroy; it must declare its tables and must not contain flush ruleset.",
		"Service.netfilter": "netfilter only, optional: End.AN.NF's ARGS width and rule set file.",
	}
}

// Spec is one planned (or observed) End.AN.NF instance: SID the LOC:FUNCT
// prefix (every ARGS value), ArgsBits the bits copied into the mark,
// Ruleset the nft text loaded with it and Tables the tables it declares
// ("inet filter").
type Spec struct {
	SID      netip.Prefix `json:"-"`
	ArgsBits int          `json:"args_bits"`
	Ruleset  string       `json:"ruleset,omitempty"`
	Tables   []string     `json:"tables,omitempty"`
	// CSIDLBLen/CSIDNFLen: a uSID instance (docs/usid.md): End shifts
	// the container. 0 for a full SID.
	CSIDLBLen int `json:"csid_lblen,omitempty"`
	CSIDNFLen int `json:"csid_nflen,omitempty"`
}

// String is the instance on one line.
func (s Spec) String() string {
	out := fmt.Sprintf("netfilter %s End.AN.NF args %d", s.SID, s.ArgsBits)
	if s.CSIDNFLen > 0 {
		out += fmt.Sprintf(" usid %d/%d", s.CSIDLBLen, s.CSIDNFLen)
	}
	if s.Ruleset != "" {
		sum := sha256.Sum256([]byte(s.Ruleset))
		out += fmt.Sprintf(" ruleset %s tables %s", hex.EncodeToString(sum[:6]), strings.Join(s.Tables, ","))
	}
	return out
}

// Service is the instance as a node's service.
func (s Spec) Service() nodestate.Service {
	b, _ := json.Marshal(s) // strings and numbers: cannot fail
	return nodestate.Service{Kind: Name, SID: s.SID, Spec: b}
}

// SpecOf reads a service of this kind.
func SpecOf(s nodestate.Service) (Spec, error) {
	var sp Spec
	if s.Kind != Name {
		return sp, fmt.Errorf("service %s is of kind %q, not %s", s.SID, s.Kind, Name)
	}
	if err := json.Unmarshal(s.Spec, &sp); err != nil {
		return sp, fmt.Errorf("netfilter %s: %w", s.SID, err)
	}
	sp.SID = s.SID
	return sp, nil
}

var (
	tableRE = regexp.MustCompile(`(?m)^\s*(?:add\s+|create\s+)?table\s+(?:(ip|ip6|inet|arp|bridge|netdev)\s+)?([A-Za-z_][A-Za-z0-9_.-]*)`)
	flushRE = regexp.MustCompile(`(?m)^\s*flush\s+ruleset\b`)
)

// Tables returns the tables an nft rule set declares ("FAMILY NAME", the
// family ip when omitted, as nft does), or an error when it declares none
// or flushes the whole rule set.
func Tables(ruleset string) ([]string, error) {
	if flushRE.MatchString(ruleset) {
		return nil, fmt.Errorf("flush ruleset would remove every table of the node, not only this service's")
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range tableRE.FindAllStringSubmatch(ruleset, -1) {
		fam := m[1]
		if fam == "" {
			fam = "ip"
		}
		t := fam + " " + m[2]
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("declares no table (table FAMILY NAME { ... })")
	}
	return out, nil
}

// Kind is the netfilter kind's intent half.
type Kind struct{}

var _ service.Kind = Kind{}

func (Kind) Name() string                             { return Name }
func (Kind) Noun() string                             { return "a netfilter service" }
func (Kind) Plural() string                           { return "netfilter services" }
func (Kind) Block() (string, any)                     { return "netfilter", &Config{} }
func (Kind) MatchesArgs() bool                        { return true }
func (Kind) Behavior(service.Input) string            { return Behavior }
func (Kind) ServiceBehavior(nodestate.Service) string { return Behavior }

func block(in service.Input) *Config {
	c, _ := in.Block.(*Config)
	if c == nil {
		c = &Config{}
	}
	return c
}

func argsBits(in service.Input) int {
	if c := block(in); c.Args != nil {
		return *c.Args
	}
	return min(in.ArgsBits, 32)
}

func readRuleset(in service.Input) (string, []string, error) {
	c := block(in)
	if c.Ruleset == "" {
		return "", nil, nil
	}
	p := c.Ruleset
	if !filepath.IsAbs(p) {
		p = filepath.Join(in.Dir, p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", nil, err
	}
	ts, err := Tables(string(b))
	return string(b), ts, err
}

// Validate checks the ARGS width and the rule set file.
func (Kind) Validate(in service.Input) []service.FieldError {
	var errs []service.FieldError
	c := block(in)
	if c.Args != nil && (*c.Args < 0 || *c.Args > 32 || *c.Args > in.ArgsBits) {
		errs = append(errs, service.Errorf("netfilter.args", "%d: want 0..%d (at most 32 and sid.args_bits)", *c.Args, min(32, in.ArgsBits)))
	}
	if _, _, err := readRuleset(in); err != nil {
		errs = append(errs, service.Errorf("netfilter.ruleset", "%s: %v", c.Ruleset, err))
	}
	return errs
}

// Plan emits the instance with the rule set's text.
func (Kind) Plan(in service.Input) (nodestate.Service, error) {
	text, tables, err := readRuleset(in)
	if err != nil {
		return nodestate.Service{}, fmt.Errorf("services.%s.netfilter.ruleset: %w", in.Name, err)
	}
	return Spec{SID: in.Prefix, ArgsBits: argsBits(in), Ruleset: text, Tables: tables,
		CSIDLBLen: in.CSIDLBLen, CSIDNFLen: in.CSIDNFLen}.Service(), nil
}

// Lines is the instance on one line.
func (Kind) Lines(s nodestate.Service) []string {
	sp, err := SpecOf(s)
	if err != nil {
		return []string{"netfilter " + s.SID.String() + " " + string(s.Spec)}
	}
	return []string{sp.String()}
}

// Canonical compares instances by SID, ARGS width and the rule set's text.
func (k Kind) Canonical(s nodestate.Service) string {
	sp, err := SpecOf(s)
	if err != nil {
		return k.Lines(s)[0]
	}
	sp.SID = sp.SID.Masked()
	return sp.String() + "\n" + sp.Ruleset
}

// Limits of End.AN.NF's data path (NF_MAX_SIDS and NF_HDR_MAX of
// bpf/nf_tc.bpf.c; internal/dataplane/netfilter's TestIntentLimitsMatchProgram
// fails on drift).
const (
	MaxSIDs   = 64  // End.AN.NF SIDs per node
	MaxHeader = 512 // outer IPv6 + extension headers + SRH kept per packet
)

// PerNode implements service.Limited.
func (Kind) PerNode() int { return MaxSIDs }

// HeaderMax implements service.Limited: the outer headers are kept while
// netfilter sees the inner packet, and put back after.
func (Kind) HeaderMax(string) int { return MaxHeader }
