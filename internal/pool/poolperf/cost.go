package poolperf

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/boundary/boundaryperf"
	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/pool/datapath"
)

// The honest cost of a pool at the headend (docs/pools.md, "What it
// costs"): the baseline is a single-instance chain on a headend without
// pools, so without the pool programs on its interfaces. The programs sit
// on interfaces, so an arm's generator slot switch also attaches the
// arm's programs and the switch back to the reference detaches them
// (perf.SwitchingGenerator, as boundaryperf does for the boundary filter).

// Programs on the SUT's ports during an arm.
const (
	progNone  = iota // no pool program (a headend without pools)
	progIn           // pool_in on the input port's TCX ingress
	progOut          // pool_out on the output port's TCX egress
	progBoth         // both, as apply installs them on a headend with pools
	progEmpty        // an empty TCX ingress program: the hook's own cost
)

// Slot is one arm of the cost run: a recipe's frame and the programs
// attached while it is sent.
type Slot struct {
	Name   string
	Recipe int // ruleOnly or poolIn
	Progs  int
}

// Slots are the run's arms; the first is the reference.
var Slots = []Slot{
	{"T.Encaps.rule", ruleOnly, progNone},
	{"T.Encaps.rule (A/A)", ruleOnly, progNone},
	{"T.Encaps.pool+in+out", poolIn, progBoth},
	{"T.Encaps.pool+in", poolIn, progIn},
	{"T.Encaps.rule+in+out", ruleOnly, progBoth},
	{"T.Encaps.rule+in", ruleOnly, progIn},
	{"T.Encaps.rule+empty-tcx", ruleOnly, progEmpty},
}

// recipeK is each recipe's arm number k (its addresses, table, rule
// priority). The baseline's rule comes first in the kernel's rule walk,
// so the pool arm walks it too (a bias against the pool, not for it).
var recipeK = map[int]int{ruleOnly: 1, poolIn: 2}

// progState is what is attached to the SUT's ports now.
type progState struct {
	env     *perf.Env
	mode    int
	in, out *ebpf.Program
	empty   *ebpf.Program
	links   []link.Link
	// behind: the boundary filter holds the head of the input port's
	// TCX ingress, so the arms' programs go after it, as apply orders
	// them (boundary_in at the head, pool_in appended).
	behind bool
}

