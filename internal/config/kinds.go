package config

import (
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/segchain/segchain/internal/service"
	"github.com/segchain/segchain/internal/service/kinds"
)

// A service kind (internal/service) that has a block of its own
// (service.Kind.Block: `netfilter:` ...) needs no field here: the decoder
// checks the block against the kind's Go type, decodes it into
// Service.Blocks, the schema describes it from the same type, and
// validation and plan hand it to the kind. The two first kinds keep their
// fields declared in Service (the inline proxy fields, `firewall:`) so
// that domain files stay as they were; KindBlock maps them.

// registry returns the service kinds config knows. Only tests replace it
// (with a kind of their own); nothing else assigns it.
var registry = kinds.Registry

// kindBlocks returns the block keys of the registered kinds with their Go
// types, for the Service type (nil for any other).
func kindBlocks(t reflect.Type) map[string]reflect.Type {
	if t != reflect.TypeOf(Service{}) {
		return nil
	}
	out := map[string]reflect.Type{}
	for _, k := range registry().Kinds() {
		if key, zero := k.Block(); key != "" && zero != nil {
			bt := reflect.TypeOf(zero)
			for bt.Kind() == reflect.Pointer {
				bt = bt.Elem()
			}
			out[key] = bt
		}
	}
	return out
}

// decodeBlocks decodes the kinds' blocks the walker found into their
// services.
func decodeBlocks(d *Domain, blocks map[string]*yaml.Node, res *decoded) {
	paths := make([]string, 0, len(blocks))
	for p := range blocks {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		rest, ok := strings.CutPrefix(p, "services.")
		i := strings.LastIndex(rest, ".")
		if !ok || i < 0 {
			continue
		}
		name, key := rest[:i], rest[i+1:]
		s := d.Services[name]
		if s == nil {
			continue
		}
		bt := kindBlocks(reflect.TypeOf(Service{}))[key]
		v := reflect.New(bt)
		if err := blocks[p].Decode(v.Interface()); err != nil {
			fe := &fieldErr{structural: true}
			fe.Path, fe.Msg = p, err.Error()
			res.lists = append(res.lists, fe)
			continue
		}
		if s.Blocks == nil {
			s.Blocks = map[string]any{}
		}
		s.Blocks[key] = v.Interface()
	}
}

// Kind returns the service kind of s (nil for a native service or an
// unknown kind).
func (s *Service) ServiceKind() service.Kind {
	if s == nil || s.Kind == "" || s.Kind == KindNative {
		return nil
	}
	k, _ := registry().Lookup(s.Kind)
	return k
}

// HeaderMax is the bytes of outer headers the service's data path keeps
// per packet (service.Limited; 0: no bound).
func (s *Service) HeaderMax() int {
	if l, ok := s.ServiceKind().(service.Limited); ok {
		return l.HeaderMax(s.EffectiveBehavior())
	}
	return 0
}

// Served reports whether the service is served by a service kind's data
// path (an eBPF program, not a seg6local route).
func (s *Service) Served() bool { return s.ServiceKind() != nil }

// KindBlock is the block of the service's kind: Service.Blocks' entry, or
// for the two first kinds the fields Service declares for them.
func (s *Service) KindBlock() any {
	switch s.Kind {
	case KindSRUnaware:
		return &s.Config
	case KindFirewall:
		return s.Firewall
	}
	if k := s.ServiceKind(); k != nil {
		if key, _ := k.Block(); key != "" {
			return s.Blocks[key]
		}
	}
	return nil
}

// KindInput is what a service kind's Validate and Plan get of service
// name (the SID fields are plan's to fill).
func (d *Domain) KindInput(name string) service.Input {
	s := d.Services[name]
	return service.Input{Name: name, Node: s.Node, Behavior: s.Behavior, Block: s.KindBlock(),
		ArgsBits: d.Format().ArgsBits, Dir: d.Dir, NodeAddr: d.NodeAddr(s.Node)}
}

// kindService validates a service of a kind with a block of its own: the
// kind checks its block; what belongs to other kinds must be absent.
func (v *validator) kindService(p string, s *Service, k service.Kind) {
	v.noEndpointParams(p, s, k.Name())
	v.noProxyFields(p, s)
	for _, e := range k.Validate(v.d.KindInput(strings.TrimPrefix(p, "services."))) {
		v.errf(p+"."+e.Path, "%s", e.Msg)
	}
}

// strayBlocks reports the kinds' blocks in a service of another kind.
func (v *validator) strayBlocks(p string, s *Service) {
	for key := range s.Blocks {
		if k, ok := registry().ByBlock(key); ok && k.Name() != s.Kind {
			v.errf(p+"."+key, "only for kind %s", k.Name())
		}
	}
}

// kindNames are the valid service kinds: native and every registered one.
func kindNames() []string {
	out := []string{KindNative}
	for _, k := range registry().Kinds() {
		// A planned kind (the pool selector) is not written in a file.
		if p, ok := k.(interface{ Planned() bool }); ok && p.Planned() {
			continue
		}
		out = append(out, k.Name())
	}
	return out
}
