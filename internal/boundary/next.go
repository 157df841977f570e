package boundary

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// The filter hosts the headend's pool selector (docs/pools.md, "Session
// 18"): boundary_in tail-calls the program in bnd_next's slot NextPool on
// every packet it lets in, so the choice runs on the TCX hook the filter
// already entered instead of as a second TCX program. The pool kind owns
// the slot's content (SetNext, ClearNext); the filter owns the map, which
// lives and dies with the filter's other maps.

// NextPool is bnd_next's slot of the pool selector (BND_NEXT_POOL).
const NextPool = 0

// ErrNotInstalled: netns has no boundary filter.
var ErrNotInstalled = errors.New("no boundary filter installed")

// SetNext puts prog (a SCHED_CLS program loaded with boundary_in's
// expected attach type, none) in the slot boundary_in tail-calls.
func SetNext(netns string, prog *ebpf.Program) error {
	n, err := open(netns, false)
	if err != nil {
		return err
	}
	if n == nil {
		return fmt.Errorf("%s: %w", netns, ErrNotInstalled)
	}
	defer n.close()
	if err := n.objs.BndNext.Put(uint32(NextPool), prog); err != nil {
		return fmt.Errorf("boundary: host %s behind boundary_in: %w", progName(prog), err)
	}
	return nil
}

func progName(p *ebpf.Program) string {
	if info, err := p.Info(); err == nil {
		return info.Name
	}
	return "a program"
}

// ClearNext empties the slot (nothing installed: nothing to do).
func ClearNext(netns string) error {
	n, err := open(netns, false)
	if err != nil || n == nil {
		return err
	}
	defer n.close()
	if err := n.objs.BndNext.Delete(uint32(NextPool)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("boundary: clear the hosted program: %w", err)
	}
	return nil
}

// Next is the ID of the program in the slot (0: empty, or no filter).
func Next(netns string) (ebpf.ProgramID, error) {
	n, err := open(netns, false)
	if err != nil || n == nil {
		return 0, err
	}
	defer n.close()
	var id uint32
	if err := n.objs.BndNext.Lookup(uint32(NextPool), &id); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("boundary: read the hosted program: %w", err)
	}
	return ebpf.ProgramID(id), nil
}

// Hosting are the interfaces (by index) whose live boundary_in link runs a
// program of this filter that reads bnd_next: a program in the slot runs
// there. Nothing installed: none.
func Hosting(netns string) (map[int]bool, error) {
	n, err := open(netns, false)
	if err != nil || n == nil {
		return nil, err
	}
	defer n.close()
	info, err := n.objs.BndNext.Info()
	if err != nil {
		return nil, fmt.Errorf("boundary: bnd_next: %w", err)
	}
	id, _ := info.ID()
	ifs, err := interfaces(netns)
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, i := range ifs {
		if linkUses(pin(n.dir, i.index, "in"), id) {
			out[i.index] = true
		}
	}
	return out, nil
}

// linkUses reports whether the link pinned at p is live and its program
// uses map id.
func linkUses(p string, id ebpf.MapID) bool {
	lk, err := link.LoadPinnedLink(p, nil)
	if err != nil {
		return false
	}
	defer lk.Close()
	li, err := lk.Info()
	if err != nil || li.TCX() == nil || li.TCX().Ifindex == 0 {
		return false
	}
	prog, err := ebpf.NewProgramFromID(li.Program)
	if err != nil {
		return false
	}
	defer prog.Close()
	pi, err := prog.Info()
	if err != nil {
		return false
	}
	ids, ok := pi.MapIDs()
	return ok && slices.Contains(ids, id)
}

// Program loads a fresh copy of the filter's program name (boundary_in,
// boundary_out, hmac_in) on netns's pinned maps, for tests and
// benchmarks that run it (BPF_PROG_TEST_RUN). The caller closes it.
func Program(netns, name string) (*ebpf.Program, error) {
	n, err := open(netns, false)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, fmt.Errorf("%s: %w", netns, ErrNotInstalled)
	}
	p, err := n.program(name)
	if err != nil {
		n.close()
		return nil, err
	}
	p, err = p.Clone()
	n.close()
	return p, err
}
