package srunaware

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/segchain/segchain/internal/agent"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/service/srunaware"
)

// NodeKind is the sr-unaware kind's node half (local.ServiceKind):
// the SR proxies of a namespace, served by this package's tc program.
type NodeKind struct{}

// Name is the kind's name.
func (NodeKind) Name() string { return srunaware.Name }

// Observe reads the proxies of netns without creating any proxy state, in
// the canonical `sid add` form (Spec.Params).
func (NodeKind) Observe(netns string) ([]nodestate.Service, error) {
	ents, err := Extension{}.Show(netns)
	if err != nil {
		return nil, err
	}
	var out []nodestate.Service
	for _, e := range ents {
		st, ok := e.Extra.(Status)
		if !ok {
			return nil, fmt.Errorf("proxy %s: no status", e.SID)
		}
		out = append(out, srunaware.Of(st.Spec).Service())
	}
	return out, nil
}

// SIDExtension is the kind's `segchain sid` syntax (Extension).
func (NodeKind) SIDExtension() localsid.Extension { return Extension{} }

// Purge removes every proxy of netns (Remove).
func (NodeKind) Purge(netns string) error { return Remove(netns) }

// Faults lists the broken eBPF objects behind the proxies (Check).
func (NodeKind) Faults(netns string) ([]string, error) { return Check(netns) }

// Repair drops what Faults found broken, so that Apply installs it again.
func (NodeKind) Repair(netns string) error { return Repair(netns) }

// AttachNew attaches the proxy program to interfaces created since.
func (NodeKind) AttachNew(netns string) error { return AttachNew(netns) }

// Apply replaces the node's proxy set as a whole: want, plus the installed
// proxies made by hand (handMade), which stay; old is not needed.
func (NodeKind) Apply(netns string, want, _ []nodestate.Service, handMade map[netip.Prefix]string) error {
	specs := make([]Spec, 0, len(want))
	for _, s := range want {
		sp, err := srunaware.SpecOf(s)
		if err != nil {
			return err
		}
		specs = append(specs, sp)
	}
	kept, err := handMadeSpecs(netns, handMade)
	if err != nil {
		return err
	}
	specs = append(specs, kept...)
	if len(specs) == 0 {
		return Remove(netns)
	}
	return Apply(netns, specs)
}

// handMadeSpecs returns the installed proxies of netns made by hand.
func handMadeSpecs(netns string, hm map[netip.Prefix]string) ([]Spec, error) {
	if len(hm) == 0 {
		return nil, nil
	}
	ents, err := Extension{}.Show(netns)
	if err != nil {
		return nil, err
	}
	var out []Spec
	for _, e := range ents {
		if st, ok := e.Extra.(Status); ok {
			if _, mine := hm[e.SID]; mine {
				out = append(out, st.Spec)
			}
		}
	}
	return out, nil
}

// Capacity: the proxy's tables are sized for any plan config accepts.
func (NodeKind) Capacity(string, []nodestate.Service) error { return nil }

// Counters reports every proxy SID with its counters.
func (NodeKind) Counters(netns string) ([]agent.SIDCounters, error) {
	prx, err := Extension{}.Show(netns)
	if err != nil {
		return nil, err
	}
	var out []agent.SIDCounters
	for _, e := range prx {
		st, _ := e.Extra.(Status)
		out = append(out, agent.SIDCounters{SID: e.SID, Behavior: e.Behavior, Route: st.Spec.String(), Owned: true, Counted: true,
			Packets: e.Counters["packets"], Bytes: e.Counters["bytes"], Errors: e.Counters["errors"], Detail: detail(e.Counters)})
	}
	return out, nil
}

// detail keeps the counters status shows under a SID: each direction,
// the packets sent to the SF that never came back, and every drop reason.
func detail(c map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range c {
		switch {
		case k == "in-packets", k == "out-packets", k == "in-drops", k == "out-drops", k == "not-returned", strings.HasPrefix(k, "drop-"):
			out[k] = v
		}
	}
	return out
}
