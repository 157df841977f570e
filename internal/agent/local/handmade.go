package local

import (
	"net/netip"
	"sort"

	"github.com/segchain/segchain/internal/nodestate"
)

// The ownership record of hand-made eBPF SIDs is localsid's (HandMade,
// MarkHandMade, ForgetHandMade): segchain sid writes it, apply reads it here.

// handMadeForeign lists hand-made eBPF SIDs as foreign routes, for the
// conflict check (the protocol says "hand-made").
func handMadeForeign(m map[netip.Prefix]string) []nodestate.ForeignRoute {
	var out []nodestate.ForeignRoute
	for sid, b := range m {
		out = append(out, nodestate.ForeignRoute{Route: nodestate.Route{Dst: sid, Seg6Local: &nodestate.Seg6Local{Action: b}}, Protocol: nodestate.ProtoManual})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Route.Dst.Addr().Less(out[j].Route.Dst.Addr()) })
	return out
}

// ownedOnly drops the hand-made eBPF SIDs (hm) from what Observe found, so
// that apply and destroy never change or remove them, and lists them in
// got.Foreign for the conflict check.
func ownedOnly(got *nodestate.Node, hm map[netip.Prefix]string) {
	if len(hm) == 0 {
		return
	}
	var svcs []nodestate.Service
	for _, s := range got.Services {
		if _, ok := hm[s.SID]; !ok {
			svcs = append(svcs, s)
		}
	}
	got.Services = svcs
	got.Foreign = append(got.Foreign, handMadeForeign(hm)...)
}