func (s *progState) set(mode int) error {
	if s.mode == mode {
		return nil
	}
	if err := perf.CloseLinks(&s.links); err != nil {
		return err
	}
	err := s.env.Do(func() error {
		attach := func(dev string, p *ebpf.Program, at ebpf.AttachType) error {
			place := perf.AttachTCXHead
			if s.behind && at == ebpf.AttachTCXIngress {
				place = perf.AttachTCXTail
			}
			l, err := place(dev, p, at)
			if err == nil {
				s.links = append(s.links, l)
			}
			return err
		}
		if mode == progIn || mode == progBoth {
			if err := attach(s.env.In, s.in, ebpf.AttachTCXIngress); err != nil {
				return err
			}
		}
		if mode == progEmpty {
			return attach(s.env.In, s.empty, ebpf.AttachTCXIngress)
		}
		if mode == progOut || mode == progBoth {
			return attach(s.env.Out, s.out, ebpf.AttachTCXEgress)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.mode = mode
	return nil
}

func (s *progState) close() error {
	err := s.set(progNone)
	if s.behind {
		err = errors.Join(err, boundaryperf.SetFilter(s.env, false))
	}
	if s.in != nil {
		s.in.Close()
	}
	if s.out != nil {
		s.out.Close()
	}
	if s.empty != nil {
		s.empty.Close()
	}
	return err
}

// setupSlots sets every recipe up once on d's SUT, loads each slot's
// frame and takes the pool programs off the SUT's interfaces (the slots
// attach them). It returns the generator that switches them.
func setupSlots(d perf.Driver, size int, behindBoundary bool) (perf.SwitchingGenerator, *progState, error) {
	env := d.Env()
	gen := d.Generator()
	frames := map[int][]byte{}
	for _, r := range []int{ruleOnly, poolIn} {
		f, err := setupKind(env, recipeK[r], perf.Params{Size: size}, r)
		if err != nil {
			return perf.SwitchingGenerator{}, nil, err
		}
		frames[r] = f
	}
	mode := map[int]int{}
	for i, s := range Slots {
		if err := gen.Load(i, frames[s.Recipe]); err != nil {
			return perf.SwitchingGenerator{}, nil, err
		}
		mode[i] = s.Progs
	}
	st := &progState{env: env, mode: -1, behind: behindBoundary}
	err := env.Do(func() error {
		h, err := datapath.Open("")
		if err != nil {
			return err
		}
		defer h.Close()
		if err := h.Detach(); err != nil {
			return err
		}
		// Own handles: h's close with it.
		if st.in, err = h.InProg().Clone(); err != nil {
			return err
		}
		if st.out, err = h.Prog().Clone(); err != nil {
			return err
		}
		st.empty, err = perf.EmptyTC()
		return err
	})
	if err == nil && behindBoundary {
		err = boundaryperf.SetFilter(env, true)
	}
	if err == nil {
		err = st.set(progNone)
	}
	if err != nil {
		_ = st.close()
		return perf.SwitchingGenerator{}, nil, fmt.Errorf("pool programs: %w", err)
	}
	return perf.SwitchingGenerator{Generator: gen, Before: func(slot int) error { return st.set(mode[slot]) }}, st, nil
}

// Arm is one measured arm: its R_cpu (the reference's SUT CPU ns/packet ÷
// the arm's), throughput ratio and ns/packet.
type Arm struct {
	Name       string
	CPURatio   perf.Summary
	Throughput perf.Summary
	NsPerPkt   perf.Summary
}

// Result is a run: the reference's ns/packet and every arm.
type Result struct {
	RefNsPerPkt perf.Summary
	Arms        []Arm
}

// Measure runs the sandwich on an up testbed d (PrepareSUT done): rounds
// of Slots, 64-byte packets, against a single-instance chain with no pool
// program attached. wire counts at the tester's wire instead of the
// SUT's output port: then no TCX program runs on the SUT's egress (the
// forwarding sink is one), so the arms with pool_out pay the egress
// hook's entry too, as on a headend without other egress programs.
// behindBoundary puts the boundary filter on the SUT's input port for the
// whole run, reference included, as apply does on a host-facing
// interface by default: the arms then measure what a pool adds on a
// hook that already runs a program.
func Measure(d perf.Driver, rounds int, window time.Duration, wire, behindBoundary bool) (*Result, error) {
	if d.Env().Do == nil {
		return nil, fmt.Errorf("the pool programs need the SUT's namespace: %w", perf.ErrNotSupported)
	}
	if wire {
		if err := d.Sink(perf.SinkWire); err != nil {
			return nil, err
		}
		defer d.Sink(perf.SinkForward)
	}
	gen, st, err := setupSlots(d, 64, behindBoundary)
	if err != nil {
		return nil, err
	}
	defer st.close()
	var arms []perf.Arm
	for i, s := range Slots[1:] {
		arms = append(arms, perf.Arm{Name: s.Name, Slot: i + 1})
	}
	ref, res, err := perf.Sandwich(perf.WithGenerator(d, gen), perf.Arm{Name: Slots[0].Name, Slot: 0}, arms, perf.SandwichConfig{
		Rounds: rounds, Settle: 50 * time.Millisecond, Window: window, MinOverload: 1.1, MaxLost: 0.05, Seed: 29})
	if err != nil {
		return nil, err
	}
	out := &Result{RefNsPerPkt: perf.Summarize(ref.NsPerPacket)}
	for _, a := range res {
		out.Arms = append(out.Arms, Arm{Name: a.Name, CPURatio: perf.Summarize(a.CPURatio),
			Throughput: perf.Summarize(a.Ratio), NsPerPkt: perf.Summarize(a.NsPerPacket)})
	}
	return out, nil
}
