package srunaware

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service"
)

// Name is the kind's name (services.NAME.kind: sr-unaware).
const Name = "sr-unaware"

// Proxy is one SR proxy SID in plain data, the Spec of a
// nodestate.Service of this kind: the `segchain sid add` syntax, Params
// the keyword parameters after the behaviour (as ParseSpec accepts them).
type Proxy struct {
	SID      netip.Prefix `json:"-"`
	Behavior string       `json:"behavior"`
	Params   []string     `json:"params,omitempty"`
}

// String is the proxy as one `sid add` line.
func (p Proxy) String() string {
	return strings.TrimSpace("proxy " + p.SID.String() + " " + p.Behavior + " " + strings.Join(p.Params, " "))
}

// Service is the proxy as a node's service.
func (p Proxy) Service() nodestate.Service {
	b, _ := json.Marshal(p) // strings only: cannot fail
	return nodestate.Service{Kind: Name, SID: p.SID, Spec: b}
}

// ProxyOf reads a service of this kind.
func ProxyOf(s nodestate.Service) (Proxy, error) {
	var p Proxy
	if s.Kind != Name {
		return p, fmt.Errorf("service %s is of kind %q, not %s", s.SID, s.Kind, Name)
	}
	if err := json.Unmarshal(s.Spec, &p); err != nil {
		return p, fmt.Errorf("proxy %s: %w", s.SID, err)
	}
	p.SID = s.SID
	return p, nil
}

// Of is a parsed spec in plain data (its canonical parameters).
func Of(s Spec) Proxy {
	return Proxy{SID: s.SID, Behavior: s.Behavior, Params: s.Params()}
}

// SpecOf parses a service of this kind.
func SpecOf(s nodestate.Service) (Spec, error) {
	p, err := ProxyOf(s)
	if err != nil {
		return Spec{}, err
	}
	sp, err := ParseSpec(p.SID, p.Behavior, p.Params)
	if err != nil {
		return Spec{}, fmt.Errorf("proxy %s: %w", p.SID, err)
	}
	return sp, nil
}

// Kind is the sr-unaware kind's intent half: an SR-unaware SF behind an
// SR proxy (End.AS, End.AD, End.AM) served by internal/dataplane/srunaware.
type Kind struct{}

var _ service.Kind = Kind{}

func (Kind) Name() string   { return Name }
func (Kind) Noun() string   { return "a proxy" }
func (Kind) Plural() string { return "proxies" }

// Block: the proxy's fields are inline in the service (config.Service
// embeds Config), so config hands a *Config as Input.Block.
func (Kind) Block() (string, any) { return "", nil }

// MatchesArgs: the proxy program matches its SID exactly.
func (Kind) MatchesArgs() bool { return false }

// Behavior is the proxy behaviour the proxy type derives.
func (Kind) Behavior(in service.Input) string {
	if c, ok := in.Block.(*Config); ok {
		return c.Behavior()
	}
	return ""
}

// Validate: config validates the inline proxy fields together with the
// chains they serve (internal/config/validate.go).
func (Kind) Validate(service.Input) []service.FieldError { return nil }

// Plan emits the proxy in the canonical parameter order of `sid add`.
func (k Kind) Plan(in service.Input) (nodestate.Service, error) {
	c, ok := in.Block.(*Config)
	if !ok {
		return nodestate.Service{}, fmt.Errorf("services.%s: no proxy configuration", in.Name)
	}
	if c.Proxy == ProxyStatic && len(in.Segs) == 0 {
		return nodestate.Service{}, fmt.Errorf("services.%s: a static proxy needs a chain with segments after it", in.Name)
	}
	prm := c.ProxyParams(in.NodeAddr, in.Segs)
	if in.CSIDNFLen > 0 {
		prm = append(prm, "usid", fmt.Sprintf("%d/%d", in.CSIDLBLen, in.CSIDNFLen))
	}
	return Proxy{SID: netip.PrefixFrom(in.SID, 128), Behavior: c.Behavior(), Params: prm}.Service(), nil
}

// Lines is the proxy's `sid add` line as given.
func (Kind) Lines(s nodestate.Service) []string {
	p, err := ProxyOf(s)
	if err != nil {
		return []string{"proxy " + s.SID.String() + " " + string(s.Spec)}
	}
	return []string{p.String()}
}

// Canonical is the `sid add` line with the parameters in canonical order
// (the line as given if it does not parse).
func (k Kind) Canonical(s nodestate.Service) string {
	sp, err := SpecOf(s)
	if err != nil {
		return k.Lines(s)[0]
	}
	return Of(sp).String()
}

// ServiceBehavior is the proxy's behaviour.
func (Kind) ServiceBehavior(s nodestate.Service) string {
	p, _ := ProxyOf(s)
	return p.Behavior
}

// Services is the proxies as a node's services.
func Services(ps ...Proxy) []nodestate.Service { return service.Encode(ps...) }

// ProxiesOf reads the services of this kind in list, in order.
func ProxiesOf(list []nodestate.Service) ([]Proxy, error) { return service.Decode(list, Name, ProxyOf) }

// SIDsMax is how many proxy SIDs a node holds: the size of the proxy
// program's per-SID maps (PROXY_MAX_SIDS of bpf/proxy_tc.bpf.c;
// internal/dataplane/srunaware's TestSpecLimitsMatchProgram fails on drift).
const SIDsMax = 256

// PerNode implements service.Limited.
func (Kind) PerNode() int { return SIDsMax }

// HeaderMax implements service.Limited: a dynamic proxy caches the outer
// headers of the packets it strips; a static proxy's are its configured
// CACHE (checked with its spec), a masquerading proxy keeps none.
func (Kind) HeaderMax(behavior string) int {
	if behavior == EndAD {
		return CacheHdrMax
	}
	return 0
}
