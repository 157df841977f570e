package srunaware

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// TestApplyMakeBeforeBreak checks the map-level steps of Apply: a type
// change keeps the SID's slot, an IFACE-IN moves to a new SID in the union
// step (both SIDs installed, the new one owning the IFACE-IN, sharing the
// old one's slot), and dropping the old SID leaves the new one whole.
func TestApplyMakeBeforeBreak(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "pxm")
	t.Cleanup(func() { _ = Remove(ns) })
	testutil.Exec(t, ns, "ip", "link", "add", "sf0", "type", "veth", "peer", "sf1")
	spec := func(sid, behavior, params string) Spec {
		t.Helper()
		s, err := ParseSpec(netip.MustParsePrefix(sid), behavior, strings.Fields(params))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	state := func() map[string]uint32 { // SID -> slot, "iif" -> owner's slot
		t.Helper()
		out := map[string]uint32{}
		err := withNode(ns, func(n *Node) error {
			ents, err := n.entries()
			for _, e := range ents {
				out[e.sid.Addr().String()] = e.cfg.Id
				if n.ownsIif(e.cfg) {
					out["iif owner "+e.sid.Addr().String()] = e.cfg.Id
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ad := spec("fc00:2::ad/128", "End.AD6", "nh6 fc00:5f::2 oif sf0 iif sf0")
	if err := Apply(ns, []Spec{ad}); err != nil {
		t.Fatal(err)
	}
	slot := state()["fc00:2::ad"]

	as := spec("fc00:2::ad/128", "End.AS", "inner ipv6 nh6 fc00:5f::2 oif sf0 iif sf0 src fc00:2::1 segs fc00:4::1")
	if err := Apply(ns, []Spec{as}); err != nil {
		t.Fatalf("type change: %v", err)
	}
	if got := state(); got["fc00:2::ad"] != slot || got["iif owner fc00:2::ad"] != slot {
		t.Errorf("after the type change: %v, want SID and IFACE-IN on slot %d", got, slot)
	}

	moved := spec("fc00:2::ae/128", "End.AS", "inner ipv6 nh6 fc00:5f::2 oif sf0 iif sf0 src fc00:2::1 segs fc00:4::1")
	if err := Apply(ns, []Spec{as, moved}); err != nil {
		t.Fatalf("union step of the SID change: %v", err)
	}
	got := state()
	if got["fc00:2::ad"] != slot || got["fc00:2::ae"] != slot || got["iif owner fc00:2::ae"] != slot {
		t.Errorf("union step: %v, want both SIDs on slot %d, the IFACE-IN with the new one", got, slot)
	}
	// While both share the slot, the old SID's inbound half may write the
	// cache (an End.AD learning): the final step must restore the CACHE.
	learned := spec("fc00:2::ad/128", "End.AS", "inner ipv6 nh6 fc00:5f::2 oif sf0 iif sf0 src fc00:1::1 segs fc00:9::1,fc00:4::1")
	if err := withNode(ns, func(n *Node) error { return n.putStaticCache(learned, slot) }); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ns, []Spec{moved}); err != nil {
		t.Fatalf("final step of the SID change: %v", err)
	}
	sts, err := Extension{}.Show(ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(sts) != 1 || sts[0].Extra.(Status).Spec.String() != moved.String() {
		t.Errorf("after the SID change: %v, want only %s", sts, moved)
	}
	if got := state(); got["iif owner fc00:2::ae"] != slot {
		t.Errorf("after the SID change: %v, want the new SID owning the IFACE-IN", got)
	}
}
