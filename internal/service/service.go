package service

import (
	"fmt"
	"net/netip"

	"github.com/segchain/segchain/internal/nodestate"
)

// Kind is the intent half of a service kind: everything config, plan,
// controller and the agent protocol know of it. It is pure data: a kind's
// intent half must not link eBPF or netlink (test/layering checks). Its
// node half (observe, apply, remove, repair, counters) is
// local.ServiceKind, implemented by the kind's data-path package.
type Kind interface {
	// Name is the kind as the domain file spells it (services.NAME.kind)
	// and as nodestate.Service.Kind carries it.
	Name() string
	// Plural names the kind's services in plan output ("firewalls"),
	// Noun one of them in messages ("a firewall").
	Plural() string
	Noun() string
	// Block returns the YAML key of the kind's configuration block in a
	// service ("firewall", "netfilter") and a pointer to a zero value of
	// its Go type. config decodes the block strictly into a new value of
	// that type (yaml tags: unknown keys are errors with their path),
	// derives its JSON Schema from it (json tags) and hands it to Validate
	// and Plan as Input.Block. key "" means the kind has no block.
	Block() (key string, zero any)
	// MatchesArgs says whether the kind's data path serves the SID's
	// whole LOC:FUNCT prefix (every ARGS value, as End.AN.FW's eval-args
	// needs) rather than the exact /128.
	MatchesArgs() bool
	// Behavior is the behaviour name a service of the kind is planned
	// with ("End.AN.FW"); in names the service's `behavior:` as written.
	Behavior(in Input) string
	// Validate checks a service of the kind: every problem, with its path
	// relative to the service ("firewall.rules[2]").
	Validate(in Input) []FieldError
	// Plan turns a valid service into its node's desired state.
	Plan(in Input) (nodestate.Service, error)
	// Lines renders a planned or observed service as plan prints it:
	// Lines[0] on one line ("firewall fc00:2::f1:0/112 End.AN.FW ..."),
	// the rest details indented under it.
	Lines(s nodestate.Service) []string
	// Canonical is the text two services compare by: equal however they
	// are spelled. It never fails: what does not parse compares as given.
	Canonical(s nodestate.Service) string
	// ServiceBehavior is a planned or observed service's behaviour name
	// (End.AD, End.AN.FW): conflicts and status name it.
	ServiceBehavior(s nodestate.Service) string
}

// Limited is implemented by a kind whose data path bounds what it holds;
// config refuses a domain beyond the bounds, so that validate catches
// what apply would refuse. Each bound is a constant of the kind's eBPF
// program, checked against it by a test in the kind's data-path package.
type Limited interface {
	// PerNode is how many services of the kind one node holds (0: no
	// bound).
	PerNode() int
	// HeaderMax is the bytes of outer headers (IPv6, extension headers,
	// SRH and its TLVs) the data path of a SID of the kind with behaviour
	// behavior (Kind.Behavior) keeps per packet (0: no bound).
	HeaderMax(behavior string) int
}

// Input is what config knows of one service of a kind, for Validate and
// Plan.
type Input struct {
	Name     string     // the service's name (services.NAME)
	Node     string     // the node it runs on
	Behavior string     // its behavior: as written ("" for most kinds)
	Block    any        // the decoded block (Kind.Block's type); nil if absent
	SID      netip.Addr // its SID (Plan only)
	// Prefix is the SID's LOC:FUNCT prefix, every ARGS value (Plan only).
	Prefix   netip.Prefix
	ArgsBits int    // the SID format's ARGS width
	Dir      string // the domain file's directory: relative files resolve against it
	// NodeAddr is the node's own IPv6 address (a static proxy's source).
	NodeAddr netip.Addr
	// Segs are the segments after the service in its chain, path order
	// (Plan only; a static proxy's CACHE).
	Segs []netip.Addr
	// CSIDLBLen and CSIDNFLen are set when the SID is a uSID (RFC 9800
	// C-SID in an f3216 domain: 32 and 16): a kind that advertises it
	// (UsesCSID) shifts the container instead of moving to the next
	// segment. Prefix is then block:uSID::/48.
	CSIDLBLen, CSIDNFLen int
}

// FieldError is one problem of a service, Path relative to the service.
type FieldError struct {
	Path string
	Msg  string
}

func (e FieldError) Error() string { return e.Path + ": " + e.Msg }

// Errorf makes a FieldError.
func Errorf(path, format string, a ...any) FieldError {
	return FieldError{Path: path, Msg: fmt.Sprintf(format, a...)}
}

// SameNodeRefuser is implemented by a kind whose data path cannot serve
// its SID right after another SID of the same node (the node itself, not
// another node, routes the packet to it; see plan's loopRoutes). The
// reason says why, for the validation error that rejects such a chain.
type SameNodeRefuser interface {
	RefuseAfterSameNode() string
}

// Documented is implemented by a kind's block type (the zero value
// Kind.Block returns) to describe its keys in the JSON Schema and the
// config reference: "Netfilter" (the block's type: its package name,
// capitalised, when the type is called Config), "Netfilter.key" for each
// key, and "Service.netfilter" for the block itself.
type Documented interface {
	FieldDocs() map[string]string
}

// Encode is a kind's plain-data values as a node's services.
func Encode[T interface{ Service() nodestate.Service }](xs ...T) []nodestate.Service {
	out := make([]nodestate.Service, 0, len(xs))
	for _, x := range xs {
		out = append(out, x.Service())
	}
	return out
}

// Decode reads the services of kind in list, in order, with read (the
// kind's decoder).
func Decode[T any](list []nodestate.Service, kind string, read func(nodestate.Service) (T, error)) ([]T, error) {
	var out []T
	for _, s := range nodestate.ServicesOf(list, kind) {
		x, err := read(s)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}
