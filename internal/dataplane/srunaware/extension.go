package srunaware

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/segchain/segchain/internal/localsid"
)

// Extension plugs the proxies into `segchain sid` (localsid.Extension).
type Extension struct{}

var _ localsid.Extension = Extension{}

// Behaviors implements localsid.Extension.
func (Extension) Behaviors() []string { return Behaviors }

// Add implements localsid.Extension.
func (Extension) Add(netns string, sid netip.Prefix, behavior string, params []string) error {
	s, err := ParseSpec(sid, behavior, params)
	if err != nil {
		return err
	}
	return withNode(netns, func(n *Node) error { return n.Add(s) })
}

// Del implements localsid.Extension.
func (Extension) Del(netns string, sid netip.Prefix) (bool, error) {
	if !installed(netns) {
		return false, nil
	}
	var found bool
	err := withNode(netns, func(n *Node) (err error) {
		found, err = n.Del(sid)
		return err
	})
	return found, err
}

// Show implements localsid.Extension: counters under "packets", "bytes",
// "errors" plus in-/out- split, cache updates and "drop-<reason>"; the
// Extra is the full Status (spec, counters, cache contents).
func (Extension) Show(netns string) ([]localsid.Entry, error) {
	if !installed(netns) {
		return nil, nil
	}
	var out []localsid.Entry
	err := withNode(netns, func(n *Node) error {
		sts, err := n.Show()
		for _, st := range sts {
			out = append(out, EntryOf(st))
		}
		return err
	})
	return out, err
}

// EntryOf converts a Status to a `sid show` entry.
func EntryOf(st Status) localsid.Entry {
	p := st.Spec.Params()
	params := map[string]string{}
	for i := 0; i < len(p); i++ {
		if p[i] == "flow" {
			params["flow"] = "true"
			continue
		}
		if i+1 < len(p) {
			params[p[i]] = p[i+1]
			i++
		}
	}
	c := st.Counters
	counters := map[string]uint64{
		"packets": c.InPackets + c.OutPackets, "bytes": c.InBytes + c.OutBytes,
		"in-packets": c.InPackets, "in-bytes": c.InBytes, "out-packets": c.OutPackets,
		"out-bytes": c.OutBytes, "passed": c.Passed, "cache-updates": c.CacheUpdates, "icmp-errors": c.ICMPErrors,
		"cache-entries": uint64(len(st.Cache)),
		"not-returned":  c.NotReturned(),
	}
	var errs uint64
	for r, v := range c.Drops {
		counters["drop-"+r] = v
		errs += v
	}
	counters["errors"] = errs
	// Per direction: the way in (to the SF) and the way back.
	counters["in-drops"], counters["out-drops"] = errs-min(c.OutDrops, errs), c.OutDrops
	return localsid.Entry{SID: st.Spec.SID, Behavior: st.Spec.Behavior, Params: params, Counters: counters, Extra: st}
}

// Flush implements localsid.Extension.
func (Extension) Flush(netns string) error {
	if !installed(netns) {
		return nil
	}
	return withNode(netns, func(n *Node) error { return n.Flush() })
}

// ClearCounters implements localsid.Extension.
func (Extension) ClearCounters(netns string, sid *netip.Prefix) error {
	if !installed(netns) {
		return nil
	}
	return withNode(netns, func(n *Node) error { return n.ClearCounters(sid) })
}

// installed reports whether netns has pinned proxy state (so read-only
// verbs do not create any).
func installed(netns string) bool {
	dir, err := pinDir(netns, false)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, "sids_map"))
	return err == nil
}

func withNode(netns string, fn func(*Node) error) error {
	n, err := Open(netns)
	if err != nil {
		return err
	}
	defer n.Close()
	return fn(n)
}

