package firewall

import (
	"fmt"
	"net/netip"
	"sort"
)

// span is a range [lo, hi) of a shared pool (bitmaps or value blocks).
type span struct{ lo, hi uint32 }

// firstFit is the lowest start of count free entries in a pool of size max
// outside the used spans.
func firstFit(used []span, count int, max uint32) (uint32, bool) {
	u := append([]span(nil), used...)
	sort.Slice(u, func(i, j int) bool { return u[i].lo < u[j].lo })
	var at uint32
	for _, x := range u {
		if x.lo >= at+uint32(count) {
			break
		}
		at = max32(at, x.hi)
	}
	return at, at+uint32(count) <= max
}

func poolFull(count int, what string, max uint32, used []span) error {
	var inUse uint32
	for _, u := range used {
		inUse += u.hi - u.lo
	}
	return fmt.Errorf("the rule set needs %d %s; the node's pool holds %d and the active rule sets use %d "+
		"(a replacement needs room for the old and the new set at once; see docs/firewall.md#limits)", count, what, max, inUse)
}

// Need is what a rule set takes from the node's shared pools: bitmaps and
// 256-entry value blocks (docs/firewall.md#limits).
func Need(in Instance) (bitmaps, blocks int, err error) {
	c, err := compile(in)
	if err != nil {
		return 0, 0, err
	}
	return len(c.bitmaps), len(c.blocks), nil
}

// CheckCapacity reports, without changing anything, whether installing want in
// order (each one as Apply would: the new table written while every active
// one, its own old one included, stays in place) fits the node's pools and
// instance slots. The error names the instance and the numbers.
func CheckCapacity(netns string, want []Instance) error {
	type alloc struct{ bm, bk span }
	active := map[netip.Prefix]alloc{}
	if installed(netns) {
		err := withNode(netns, func(n *Node) error {
			insts, err := n.instances()
			if err != nil {
				return err
			}
			for _, e := range insts {
				var t fwTCFwTable
				if err := n.objs.FwTables.Lookup(tableID(e.Val.Id, e.Val.Slot), &t); err != nil {
					return fmt.Errorf("read table: %w", err)
				}
				active[e.SID] = alloc{span{t.BmBase, t.BmBase + t.BmCount}, span{t.BkBase, t.BkBase + t.BkCount}}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, in := range want {
		c, err := compile(in)
		if err != nil {
			return err
		}
		sid := in.SID.Masked()
		if _, ok := active[sid]; !ok && len(active) >= MaxInstances {
			return fmt.Errorf("%s: at most %d firewall SIDs per node", sid, MaxInstances)
		}
		var bms, bks []span
		for _, a := range active {
			bms, bks = append(bms, a.bm), append(bks, a.bk)
		}
		bm, ok := firstFit(bms, len(c.bitmaps), maxBitmaps)
		if !ok {
			return fmt.Errorf("%s: %w", sid, poolFull(len(c.bitmaps), "bitmaps", maxBitmaps, bms))
		}
		bk, ok := firstFit(bks, len(c.blocks), maxBlocks)
		if !ok {
			return fmt.Errorf("%s: %w", sid, poolFull(len(c.blocks), "value blocks", maxBlocks, bks))
		}
		active[sid] = alloc{span{bm, bm + uint32(len(c.bitmaps))}, span{bk, bk + uint32(len(c.blocks))}}
	}
	return nil
}
