package userspace

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service"
)

// Name is the kind's name (services.NAME.kind: userspace).
const Name = "userspace"

// Behaviours a userspace service is planned with.
const (
	BehaviorService = "userspace" // an SR-aware service (srv6svc Serve/ServeBatch)
	BehaviorASM     = "End.ASM"   // the shared-memory proxy (srv6svc ServeASM)
)

// DefaultWait is how long apply waits for the process by default.
const DefaultWait = 10 * time.Second

// Config is the `userspace:` block of a kind: userspace service.
type Config struct {
	// Name is the binding name the process binds with (srv6svc.Config.Name,
	// the example services' --name); default: the service's name.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// OnFailure is what happens to the SID's packets while no process
	// serves it: drop (default) or bypass (the kernel applies End).
	OnFailure string `yaml:"on_failure,omitempty" json:"on_failure,omitempty"`
	// ASM: the process serves the SID as End.ASM (an SR-unaware function).
	ASM bool `yaml:"asm,omitempty" json:"asm,omitempty"`
	// Wait is how long apply waits for the process to bind the SID (a Go
	// duration, default 10s); after it, apply fails naming the SID.
	Wait string `yaml:"wait,omitempty" json:"wait,omitempty"`
}

// FieldDocs describes the block for the schema and the reference.
func (Config) FieldDocs() map[string]string {
	return map[string]string{
		"Userspace":            "A SID served by a userspace process through pkg/srv6svc (AF_XDP): an SR-aware service, or an SR-unaware function behind End.ASM. The process binds the planned SID (LOC:FUNCT prefix; ARGS are its low bits); apply waits for it.",
		"Userspace.name":       "binding name the process uses (srv6svc.Config.Name, --name of the example services); default: the service's name",
		"Userspace.on_failure": "drop (default) or bypass: what happens to the SID's packets while no process serves it (bypass: the kernel applies End)",
		"Userspace.asm":        "the process serves the SID as End.ASM, the shared-memory SR proxy",
		"Userspace.wait":       "how long apply waits for the process to bind the SID (Go duration, default 10s)",
		"Service.userspace":    "the userspace service (kind: userspace)",
	}
}

// Spec is a planned or observed userspace service: the binding apply
// waits for. SID is the prefix the process binds.
type Spec struct {
	Name      string `json:"name"`
	OnFailure string `json:"on_failure"`
	ASM       bool   `json:"asm,omitempty"`
	// USID is the C-SID format of a uSID ("32/16", srv6svc.CSIDFormat's
	// String): the process must bind the SID as a uSID of it (--usid).
	USID string `json:"usid,omitempty"`
	// WaitMS is apply's wait, not state: Canonical ignores it.
	WaitMS int64 `json:"wait_ms,omitempty"`
	// StaleBypassRoute is observed, never planned: an on-failure bypass
	// End route left for the SID while its binding drops (a process that
	// bound it before with bypass). Apply removes it.
	StaleBypassRoute bool `json:"stale_bypass_route,omitempty"`
}

// SpecOf reads a service of this kind.
func SpecOf(s nodestate.Service) (Spec, error) {
	var sp Spec
	if s.Kind != Name {
		return sp, fmt.Errorf("service %s is of kind %q, not %s", s.SID, s.Kind, Name)
	}
	if err := json.Unmarshal(s.Spec, &sp); err != nil {
		return sp, fmt.Errorf("userspace %s: %w", s.SID, err)
	}
	return sp, nil
}

// Kind is the userspace kind's intent half.
type Kind struct{}

var _ service.Kind = Kind{}

func (Kind) Name() string { return Name }

// RefuseAfterSameNode implements service.SameNodeRefuser. The process's
// XDP program sees only frames arriving on the interfaces the process
// attached it to, never a packet its node has just processed (the plan
// would route that through the service loop, whose route also takes the
// place of the process's on-failure bypass route).
func (Kind) RefuseAfterSameNode() string {
	return "the process's XDP program only sees packets arriving on the interfaces it attached to, never one its node has just processed"
}
func (Kind) Noun() string         { return "a userspace service" }
func (Kind) Plural() string       { return "userspace services" }
func (Kind) Block() (string, any) { return "userspace", &Config{} }
func (Kind) MatchesArgs() bool    { return true }
func (Kind) Behavior(in service.Input) string {
	if c, _ := in.Block.(*Config); c != nil && c.ASM {
		return BehaviorASM
	}
	return BehaviorService
}

