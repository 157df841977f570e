package pool

import (
	"math"
	"math/rand"
	"net/netip"
	"testing"
)

func testPool(weights ...int) Pool {
	p := Pool{Name: "fw", OnFailure: Failover, AllDown: Drop}
	for i, w := range weights {
		sid := netip.AddrFrom16([16]byte{0xfc, 0, 0, byte(i + 2), 15: 0xf1})
		p.Instances = append(p.Instances, Instance{Name: string(rune('a' + i)), SID: sid, Weight: w})
	}
	p.Placeholder = p.Instances[0].SID
	return p
}

func flows(n int) []Flow {
	r := rand.New(rand.NewSource(1))
	out := make([]Flow, n)
	for i := range out {
		var a, b [16]byte
		r.Read(a[:])
		r.Read(b[:])
		out[i] = Flow{Src: netip.AddrFrom16(a), Dst: netip.AddrFrom16(b), Sport: uint16(r.Intn(65536)), Dport: 443, Proto: 6}
	}
	return out
}

// Shares follow the weights within 1 percentage point over 10⁵ flows.
func TestSpreadByWeight(t *testing.T) {
	for _, w := range [][]int{{1, 1, 1}, {2, 1, 1}, {5, 3, 1, 1}} {
		p := testPool(w...)
		got := make([]int, len(w))
		fl := flows(100000)
		for _, f := range fl {
			got[p.Decide(p.AllLive(), f.Hash(true)).Instance]++
		}
		sum := 0
		for _, x := range w {
			sum += x
		}
		for i := range w {
			share, want := float64(got[i])/float64(len(fl)), float64(w[i])/float64(sum)
			if math.Abs(share-want) > 0.01 {
				t.Errorf("weights %v: instance %d has %.3f of the flows, want %.3f ± 0.01", w, i, share, want)
			}
		}
	}
}

// When one of N instances fails only its flows move (≈ 1/N); when it
// recovers (stateless view) exactly those return; nothing else moves.
func TestOnlyFailedFlowsMove(t *testing.T) {
	p := testPool(1, 1, 1)
	fl := flows(30000)
	moved := 0
	for _, f := range fl {
		h := f.Hash(true)
		before := p.Decide(p.AllLive(), h).Instance
		after := p.Decide(p.AllLive()&^2, h)
		if after.Instance != before {
			if before != 1 {
				t.Fatalf("a flow of healthy instance %d moved to %d", before, after.Instance)
			}
			if !after.Moved {
				t.Fatal("a moved flow is not marked moved")
			}
			moved++
		}
	}
	if frac := float64(moved) / float64(len(fl)); frac > 1.0/3+0.02 {
		t.Errorf("%.3f of the flows moved, want ≤ 1/3 + 0.02", frac)
	}
}

// Adding an instance moves flows only to it; seeds come from SIDs, so the
// instances' order does not matter.
func TestStableUnderChange(t *testing.T) {
	p := testPool(1, 1, 1)
	q := testPool(1, 1, 1, 1)
	r := testPool(1, 1, 1)
	r.Instances[0], r.Instances[2] = r.Instances[2], r.Instances[0]
	for _, f := range flows(20000) {
		h := f.Hash(false)
		a := p.Instances[p.Decide(p.AllLive(), h).Instance].SID
		if b := q.Instances[q.Decide(q.AllLive(), h).Instance].SID; b != a && b != q.Instances[3].SID {
			t.Fatalf("adding an instance moved a flow from %s to %s", a, b)
		}
		if c := r.Instances[r.Decide(r.AllLive(), h).Instance].SID; c != a {
			t.Fatalf("reordering moved a flow from %s to %s", a, c)
		}
	}
}

// The canonical hash is the same both ways; the plain one is not.
func TestSymmetricHash(t *testing.T) {
	same := 0
	for _, f := range flows(1000) {
		if f.Hash(true) != f.Reverse().Hash(true) {
			t.Fatalf("flow %v: canonical hashes differ by direction", f)
		}
		if f.Hash(false) == f.Reverse().Hash(false) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d plain hashes equal their reverse's", same)
	}
}

func TestPolicies(t *testing.T) {
	for _, c := range []struct {
		onFailure, allDown string
		live               uint32
		want               Action
	}{
		{Failover, Drop, 0b101, Send}, {Bypass, Drop, 0b101, Bypassed}, {Drop, Drop, 0b101, Dropped},
		{Failover, Drop, 0, Dropped}, {Failover, Bypass, 0, Bypassed},
	} {
		p := testPool(1, 1, 1)
		p.OnFailure, p.AllDown = c.onFailure, c.allDown
		for _, f := range flows(200) {
			h := f.Hash(true)
			if first, _ := p.Choose(p.AllLive(), h); first != 1 && c.live != 0 {
				continue
			}
			if d := p.Decide(c.live, h); d.Action != c.want {
				t.Fatalf("%s/%s live %03b: %v, want %v", c.onFailure, c.allDown, c.live, d.Action, c.want)
			}
		}
	}
}
