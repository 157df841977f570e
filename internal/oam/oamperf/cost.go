package oamperf

import (
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/perf"
)

// The honest cost of O-flag sampling (segchain perf oam, docs/benchmarks.md
// "#30 session 13"): every reference is the node WITHOUT any sampling
// program. A program on an interface or a tracing program is attached by
// the generator's switch to its arm and detached by the switch back to
// the reference (perf.SwitchingGenerator, as poolperf does); a marker
// that is a route is its own arm's route (its own prefix), nothing
// attached. Two sandwiches: the headend (reference T.Encaps, the
// kernel's encap seg6 route) and a segment node (reference End).

// What an arm has attached while it is sent.
const (
	attNone      = iota
	attMarkerTCX // the TCX marker (oam_mark) on the output port's egress, 1:1000
	attEmptyOut  // an empty TCX program on the output port's egress
	attTapFentry // oam_sid_tap on seg6_local_input_core
	attTapTCX    // the TCX tap (oam_sampled) on the input port's ingress
	attEmptyIn   // an empty TCX program on the input port's ingress
)

// Recipes of a slot's frame.
const (
	recTEncaps = iota // the kernel's encap seg6 route (perf's T.Encaps)
	recRoute          // the route marker at 1:1000 (T.Encaps.oam.route)
	recBPF            // the route marker marking none (T.Encaps.route)
	recEnd            // seg6local End (perf's End)
)

// Slot is one arm: its frame's recipe and what is attached meanwhile.
type Slot struct {
	Name   string
	Recipe int
	Attach int
}

// HeadSlots and SegSlots are the two sandwiches' arms, the reference
// first.
var (
	HeadSlots = []Slot{
		{"T.Encaps", recTEncaps, attNone},
		{"T.Encaps (A/A)", recTEncaps, attNone},
		{"T.Encaps+marker-tcx", recTEncaps, attMarkerTCX},
		{"T.Encaps+empty-tcx-egress", recTEncaps, attEmptyOut},
		{"T.Encaps.oam.route", recRoute, attNone},
		{"T.Encaps.route", recBPF, attNone},
	}
	SegSlots = []Slot{
		{"End", recEnd, attNone},
		{"End (A/A)", recEnd, attNone},
		{"End+tap-fentry", recEnd, attTapFentry},
		{"End+tap-tcx", recEnd, attTapTCX},
		{"End+empty-tcx-ingress", recEnd, attEmptyIn},
	}
)

// attState is what is attached to the SUT now.
type attState struct {
	env    *perf.Env
	mode   int
	empty  *ebpf.Program
	tap    *ebpf.Program
	tapCl  func()
	links  []link.Link
	marker *oam.Marker
	sid    *oam.SIDTap
	key    oam.ChainKey
}

func (s *attState) set(mode int) error {
	if s.mode == mode {
		return nil
	}
	if err := perf.CloseLinks(&s.links); err != nil {
		return err
	}
	if s.marker != nil {
		if err := s.marker.Close(); err != nil {
			return err
		}
		s.marker = nil
	}
	if s.sid != nil {
		if err := s.sid.Close(); err != nil {
			return err
		}
		s.sid = nil
	}
	err := s.env.Do(func() error {
		attach := func(dev string, p *ebpf.Program, at ebpf.AttachType) error {
			l, err := perf.AttachTCXHead(dev, p, at)
			if err == nil {
				s.links = append(s.links, l)
			}
			return err
		}
		var err error
		switch mode {
		case attMarkerTCX:
			s.marker, err = oam.AttachMarker(s.env.Out, s.key, Rate)
		case attEmptyOut:
			err = attach(s.env.Out, s.empty, ebpf.AttachTCXEgress)
		case attTapFentry:
			s.sid, err = oam.AttachSIDTap()
		case attTapTCX:
			err = attach(s.env.In, s.tap, ebpf.AttachTCXIngress)
		case attEmptyIn:
			err = attach(s.env.In, s.empty, ebpf.AttachTCXIngress)
		}
		return err
	})
	if err != nil {
		return err
	}
	s.mode = mode
	return nil
}

func (s *attState) close() error {
	err := s.set(attNone)
	if s.empty != nil {
		s.empty.Close()
	}
	if s.tapCl != nil {
		s.tapCl()
	}
	return err
}

// recipeK is each recipe's arm number k (its addresses).
var recipeK = map[int]int{recTEncaps: 1, recRoute: 2, recBPF: 3, recEnd: 4}

