package bpfpin

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/nsutil"
)

// Health is what Check found wrong with one program's pin directory.
// Problems are one line each, for plan and status; MapsBad says the maps
// cannot be trusted (missing, foreign, or of another layout), so repair
// means rebuilding the whole directory; BadLinks are link pins to drop so
// that AttachAll attaches afresh.
type Health struct {
	Problems []string
	MapsBad  bool
	BadLinks []string
}

// OK reports whether nothing is wrong.
func (h Health) OK() bool { return len(h.Problems) == 0 }

func (h *Health) add(format string, a ...any) {
	h.Problems = append(h.Problems, fmt.Sprintf(format, a...))
}

// Check verifies the eBPF objects of one program pinned in dir for netns,
// all of them, against spec (the bpf2go collection):
//
//   - every map of spec is pinned under its name with the spec's type, key
//     and value size and max entries;
//   - every interface of netns but loopback has a link pinned as
//     dir/tcx-<ifindex>, and that link is live (not detached), on TCX
//     ingress of that interface, and runs a program named prog that uses
//     the maps pinned in dir (so it is ours, not a foreign one);
//   - dir holds nothing else (a link pin of a gone interface, a stray file).
//
// A directory that does not exist is healthy (nothing installed); one
// without the anchor map (the owner's "installed" mark) holds orphans of
// an interrupted install or teardown.
func Check(netns, dir string, spec *ebpf.CollectionSpec, prog, anchor string) Health {
	var h Health
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return h
	}
	if err != nil {
		h.add("read %s: %v", dir, err)
		h.MapsBad = true
		return h
	}
	have := map[string]bool{}
	var all []string
	for _, e := range ents {
		have[e.Name()] = true
		all = append(all, e.Name())
	}
	if !have[anchor] {
		h.add("orphaned pins in %s: %s", dir, strings.Join(all, " "))
		h.MapsBad = true
		return h
	}
	ours := map[ebpf.MapID]bool{}
	names := make([]string, 0, len(spec.Maps))
	for name := range spec.Maps {
		if !strings.HasPrefix(name, ".") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		ms := spec.Maps[name]
		delete(have, name)
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
		if err != nil {
			h.add("map %s: not pinned in %s", name, dir)
			h.MapsBad = true
			continue
		}
		info, err := m.Info()
		if err == nil {
			if id, ok := info.ID(); ok {
				ours[id] = true
			}
			if info.Type != ms.Type || info.KeySize != ms.KeySize || info.ValueSize != ms.ValueSize ||
				(ms.MaxEntries != 0 && info.MaxEntries != ms.MaxEntries) {
				h.add("map %s: layout %s key %d value %d max %d, want %s key %d value %d max %d", name,
					info.Type, info.KeySize, info.ValueSize, info.MaxEntries, ms.Type, ms.KeySize, ms.ValueSize, ms.MaxEntries)
				h.MapsBad = true
			}
		}
		m.Close()
	}
	ifs, err := interfaces(netns)
	if err != nil {
		h.add("list interfaces: %v", err)
		return h
	}
	for _, i := range ifs {
		pin := fmt.Sprintf("tcx-%d", i.Index)
		delete(have, pin)
		if problem := checkLink(filepath.Join(dir, pin), i.Index, prog, ours); problem != "" {
			h.add("%s on %s: %s", prog, i.Name, problem)
			if !strings.HasPrefix(problem, "not attached") {
				h.BadLinks = append(h.BadLinks, filepath.Join(dir, pin))
			}
		}
	}
	var stray []string
	for name := range have {
		stray = append(stray, name)
	}
	sort.Strings(stray)
	for _, name := range stray {
		h.add("foreign pin %s", filepath.Join(dir, name))
		if strings.HasPrefix(name, "tcx-") {
			h.BadLinks = append(h.BadLinks, filepath.Join(dir, name))
		} else {
			h.MapsBad = true
		}
	}
	return h
}

// checkLink says what is wrong with the link pinned at pin ("" = nothing).
func checkLink(pin string, ifindex int, prog string, ours map[ebpf.MapID]bool) string {
	lk, err := link.LoadPinnedLink(pin, nil)
	if errors.Is(err, os.ErrNotExist) {
		return "not attached (no link pinned)"
	}
	if err != nil {
		return fmt.Sprintf("link pin unreadable: %v", err)
	}
	defer lk.Close()
	info, err := lk.Info()
	if err != nil {
		return fmt.Sprintf("link info: %v", err)
	}
	tcx := info.TCX()
	switch {
	case tcx == nil:
		return fmt.Sprintf("link %d is not a TCX link (%v)", info.ID, info.Type)
	case tcx.Ifindex == 0:
		return fmt.Sprintf("link %d detached", info.ID)
	case int(tcx.Ifindex) != ifindex:
		return fmt.Sprintf("link %d on ifindex %d, want %d", info.ID, tcx.Ifindex, ifindex)
	case uint32(tcx.AttachType) != uint32(ebpf.AttachTCXIngress):
		return fmt.Sprintf("link %d at attach type %d, want TCX ingress", info.ID, tcx.AttachType)
	}
	p, err := ebpf.NewProgramFromID(info.Program)
	if err != nil {
		return fmt.Sprintf("link %d program %d: %v", info.ID, info.Program, err)
	}
	defer p.Close()
	pi, err := p.Info()
	if err != nil {
		return fmt.Sprintf("link %d program %d: %v", info.ID, info.Program, err)
	}
	if pi.Name != prog && !strings.HasPrefix(prog, pi.Name) { // the kernel keeps 15 characters
		return fmt.Sprintf("link %d runs foreign program %q (id %d)", info.ID, pi.Name, info.Program)
	}
	ids, _ := pi.MapIDs()
	for _, id := range ids {
		if ours[id] {
			return ""
		}
	}
	return fmt.Sprintf("link %d runs program %d that does not use the maps pinned here", info.ID, info.Program)
}

func interfaces(netns string) ([]net.Interface, error) {
	var out []net.Interface
	err := nsutil.Do(netns, func() error {
		l, err := net.Interfaces()
		for _, i := range l {
			if i.Flags&net.FlagLoopback == 0 {
				out = append(out, i)
			}
		}
		return err
	})
	return out, err
}

// Repair undoes what h found so that the owner can re-install: with bad
// maps the whole directory goes (the owner rebuilds it from its desired
// state); otherwise only the bad link pins go (detaching their links), and
// the owner's AttachAll attaches the program again.
func Repair(dir string, h Health) error {
	if h.MapsBad {
		return Remove(dir)
	}
	var errs []error
	for _, p := range h.BadLinks {
		if lk, err := link.LoadPinnedLink(p, nil); err == nil {
			errs = append(errs, lk.Unpin(), lk.Close())
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