// Validate checks the block: every problem with its path.
func (Kind) Validate(in service.Input) []service.FieldError {
	c, _ := in.Block.(*Config)
	if c == nil {
		return nil
	}
	var errs []service.FieldError
	if len(c.Name) > 31 {
		errs = append(errs, service.Errorf("userspace.name", "%q: at most 31 bytes", c.Name))
	}
	switch c.OnFailure {
	case "", "drop", "bypass":
	default:
		errs = append(errs, service.Errorf("userspace.on_failure", "%q: want drop or bypass", c.OnFailure))
	}
	if c.Wait != "" {
		if d, err := time.ParseDuration(c.Wait); err != nil || d < 0 {
			errs = append(errs, service.Errorf("userspace.wait", "%q: want a duration such as 10s", c.Wait))
		}
	}
	return errs
}

// Plan emits the binding the process must make.
func (Kind) Plan(in service.Input) (nodestate.Service, error) {
	sp := Spec{Name: in.Name, OnFailure: "drop", WaitMS: DefaultWait.Milliseconds()}
	if c, _ := in.Block.(*Config); c != nil {
		if c.Name != "" {
			sp.Name = c.Name
		}
		if c.OnFailure != "" {
			sp.OnFailure = c.OnFailure
		}
		sp.ASM = c.ASM
		if c.Wait != "" {
			d, err := time.ParseDuration(c.Wait)
			if err != nil {
				return nodestate.Service{}, fmt.Errorf("services.%s.userspace.wait: %w", in.Name, err)
			}
			sp.WaitMS = d.Milliseconds()
		}
	}
	if in.CSIDNFLen > 0 {
		sp.USID = fmt.Sprintf("%d/%d", in.CSIDLBLen, in.CSIDNFLen)
	}
	if len(sp.Name) > 31 {
		return nodestate.Service{}, fmt.Errorf("services.%s: binding name %q longer than 31 bytes: set userspace.name", in.Name, sp.Name)
	}
	b, _ := json.Marshal(sp)
	return nodestate.Service{Kind: Name, SID: in.Prefix, Spec: b}, nil
}

func line(s nodestate.Service, sp Spec) string {
	l := fmt.Sprintf("userspace %s %s name %s on-failure %s", s.SID, behavior(sp), sp.Name, sp.OnFailure)
	if sp.USID != "" {
		l += " usid " + sp.USID
	}
	if sp.StaleBypassRoute {
		l += " (stale bypass End route)"
	}
	return l
}

func behavior(sp Spec) string {
	if sp.ASM {
		return BehaviorASM
	}
	return BehaviorService
}

// Lines is the binding on one line.
func (Kind) Lines(s nodestate.Service) []string {
	sp, err := SpecOf(s)
	if err != nil {
		return []string{"userspace " + s.SID.String() + " " + string(s.Spec)}
	}
	return []string{line(s, sp)}
}

// Canonical is the binding without apply's wait.
func (k Kind) Canonical(s nodestate.Service) string {
	sp, err := SpecOf(s)
	if err != nil {
		return strings.Join(k.Lines(s), "\n")
	}
	s.SID = s.SID.Masked()
	return line(s, sp)
}

func (Kind) ServiceBehavior(s nodestate.Service) string {
	sp, _ := SpecOf(s)
	return behavior(sp)
}

// MaxSIDs is how many userspace SIDs a node holds: the size of the
// steering program's SID map (SVC_MAX_SIDS of bpf/srv6svc_xdp.bpf.c;
// pkg/srv6svc's TestIntentLimitsMatchProgram fails on drift). The
// bindings (processes, by name) are bounded too, 64 a node
// (srv6svc.MaxServices): the agent checks those before apply.
const MaxSIDs = 1024

// PerNode implements service.Limited.
func (Kind) PerNode() int { return MaxSIDs }

// HeaderMax implements service.Limited: the packet stays in the frame.
func (Kind) HeaderMax(string) int { return 0 }