func setupRecipe(env *perf.Env, r int, p perf.Params) ([]byte, error) {
	k := recipeK[r]
	switch r {
	case recTEncaps:
		return tEncaps().Setup(env, k, p)
	case recRoute:
		return routeSetup(Rate)(env, k, p)
	case recBPF:
		return routeSetup(0)(env, k, p)
	}
	for _, n := range perf.NativeRecipes() {
		if n.Name() == "End" {
			return n.Setup(env, k, p)
		}
	}
	return nil, fmt.Errorf("perf has no End recipe")
}

// Arm is one measured arm: R_cpu (the reference's SUT CPU ns/packet ÷
// the arm's), the throughput ratio and ns/packet.
type Arm struct {
	Name       string
	CPURatio   perf.Summary
	Throughput perf.Summary
	NsPerPkt   perf.Summary
}

// Result is one sandwich: its reference's ns/packet and arms.
type Result struct {
	Ref         string
	RefNsPerPkt perf.Summary
	Arms        []Arm
	// Skipped names arms this kernel cannot have, with why (fentry is
	// refused where the kernel has no function tracing).
	Skipped []string `json:",omitempty"`
}

// Measure runs both sandwiches on an up testbed d (PrepareSUT done),
// 64-byte packets. wire counts at the tester's wire: no TCX sink on the
// SUT's output port, so an egress program there pays the hook's entry
// too (as on a headend without other egress programs).
func Measure(d perf.Driver, rounds int, window time.Duration, wire bool) ([]Result, error) {
	env := d.Env()
	if env.Do == nil {
		return nil, fmt.Errorf("the sampling programs need the SUT's namespace: %w", perf.ErrNotSupported)
	}
	if wire {
		if err := d.Sink(perf.SinkWire); err != nil {
			return nil, err
		}
		defer d.Sink(perf.SinkForward)
	}
	st := &attState{env: env, mode: attNone,
		key: oam.ChainKey{First: perf.Addr("far", recipeK[recTEncaps], 1).As16(), Last: perf.Addr("far", recipeK[recTEncaps], 2).As16()}}
	defer st.close()
	var err error
	if st.empty, err = perf.EmptyTC(); err != nil {
		return nil, err
	}
	if st.tap, st.tapCl, err = oam.TCXTap(); err != nil {
		return nil, err
	}
	frames := map[int][]byte{}
	for _, r := range []int{recTEncaps, recRoute, recBPF, recEnd} {
		if frames[r], err = setupRecipe(env, r, perf.Params{Size: 64}); err != nil {
			return nil, err
		}
	}
	// fentry needs the kernel's function tracing: without it, the arm
	// is left out and said so.
	var skipped []string
	segSlots := SegSlots
	if t, err := oam.AttachSIDTap(); err != nil {
		skipped = append(skipped, fmt.Sprintf("End+tap-fentry: %v", err))
		segSlots = nil
		for _, s := range SegSlots {
			if s.Attach != attTapFentry {
				segSlots = append(segSlots, s)
			}
		}
	} else if err := t.Close(); err != nil {
		return nil, err
	}
	var out []Result
	for si, slots := range [][]Slot{HeadSlots, segSlots} {
		gen := d.Generator()
		mode := map[int]int{}
		for i, s := range slots {
			if err := gen.Load(i, frames[s.Recipe]); err != nil {
				return nil, err
			}
			mode[i] = s.Attach
		}
		sg := perf.SwitchingGenerator{Generator: gen, Before: func(slot int) error { return st.set(mode[slot]) }}
		var arms []perf.Arm
		for i, s := range slots[1:] {
			arms = append(arms, perf.Arm{Name: s.Name, Slot: i + 1})
		}
		ref, res, err := perf.Sandwich(perf.WithGenerator(d, sg), perf.Arm{Name: slots[0].Name, Slot: 0}, arms, perf.SandwichConfig{
			Rounds: rounds, Settle: 50 * time.Millisecond, Window: window, MinOverload: 1.1, MaxLost: 0.05, Seed: uint64(30 + si)})
		if err != nil {
			return nil, err
		}
		if err := st.set(attNone); err != nil {
			return nil, err
		}
		r := Result{Ref: slots[0].Name, RefNsPerPkt: perf.Summarize(ref.NsPerPacket)}
		if si == 1 {
			r.Skipped = skipped
		}
		for _, a := range res {
			r.Arms = append(r.Arms, Arm{Name: a.Name, CPURatio: perf.Summarize(a.CPURatio),
				Throughput: perf.Summarize(a.Ratio), NsPerPkt: perf.Summarize(a.NsPerPacket)})
		}
		out = append(out, r)
	}
	return out, nil
}
