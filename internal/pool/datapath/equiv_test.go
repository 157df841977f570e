package datapath

import (
	"fmt"
	"math/rand"
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/testutil"
)

// frameProto is frame with the inner packet's protocol proto (TCP, UDP:
// ports; anything else: none, the model's ports 0 as the flow label is 0).
func frameProto(p pool.Pool, f pool.Flow) []byte {
	l4 := testutil.L4(f.Sport, f.Dport, []byte("payload!"))
	var inner []byte
	var nh uint8 = 41
	if f.Src.Is4() {
		inner = testutil.IPv4(f.Src.String(), f.Dst.String(), f.Proto, false, l4)
		nh = 4
	} else {
		inner = testutil.IPv6(f.Src, f.Dst, f.Proto, 64, l4)
	}
	srh := testutil.SRH(nh, []netip.Addr{egress, p.Placeholder}, 1, 0, nil, inner)
	return testutil.Eth(peer, mac, 0x86dd, testutil.IPv6(src, p.Placeholder, 43, 64, srh))
}

// TestSelectionManyFlowsMatchesHRW: the selector's per-packet shortcuts
// (direct packet access, the per-CPU cache of flow hashes) pick exactly
// what the reference weighted HRW (internal/pool) picks, for thousands of
// flows: IPv6 and IPv4, TCP, UDP and portless, symmetric or not, each
// flow sent twice in a row (a cache hit), its reverse direction, and its
// twin with the ports swapped (the same cache slot, another flow).
func TestSelectionManyFlowsMatchesHRW(t *testing.T) {
	h, ns, ifx := openTest(t)
	r := rand.New(rand.NewSource(2929))
	for _, sym := range []bool{false, true} {
		p := testPool(pool.Failover)
		p.Symmetric = sym
		p.Name = fmt.Sprintf("fw-sym-%v", sym)
		if err := h.Program([]pool.Pool{p}); err != nil {
			t.Fatal(err)
		}
		for _, live := range []uint32{p.AllLive(), p.AllLive() &^ 2} {
			if err := h.SetLive(0, live); err != nil {
				t.Fatal(err)
			}
			var fl []pool.Flow
			for n := 0; n < 600; n++ {
				f := randFlow(r, n%3 == 0)
				switch n % 5 {
				case 1:
					f.Proto = 6
				case 2: // portless: ICMP(v6), the ports read as 0
					f.Proto, f.Sport, f.Dport = 1, 0, 0
					if f.Src.Is6() {
						f.Proto = 58
					}
				}
				tw := f
				tw.Sport, tw.Dport = f.Dport, f.Sport
				// f twice (the second a cache hit), its reverse and its
				// twin (both in f's cache slot), f again.
				fl = append(fl, f, f, f.Reverse(), tw, f)
			}
			pkts := make([][]byte, len(fl))
			for i, f := range fl {
				pkts[i] = frameProto(p, f)
			}
			rets, outs := runBatch(t, ns, h, ifx, pkts)
			bad := 0
			for i, f := range fl {
				got := outcome(t, p, rets[i], pkts[i], outs[i])
				want := p.Decide(live, f.Hash(sym))
				if got.Action != want.Action || got.Instance != want.Instance {
					if bad++; bad <= 5 {
						t.Errorf("symmetric %v live %03b flow %v (packet %d): program %v/%d, HRW %v/%d", sym, live, f, i, got.Action, got.Instance, want.Action, want.Instance)
					}
				}
			}
			if bad > 0 {
				t.Errorf("symmetric %v live %03b: %d of %d packets differ from the HRW", sym, live, bad, len(fl))
			}
		}
	}
}
