package bpfpin

import (
	"fmt"
	"path/filepath"
	"reflect"
	"sync"

	"github.com/cilium/ebpf"
)

// OpenPinned opens the maps pinned in dir that `to` names (a bpf2go maps
// struct: *ebpf.Map fields tagged `ebpf:"name"`) for reading, without
// copying the collection spec or loading anything: an agent reads a
// node's maps on every request, and Assign's copy and checks were most
// of that (docs/scale.md). Each map's layout (type, key, value, entries)
// is checked against the spec's, read once per process; a map that is
// missing or laid out otherwise fails with ebpf.ErrMapIncompatible
// wrapped (callers then go through Assign, which says what to do).
func (p Program) OpenPinned(to any, dir string) error {
	layouts, err := p.layouts()
	if err != nil {
		return err
	}
	v := reflect.ValueOf(to)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("open %s maps: %T is not a pointer to a struct", p.What, to)
	}
	s := v.Elem()
	var opened []*ebpf.Map
	fail := func(err error) error {
		for _, m := range opened {
			m.Close()
		}
		return err
	}
	mapType := reflect.TypeOf((*ebpf.Map)(nil))
	for i := 0; i < s.NumField(); i++ {
		f := s.Type().Field(i)
		name := f.Tag.Get("ebpf")
		if name == "" || f.Type != mapType {
			continue
		}
		want, ok := layouts[name]
		if !ok {
			return fail(fmt.Errorf("open %s maps: no map %q in the spec", p.What, name))
		}
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if err != nil {
			return fail(fmt.Errorf("open %s map %s: %w: %w", p.What, name, ebpf.ErrMapIncompatible, err))
		}
		opened = append(opened, m)
		if m.Type() != want.Type || m.KeySize() != want.KeySize || m.ValueSize() != want.ValueSize ||
			(want.MaxEntries != 0 && m.MaxEntries() != want.MaxEntries) {
			return fail(fmt.Errorf("open %s map %s: %w: laid out otherwise", p.What, name, ebpf.ErrMapIncompatible))
		}
		s.Field(i).Set(reflect.ValueOf(m))
	}
	return nil
}

type layout struct {
	Type                           ebpf.MapType
	KeySize, ValueSize, MaxEntries uint32
}

var layoutCache sync.Map // Program.Name → map[string]layout

// layouts are the spec's maps' layouts, by name (read once per program).
func (p Program) layouts() (map[string]layout, error) {
	if l, ok := layoutCache.Load(p.Name); ok {
		return l.(map[string]layout), nil
	}
	spec, err := p.Load()
	if err != nil {
		return nil, fmt.Errorf("load %s spec: %w", p.What, err)
	}
	out := map[string]layout{}
	for name, m := range spec.Maps {
		out[name] = layout{Type: m.Type, KeySize: m.KeySize, ValueSize: m.ValueSize, MaxEntries: m.MaxEntries}
	}
	layoutCache.Store(p.Name, out)
	return out, nil
}
