package bpfpin

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
)

// Program is one eBPF program's pinned state in every namespace: the
// loader code the programs (proxy, firewall, boundary) share. Its maps
// are pinned by name in Dir(namespace, Name); state it keeps outside
// bpffs is its package's.
type Program struct {
	Name  string // pin directory under the namespace's ("proxy", "fw")
	What  string // the program in messages ("proxy", "firewall")
	Flush string // how a user removes pins of another version ("segchain sid flush")
	// Load returns the program's collection spec (bpf2go's loadX).
	Load func() (*ebpf.CollectionSpec, error)
}

// Parsed wraps a spec loader (bpf2go's loadX) so that the embedded ELF is
// parsed once per process, on first use, and each call gets a copy of
// it (callers set pinning and load from it). The agent observes every
// node on every request: a copy costs a sixth of a parse (130 µs against
// 785 µs for the boundary filter) and the parsed spec ~65 KiB.
func Parsed(load func() (*ebpf.CollectionSpec, error)) func() (*ebpf.CollectionSpec, error) {
	once := sync.OnceValues(load)
	return func() (*ebpf.CollectionSpec, error) {
		spec, err := once()
		if err != nil {
			return nil, err
		}
		return spec.Copy(), nil
	}
}

// Spec loads the collection spec with every map but the data sections
// (.rodata, .bss ...) pinned by name.
func (p Program) Spec() (*ebpf.CollectionSpec, error) {
	spec, err := p.Load()
	if err != nil {
		return nil, fmt.Errorf("load %s spec: %w", p.What, err)
	}
	for name, m := range spec.Maps {
		if !strings.HasPrefix(name, ".") {
			m.Pinning = ebpf.PinByName
		}
	}
	return spec, nil
}

// Dir returns the namespace's name (Namespace) and the program's pin
// directory in it. With clean, the program's state left by deleted
// namespaces (Stale: one whose inode netns inherited; Defunct: one whose
// links all lost their interface) is removed first, by remove (nil:
// Remove).
func (p Program) Dir(netns string, clean bool, remove func(dir string)) (name, dir string, err error) {
	name, ino, err := Namespace(netns)
	if err != nil {
		return "", "", err
	}
	if clean {
		if remove == nil {
			remove = func(d string) { _ = Remove(d) }
		}
		for _, d := range append(Stale(name, ino, p.Name), Defunct(p.Name, name)...) {
			remove(d)
		}
	}
	dir, err = Dir(name, p.Name)
	return name, dir, err
}

// Assign loads what of spec `to` holds (bpf2go objects, maps or programs
// only), the maps pinned in dir, which is created.
func (p Program) Assign(spec *ebpf.CollectionSpec, to any, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create pin dir: %w", err)
	}
	err := spec.LoadAndAssign(to, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}})
	if errors.Is(err, ebpf.ErrMapIncompatible) {
		return fmt.Errorf("pinned %s maps in %s are from another segchain version (%s): %w", p.What, dir, p.Flush, err)
	}
	if err != nil {
		return fmt.Errorf("load %s program: %w", p.What, err)
	}
	return nil
}

// Attach attaches the program to every interface of netns that lacks it
// (AttachAll); an unsupported TCX is returned wrapping notSupported (the
// package's ErrNotSupported) as well.
func (p Program) Attach(netns, dir string, prog func() (*ebpf.Program, error), notSupported error) error {
	err := AttachAll(netns, dir, ebpf.AttachTCXIngress, prog)
	if errors.Is(err, ebpf.ErrNotSupported) {
		return fmt.Errorf("attach %s: %w: %w", p.What, notSupported, err)
	}
	if err != nil {
		return fmt.Errorf("attach %s: %w", p.What, err)
	}
	return nil
}

// Health checks the program's objects in dir (Check), anchor being the
// map whose pin says the program is installed.
func (p Program) Health(netns, dir, prog, anchor string) (Health, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// Nothing installed, nothing broken (as Check says) and no need
		// to parse the program's ELF: observation asks on every request.
		return Health{}, nil
	}
	spec, err := p.Spec()
	if err != nil {
		return Health{}, err
	}
	return Check(netns, dir, spec, prog, anchor), nil
}
