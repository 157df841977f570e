// Package oamperf is O-flag sampling's recipe for `segchain perf`
// (docs/oam.md, docs/benchmarks.md "#30"): T.Encaps whose chain the
// headend samples 1 in 1000, against T.Encaps in the same run.
package oamperf

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/perf"
)

// Rate is the arm's sampling rate: 1 in Rate (the 1:1000).
const Rate = 1000

// Recipes: T.Encaps.oam, T.Encaps.oam.route, T.Encaps.route and
// T.Encaps.xmit.
//
//	T.Encaps.oam      sessions 10-12's marker: a TCX egress program first
//	                  on the SUT's output port, 1:1000, its marks read by
//	                  this process. Every arm of a run that has it crosses
//	                  it (the port is shared): T.Encaps's ratio then hides
//	                  the hook's cost (segchain perf oam measures it
//	                  against a headend without it).
//	T.Encaps.oam.route the route of T.Encaps (same prefix, device, SID
//	                  list far1,far2) as segchain's sampling marker holds
//	                  it: `encap bpf in` whose program pushes the same SRH
//	                  through the kernel's encapsulation and the O-flagged
//	                  copy on 1 packet in 1000, its marks read by a reader
//	                  of this process. Nothing on any interface: the
//	                  baseline T.Encaps (the kernel's `encap seg6`) crosses
//	                  no sampling program at all.
//	T.Encaps.route    the same program marking none (rate 0): the cost of
//	                  the BPF encapsulation itself, without the marks.
//	T.Encaps.xmit     a measurement: the route as `encap bpf xmit` via the
//	                  first SID's gateway, the program pushing the whole
//	                  outer header, no lookup after it (no HMAC, no GSO:
//	                  not a replacement for the kernel's encapsulation).
//	T.Encaps.xmit0    the same route marking none.
func Recipes() []perf.Recipe {
	return []perf.Recipe{
		perf.NewRecipe("T.Encaps.oam", fmt.Sprintf("headend: encap seg6 mode encap, 2 SIDs, the chain O-flag sampled 1 in %d by segchain's TCX marker on the output port (crossed by every arm)", Rate), tcxSetup),
		perf.NewRecipe("T.Encaps.oam.route", fmt.Sprintf("headend: the T.Encaps route as encap bpf in (the kernel's H.Encaps through bpf_lwt_push_encap), O-flag on 1 in %d", Rate), routeSetup(Rate)),
		perf.NewRecipe("T.Encaps.route", "headend: the T.Encaps route as encap bpf in, marking none", routeSetup(0)),
		perf.NewRecipe("T.Encaps.xmit", fmt.Sprintf("headend: the T.Encaps route as encap bpf xmit via the first SID's gateway, the program pushing the outer header itself, O-flag on 1 in %d (a measurement: no HMAC, no GSO)", Rate), xmitSetup(Rate)),
		perf.NewRecipe("T.Encaps.xmit0", "headend: T.Encaps.xmit marking none (its reference: the same route without sampling)", xmitSetup(0)),
	}
}

// tEncaps is the native T.Encaps recipe: the arms' routes and frames are
// built by the same code as their control's.
func tEncaps() perf.Recipe {
	for _, r := range perf.NativeRecipes() {
		if r.Name() == "T.Encaps" {
			return r
		}
	}
	panic("perf has no T.Encaps recipe")
}

// route is T.Encaps's route of arm k (perf's headend recipe).
func route(env *perf.Env, k int) nodestate.Route {
	return nodestate.Route{Dst: netip.PrefixFrom(perf.Addr("hx", k, 0), 48), Dev: env.Out,
		Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: []netip.Addr{perf.Addr("far", k, 1), perf.Addr("far", k, 2)}}}
}

func routeSetup(rate uint32) func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	return func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
		attach := func(r nodestate.Route) (*oam.RouteMarker, error) { return oam.AttachRouteMarker(r, rate) }
		return markerArm(env, k, p, "T.Encaps.oam.route", attach, func(c oam.SampleCounts) bool {
			return c.Marked != 0 && c.Marked == (c.Seen+uint64(rate)-1)/uint64(rate)
		}, rate)
	}
}

func xmitSetup(rate uint32) func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	return func(env *perf.Env, k int, p perf.Params) ([]byte, error) {
		// 63: the hop limit the kernel's T.Encaps leaves with (64, less
		// the forwarding of the outer packet).
		attach := func(r nodestate.Route) (*oam.RouteMarker, error) {
			return oam.AttachXmitRoute(r, netip.MustParseAddr(perf.SUTOut6), netip.MustParseAddr(perf.TesterRx6), 63, rate)
		}
		return markerArm(env, k, p, "T.Encaps.xmit", attach, func(c oam.SampleCounts) bool { return c.Marked != 0 }, rate)
	}
}

// markerArm sets up T.Encaps's arm k with its route made a route marker
// by attach; at clean-up, with a rate, the marker's counts must pass ok.
func markerArm(env *perf.Env, k int, p perf.Params, name string, attach func(nodestate.Route) (*oam.RouteMarker, error), ok func(oam.SampleCounts) bool, rate uint32) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("%s needs the SUT's namespace here: %w", name, perf.ErrNotSupported)
	}
	frame, err := tEncaps().Setup(env, k, p)
	if err != nil {
		return nil, err
	}
	var m *oam.RouteMarker
	if err := env.Do(func() error {
		var err error
		m, err = attach(route(env, k))
		return err
	}); err != nil {
		return nil, err
	}
	if env.Cleanup != nil {
		env.Cleanup(func() error {
			c, _ := m.Counts()
			err := env.Do(m.Close)
			if rate > 0 && c.Seen > 0 && !ok(c) {
				err = errors.Join(err, fmt.Errorf("%s: the marker counted %d packets and marked %d, want 1 in %d", name, c.Seen, c.Marked, rate))
			}
			return err
		})
	}
	return frame, nil
}

func tcxSetup(env *perf.Env, k int, p perf.Params) ([]byte, error) {
	if env.Do == nil {
		return nil, fmt.Errorf("T.Encaps.oam needs the SUT's namespace here: %w", perf.ErrNotSupported)
	}
	frame, err := tEncaps().Setup(env, k, p)
	if err != nil {
		return nil, err
	}
	// T.Encaps's SID list: far1, far2 of arm k.
	key := oam.ChainKey{First: perf.Addr("far", k, 1).As16(), Last: perf.Addr("far", k, 2).As16()}
	var m *oam.Marker
	err = env.Do(func() error {
		var err error
		m, err = oam.AttachMarker(env.Out, key, Rate)
		return err
	})
	if err != nil {
		return nil, err
	}
	if env.Cleanup != nil {
		env.Cleanup(func() error {
			c, _ := m.Counts()
			err := m.Close()
			if c.Seen > 0 && c.Marked == 0 {
				err = errors.Join(err, fmt.Errorf("T.Encaps.oam: the marker counted %d packets of its chain and marked none", c.Seen))
			}
			return err
		})
	}
	return frame, nil
}
