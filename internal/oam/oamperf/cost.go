package oamperf

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
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
	attBndMark   // the boundary filter (on the input port in every arm of its sandwich) marking 1:1000, the O-rule and O-table
)

// Recipes of a slot's frame.
const (
	recTEncaps = iota // the kernel's encap seg6 route (perf's T.Encaps)
	recRoute          // the route marker at 1:1000 (T.Encaps.oam.route)
	recBPF            // the route marker marking none (T.Encaps.route)
	recEnd            // seg6local End (perf's End)
	recChain          // T.Encaps as a chain: its route in a table, a rule to it (as segchain's headend)
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
	// BndSlots: the headend behind the boundary filter (boundary_in on
	// the input port in every arm), T.Encaps as segchain's chain (a rule,
	// a table).
	BndSlots = []Slot{
		{"T.Encaps+boundary", recChain, attNone},
		{"T.Encaps+boundary (A/A)", recChain, attNone},
		{"T.Encaps+boundary+mark-1000", recChain, attBndMark},
		{"T.Encaps+boundary+marker-tcx", recChain, attMarkerTCX},
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
	bmark  *oam.BoundaryMark
	// keyOf: the chain's key while its sandwich runs (the TCX marker's).
	chainKey oam.ChainKey
	bnd      bool // the sandwich of the boundary filter runs
	// bmSeen, bmMarked: the boundary marking arm's counts, summed.
	bmSeen, bmMarked uint64
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
	if s.bmark != nil {
		c, err := s.bmark.Counts()
		if err != nil {
			return err
		}
		s.bmSeen += c.Seen
		s.bmMarked += c.Marked
		if err := s.env.Do(s.bmark.Close); err != nil {
			return err
		}
		s.bmark = nil
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
			key := s.key
			if s.bnd {
				key = s.chainKey
			}
			s.marker, err = oam.AttachMarker(s.env.Out, key, Rate)
		case attBndMark:
			s.bmark, err = oam.MarkAtBoundary("", s.chainKey, Rate)
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
var recipeK = map[int]int{recTEncaps: 1, recRoute: 2, recBPF: 3, recEnd: 4, recChain: 5}

// chainTable is recChain's table (a rule sends its prefix there).
const chainTable = 1005

// chainSetup is T.Encaps with its route in a table a rule selects, as
// segchain's headend holds a chain (the rule and route stamped as the
// domain's: the sampler finds them so).
func chainSetup(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	fr, err := tEncaps().Setup(env, k, p)
	if err != nil {
		return nil, err
	}
	r := route(env, k)
	if _, err := env.Run("ip", "-6", "route", "del", r.Dst.String()); err != nil {
		return nil, err
	}
	r.Table = chainTable
	err = env.Do(func() error {
		h, err := dataplane.Open("")
		if err != nil {
			return err
		}
		defer h.Close()
		if err := h.ReplaceRoute(r); err != nil {
			return err
		}
		return h.AddRule(nodestate.Rule{Family: 6, Priority: 20500, Dst: r.Dst, Table: chainTable})
	})
	return fr, err
}

func setupRecipe(env *perf.Env, r int, p perf.Params) ([]byte, error) {
	k := recipeK[r]
	switch r {
	case recTEncaps:
		return tEncaps().Setup(env, k, p)
	case recRoute:
		return routeSetup(Rate)(env, k, p)
	case recBPF:
		return routeSetup(0)(env, k, p)
	case recChain:
		return chainSetup(env, k, p)
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
	// Counted, Marked: the boundary marking arm's counts (its sandwich).
	Counted uint64 `json:",omitempty"`
	Marked  uint64 `json:",omitempty"`
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
	for _, r := range []int{recTEncaps, recRoute, recBPF, recEnd, recChain} {
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
	st.chainKey = oam.ChainKey{First: perf.Addr("far", recipeK[recChain], 1).As16(), Last: perf.Addr("far", recipeK[recChain], 2).As16()}
	var out []Result
	for si, slots := range [][]Slot{HeadSlots, segSlots, BndSlots} {
		if si == 2 {
			// The boundary filter on the input port (the output port
			// trusted: it faces the domain), for the whole sandwich.
			if err := env.Do(func() error {
				return boundary.Apply("", nodestate.Boundary{Trusted: []string{env.Out}, Locators: []netip.Prefix{netip.MustParsePrefix("fc00:ffff::/48")}})
			}); err != nil {
				return nil, fmt.Errorf("boundary filter: %w", err)
			}
			st.bnd = true
			defer env.Do(func() error { return boundary.Remove("") })
		}
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
		if si == 2 && (st.bmSeen == 0 || st.bmMarked < st.bmSeen/Rate) {
			return nil, fmt.Errorf("T.Encaps+boundary+mark-1000: the filter counted %d of its packets, marked %d: not marking 1 in %d", st.bmSeen, st.bmMarked, Rate)
		}
		r := Result{Ref: slots[0].Name, RefNsPerPkt: perf.Summarize(ref.NsPerPacket)}
		if si == 2 {
			r.Counted, r.Marked = st.bmSeen, st.bmMarked
		}
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
