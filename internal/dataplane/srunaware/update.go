package srunaware

import (
	"fmt"
)

// Make-before-break changes of installed proxies (Apply). The program reads
// a SID's configuration from two maps, sids_map (inbound half, by SID) and
// ifaces_map (outbound half, by IFACE-IN), and its cache, flows and
// counters from slots indexed by the configuration's id. Every change here
// is a sequence of single map updates, each of which leaves a forwarding
// proxy behind it: nothing is deleted before its replacement is in place.

// update changes the installed SID e to s (same SID, other type or
// parameters) in place: same slot, the new configuration written over the
// old one. Caches are kept where they still apply (End.AS → End.AD starts
// from the static CACHE, which is a valid path until the first packet
// refreshes it); End.AS gets its CACHE before the switch.
func (n *Node) update(ents []entry, e entry, s Spec) error {
	cfg, err := n.prepare(e.cfg, s)
	if err != nil {
		return err
	}
	id := e.cfg.Id
	if cfg.Iif != e.cfg.Iif {
		if err := n.takeIif(s, cfg); err != nil {
			return err
		}
	} else if n.ownsIif(e.cfg) {
		if err := n.objs.IfacesMap.Put(cfg.Iif, &cfg); err != nil {
			return fmt.Errorf("%s: write iif: %w", s.SID, err)
		}
	}
	key := sidKey(s.SID)
	if err := n.objs.SidsMap.Put(&key, &cfg); err != nil {
		return fmt.Errorf("%s: write sid: %w", s.SID, err)
	}
	if cfg.Iif != e.cfg.Iif {
		n.releaseIif(ents, e)
	}
	if s.FlowMax == 0 && e.cfg.FlowMax != 0 {
		_ = n.setFlowCap(id, 0)
	}
	if !s.Flow && e.cfg.Flags&uint8(flagFlow) != 0 {
		n.deleteFlows(&id)
	}
	return n.attachAll()
}

// prepare builds s's configuration in the slot of old and sets up what it
// needs before any map points to it: its per-flow cache (flow max) and,
// for End.AS, its CACHE.
func (n *Node) prepare(old proxyTCProxySid, s Spec) (proxyTCProxySid, error) {
	if err := s.Validate(); err != nil {
		return proxyTCProxySid{}, err
	}
	ifs, err := n.ifaces()
	if err != nil {
		return proxyTCProxySid{}, err
	}
	cfg, err := n.config(s, old.Id, ifs)
	if err != nil {
		return proxyTCProxySid{}, err
	}
	if s.FlowMax != old.FlowMax && s.FlowMax != 0 {
		if err := n.setFlowCap(cfg.Id, s.FlowMax); err != nil {
			return proxyTCProxySid{}, fmt.Errorf("%s: %w", s.SID, err)
		}
	}
	if s.FlowMax == 0 && old.FlowMax != 0 && s.Flow {
		// Back to the node-wide cache: the flows learned in the SID's own
		// go there first (its own is removed once nothing reads it).
		n.carryFlows(cfg.Id, n.objs.FlowsMap, 0)
	}
	if s.Behavior == EndAS {
		if err := n.putStaticCache(s, cfg.Id); err != nil {
			return proxyTCProxySid{}, err
		}
	}
	return cfg, nil
}

// ownsIif reports whether cfg's SID is the one ifaces_map serves on its
// IFACE-IN.
func (n *Node) ownsIif(cfg proxyTCProxySid) bool {
	var cur proxyTCProxySid
	return n.objs.IfacesMap.Lookup(cfg.Iif, &cur) == nil && cur.Id == cfg.Id
}

// takeIif makes cfg the owner of its IFACE-IN in one map update.
func (n *Node) takeIif(s Spec, cfg proxyTCProxySid) error {
	if err := n.objs.IfacesMap.Put(cfg.Iif, &cfg); err != nil {
		return fmt.Errorf("%s: write iif: %w", s.SID, err)
	}
	return nil
}

// handOver installs the new SID s whose IFACE-IN belongs to the installed
// SID old (a SID change, or a new proxy replacing one on the same SF
// link): s gets old's slot (cache, flows, counters), so the packets the SF
// returns are re-encapsulated with the cache old learned until s learns
// its own; the IFACE-IN then passes to s in one map update. old keeps
// serving its SID inbound until it is deleted (Apply deletes it last, after
// the headends have been steered to s).
func (n *Node) handOver(old entry, s Spec) error {
	cfg, err := n.prepare(old.cfg, s)
	if err != nil {
		return err
	}
	key := sidKey(s.SID)
	if err := n.objs.SidsMap.Put(&key, &cfg); err != nil {
		return fmt.Errorf("%s: write sid: %w", s.SID, err)
	}
	if err := n.takeIif(s, cfg); err != nil {
		return err
	}
	return n.attachAll()
}

// settle finishes a hand-over once the old SID is gone and s alone uses
// slot id: the state s does not use is dropped, and an End.AS gets its
// configured CACHE back (the old SID's inbound half may have written a
// learned one over it).
func (n *Node) settle(id uint32, s Spec) error {
	if s.FlowMax == 0 {
		_ = n.setFlowCap(id, 0)
	}
	if !s.Flow {
		n.deleteFlows(&id)
	}
	if s.Behavior == EndAS {
		return n.putStaticCache(s, id)
	}
	return nil
}
