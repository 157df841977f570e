package service

import (
	"fmt"

	"github.com/segchain/segchain/internal/nodestate"
)

// Registry is the set of service kinds, in a fixed order (plan output,
// diffs and the agent visit kinds in it). Callers iterate it; nobody
// switches on a kind's name outside the kind's own package.
type Registry struct {
	kinds  []Kind
	byName map[string]Kind
	blocks map[string]Kind
}

// NewRegistry checks that names and block keys are unique.
func NewRegistry(kinds ...Kind) (*Registry, error) {
	r := &Registry{byName: map[string]Kind{}, blocks: map[string]Kind{}}
	for _, k := range kinds {
		if k.Name() == "" {
			return nil, fmt.Errorf("service kind %T without a name", k)
		}
		if _, dup := r.byName[k.Name()]; dup {
			return nil, fmt.Errorf("service kind %q registered twice", k.Name())
		}
		r.byName[k.Name()] = k
		if key, _ := k.Block(); key != "" {
			if o, dup := r.blocks[key]; dup {
				return nil, fmt.Errorf("service kinds %q and %q both claim block %q", o.Name(), k.Name(), key)
			}
			r.blocks[key] = k
		}
		r.kinds = append(r.kinds, k)
	}
	return r, nil
}

// Kinds returns every kind in registry order.
func (r *Registry) Kinds() []Kind { return append([]Kind(nil), r.kinds...) }

// Lookup returns the kind called name.
func (r *Registry) Lookup(name string) (Kind, bool) {
	k, ok := r.byName[name]
	return k, ok
}

// ByBlock returns the kind whose configuration block is key.
func (r *Registry) ByBlock(key string) (Kind, bool) {
	k, ok := r.blocks[key]
	return k, ok
}

// Names returns the kinds' names in registry order.
func (r *Registry) Names() []string {
	out := make([]string, len(r.kinds))
	for i, k := range r.kinds {
		out[i] = k.Name()
	}
	return out
}

// Canonical is s's canonical text by its kind (the given form for a kind
// the registry does not know).
func (r *Registry) Canonical(s nodestate.Service) string {
	if k, ok := r.byName[s.Kind]; ok {
		return s.Kind + " " + k.Canonical(s)
	}
	return s.Kind + " " + s.SID.String() + " " + string(s.Spec)
}

// Lines renders s by its kind.
func (r *Registry) Lines(s nodestate.Service) []string {
	if k, ok := r.byName[s.Kind]; ok {
		return k.Lines(s)
	}
	return []string{s.Kind + " " + s.SID.String() + " " + string(s.Spec)}
}

// Plural names the services of kind in plan output.
func (r *Registry) Plural(kind string) string {
	if k, ok := r.byName[kind]; ok {
		return k.Plural()
	}
	return kind + " services"
}

// Same reports whether two service lists are equal by canonical text,
// ignoring order.
func (r *Registry) Same(a, b []nodestate.Service) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[string]int{}
	for _, s := range a {
		count[r.Canonical(s)]++
	}
	for _, s := range b {
		k := r.Canonical(s)
		if count[k] == 0 {
			return false
		}
		count[k]--
	}
	return true
}