// Apply makes the proxies of netns exactly specs (the planner's entry
// point). It is idempotent: unchanged SIDs keep their caches and counters,
// changed ones are updated in place, SIDs not in specs are removed, and
// nothing stops forwarding on the way (make-before-break, see update.go):
//
//   - a SID whose type or parameters change is rewritten in place (its map
//     entries replaced, never deleted);
//   - a new SID whose IFACE-IN belongs to an installed SID takes that SID's
//     slot and then its IFACE-IN, in one map update each (hand-over); the
//     old SID keeps serving inbound packets until it is removed;
//   - removed SIDs go last.
//
// specs may hold such an old SID together with its successor (both with the
// same IFACE-IN): the controller first applies the union of the old and the
// new proxies, steers the headends, then applies the new list alone.
func Apply(netns string, specs []Spec) error {
	var errs []error
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(specs) == 0 {
		return Remove(netns)
	}
	return withNode(netns, func(n *Node) error {
		cur, err := n.entries()
		if err != nil {
			return err
		}
		sts, err := n.Show()
		if err != nil {
			return err
		}
		have := map[netip.Prefix]Spec{}
		for _, st := range sts {
			have[st.Spec.SID] = st.Spec
		}
		want := map[netip.Prefix]bool{}
		for _, s := range specs {
			want[s.SID] = true
		}
		installed := map[netip.Prefix]entry{}
		for _, e := range cur {
			installed[e.sid] = e
		}
		for _, s := range specs {
			e, ok := installed[s.SID]
			if !ok {
				continue
			}
			if have[s.SID].Equal(s) {
				continue
			}
			if err := n.update(cur, e, s); err != nil {
				return err
			}
			if cur, err = n.entries(); err != nil {
				return err
			}
		}
		for _, s := range specs {
			if _, ok := installed[s.SID]; ok {
				continue
			}
			ifs, err := n.ifaces()
			if err != nil {
				return err
			}
			iif, err := n.iface(ifs, s, "iif", s.IIF)
			if err != nil {
				return err
			}
			var owner *entry
			for i := range cur {
				if ifaceInConflict(s, cur[i], uint32(iif.Index)) && n.ownsIif(cur[i].cfg) {
					owner = &cur[i]
				}
			}
			if owner != nil {
				err = n.handOver(*owner, s)
			} else {
				err = n.Add(s)
			}
			if err != nil {
				return err
			}
			if cur, err = n.entries(); err != nil {
				return err
			}
		}
		// A hand-over leaves two SIDs on one slot until the old one
		// goes; then the slot is settled for the survivor.
		before := map[uint32]int{}
		for _, e := range cur {
			before[e.cfg.Id]++
		}
		after := map[uint32]int{}
		for _, e := range cur {
			if want[e.sid] {
				after[e.cfg.Id]++
				continue
			}
			if _, err := n.Del(e.sid); err != nil {
				return err
			}
		}
		for _, s := range specs {
			e, ok := slotOf(cur, s.SID)
			if ok && before[e.cfg.Id] > 1 && after[e.cfg.Id] == 1 {
				if err := n.settle(e.cfg.Id, s); err != nil {
					return err
				}
			}
		}
		return n.attachAll()
	})
}

// slotOf finds sid's entry in ents.
func slotOf(ents []entry, sid netip.Prefix) (entry, bool) {
	for _, e := range ents {
		if e.sid == sid {
			return e, true
		}
	}
	return entry{}, false
}

// Remove deletes every proxy of netns (program, links, maps).
func Remove(netns string) error {
	if !installed(netns) {
		return nil
	}
	return withNode(netns, func(n *Node) error { return n.Flush() })
}

// FormatStatus renders a Status as `sid show` text lines.
func FormatStatus(st Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n    in %d pkts %d bytes, out %d pkts %d bytes, passed %d, cache updates %d, packet-too-big sent %d",
		st.Spec, st.Counters.InPackets, st.Counters.InBytes, st.Counters.OutPackets,
		st.Counters.OutBytes, st.Counters.Passed, st.Counters.CacheUpdates, st.Counters.ICMPErrors)
	for r, v := range st.Counters.Drops {
		fmt.Fprintf(&b, ", drop %s %d", r, v)
	}
	for _, c := range st.Cache {
		b.WriteString("\n    cache")
		if c.Flow != "" {
			b.WriteString(" [" + c.Flow + "]")
		}
		if c.Terminal {
			fmt.Fprintf(&b, " terminal (last segment), age %s", c.Age)
			continue
		}
		h := c.Header
		fmt.Fprintf(&b, " src %s da %s sl %d path %v hlim %d len %d age %s", h.Src, h.DA, h.SL, h.Path, h.HopLimit, h.Len, c.Age)
	}
	return b.String()
}
