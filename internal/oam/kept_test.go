package oam

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/plan"
)

// keptWeb is the default example with web (and, bidirectional, nothing
// else) keeping sampling at 1 in rate and the responder.
func keptWeb(t *testing.T, rate int) (*config.Domain, *plan.Plan) {
	t.Helper()
	d, err := config.Load("../../examples/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d.Chains["web"].OAM = &config.ChainOAM{Sample: rate, Respond: true}
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	return d, p
}

// The headend marks, each segment's node taps for its own segments only,
// the SIDs' nodes respond; no other node keeps anything.
func TestKeepPlan(t *testing.T) {
	d, p := keptWeb(t, 100)
	got, err := KeepPlan(d, p)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, n := range sortedKeys(got) {
		s := got[n]
		for _, k := range s.Samples {
			lines = append(lines, fmt.Sprintf("%s %s rate=%d tap=%v sids=%v", n, k.Chain, k.Rate, k.Tap, k.SIDs))
		}
		if s.Respond {
			lines = append(lines, n+" respond")
		}
	}
	want := []string{
		"egress web rate=0 tap=true sids=[fc00:4::8ae:0]",
		"egress respond",
		"ingress web rate=100 tap=false sids=[]",
		"nfv1 web rate=0 tap=true sids=[fc00:2::646c:0]",
		"nfv1 respond",
		"nfv2 web rate=0 tap=true sids=[fc00:3::695e:0]",
		"nfv2 respond",
	}
	if g, w := strings.Join(lines, "\n"), strings.Join(want, "\n"); g != w {
		t.Errorf("keep plan:\n%s\nwant:\n%s", g, w)
	}
}

// fakeKeeping answers Sightings from per-node events on one kernel.
type fakeKeeping struct {
	evs  map[string][]SampleEvent
	next map[string]uint64 // > len(evs): the ring wrapped
	now  time.Duration
	kept map[string]bool
}

func (f *fakeKeeping) Has(n string) bool { return true }
func (f *fakeKeeping) Keep(context.Context, string, KeepSet) (int, error) {
	return 0, nil
}
func (f *fakeKeeping) Sightings(_ context.Context, n, _ string, after uint64) (NodeSightings, error) {
	r := NodeSightings{Boot: "b", Offset: 0, Now: f.now}
	r.Kept = f.kept[n]
	r.Next = f.next[n]
	if r.Next == 0 {
		r.Next = uint64(len(f.evs[n]))
	}
	r.Events = f.evs[n]
	if n == "ingress" {
		r.Counts = SampleCounts{Seen: 1000, Marked: 10}
	}
	return r, nil
}

// Status pairs the nodes' sightings: packets seen at every hop with
// their steps; a mark whose sightings are gone from a wrapped ring, or
// marked too recently, is outside the window, not incomplete.
func TestKeptSamplingPairs(t *testing.T) {
	d, p := keptWeb(t, 100)
	f := &fakeKeeping{evs: map[string][]SampleEvent{}, next: map[string]uint64{}, kept: map[string]bool{"ingress": true, "nfv1": true, "nfv2": true, "egress": true},
		now: time.Second}
	sid := func(s string) [16]byte { return netip.MustParseAddr(s).As16() }
	hops := []struct {
		node string
		da   [16]byte
		us   int
	}{{"nfv1", sid("fc00:2::646c:0"), 20}, {"nfv2", sid("fc00:3::695e:0"), 30}, {"egress", sid("fc00:4::8ae:0"), 10}}
	for i := 0; i < 12; i++ {
		var id [48]byte
		id[0], id[1] = 0x60, byte(i)
		at := time.Duration(i+1) * time.Millisecond
		if i == 11 {
			at = f.now // marked just now: on its way
		}
		f.evs["ingress"] = append(f.evs["ingress"], SampleEvent{At: at, Kind: 1, ID: id})
		for _, h := range hops {
			at += time.Duration(h.us) * time.Microsecond
			if i == 0 && h.node == "nfv2" {
				continue // the oldest: gone from nfv2's wrapped ring
			}
			if i == 11 {
				break
			}
			f.evs[h.node] = append(f.evs[h.node], SampleEvent{At: at, ID: id, DA: h.da})
		}
	}
	f.next["nfv2"] = KeepRing + 5 // wrapped: its window starts at its oldest
	dm := Domain{Config: d, Plan: p}
	got := KeptSampling(context.Background(), dm, f)
	if len(got) != 1 {
		t.Fatalf("%+v", got)
	}
	kc := got[0]
	// Out of the window: the last (on its way), the first (its nfv2
	// sighting is gone) and the second (marked before nfv2's oldest
	// sighting: whether its own is still there cannot be told).
	if kc.Window != 9 || kc.Incomplete != 0 || kc.Marked != 10 || kc.Packets != 1000 {
		t.Errorf("window %d, incomplete %d, counts %d/%d: want 9, 0, 10/1000", kc.Window, kc.Incomplete, kc.Marked, kc.Packets)
	}
	for i, h := range kc.Hops {
		if h.Packets != 9 {
			t.Errorf("hop %d %s: %d packets, want 9", i, h.Node, h.Packets)
		}
		if i > 0 && (h.StepUS == nil || h.StepUS.P50 != float64(hops[i-1].us)) {
			t.Errorf("hop %d %s: step %+v, want %d µs", i, h.Node, h.StepUS, hops[i-1].us)
		}
	}
	// A node that does not keep the chain is a problem, and its hop
	// makes the packets incomplete.
	f.kept["nfv2"] = false
	kc = KeptSampling(context.Background(), dm, f)[0]
	if len(kc.Problems) != 1 || kc.Incomplete == 0 || kc.Hops[2].Packets != 0 {
		t.Errorf("without nfv2: problems %v, incomplete %d, nfv2 %d packets", kc.Problems, kc.Incomplete, kc.Hops[2].Packets)
	}
}

// The ring keeps the last KeepRing events of the chain's segments (others'
// sampled packets left out) and says how many a late reader missed.
func TestKeptRing(t *testing.T) {
	seg := netip.MustParseAddr("fc00:2::646c:0")
	ks := &keptSample{spec: KeptSample{Chain: "web", Tap: true, SIDs: []netip.Addr{seg}}, arrivals: map[string]uint64{}}
	var evs []SampleEvent
	for i := 0; i < KeepRing+10; i++ {
		evs = append(evs, SampleEvent{At: time.Duration(i), DA: seg.As16()})
		evs = append(evs, SampleEvent{At: time.Duration(i), DA: netip.MustParseAddr("fc00:9::1").As16()}) // another chain's
	}
	ks.add(evs)
	got, next, lost := ks.since(0)
	if len(got) != KeepRing || next != KeepRing+10 || lost != 10 || got[0].At != 10 || got[len(got)-1].At != KeepRing+9 {
		t.Fatalf("since 0: %d events (first %v), next %d, lost %d: want %d from 10, %d, 10", len(got), got[0].At, next, lost, KeepRing, KeepRing+10)
	}
	if got, next, lost := ks.since(KeepRing + 8); len(got) != 2 || next != KeepRing+10 || lost != 0 || got[0].At != KeepRing+8 {
		t.Errorf("since %d: %d events, next %d, lost %d", KeepRing+8, len(got), next, lost)
	}
	if got, _, _ := ks.since(KeepRing + 99); len(got) != 0 {
		t.Errorf("since past the end: %d events", len(got))
	}
	if ks.arrivals[seg.String()] != KeepRing+10 || len(ks.arrivals) != 1 {
		t.Errorf("arrivals %v", ks.arrivals)
	}
}

// KeepSet.Digest says whether two sets keep the same: the samples'
// order and the samples a node has nothing to do for do not count; a
// rate, a tap, a SID, a chain's key and the responder do. A Keeper
// reports the empty set's until it is handed one, the set it keeps after
// a Set that worked, and "" (unknown) after one that failed.
func TestKeepSetDigest(t *testing.T) {
	a := KeptSample{Chain: "a", Key: ChainKey{First: [16]byte{1}}, Rate: 100, Tap: true, SIDs: []netip.Addr{netip.MustParseAddr("fc00:2::1")}}
	b := KeptSample{Chain: "b", Tap: true}
	idle := KeptSample{Chain: "idle"}
	base := KeepSet{Samples: []KeptSample{a, b}}.Digest()
	if d := (KeepSet{Samples: []KeptSample{b, idle, a}}).Digest(); d != base {
		t.Errorf("order or an idle sample changed the digest")
	}
	if (KeepSet{}).Digest() != (KeepSet{Samples: []KeptSample{idle}}).Digest() {
		t.Errorf("an idle sample alone differs from the empty set")
	}
	for name, f := range map[string]func(s *KeptSample){
		"rate": func(s *KeptSample) { s.Rate = 10 },
		"tap":  func(s *KeptSample) { s.Tap = false },
		"sid":  func(s *KeptSample) { s.SIDs = []netip.Addr{netip.MustParseAddr("fc00:2::2")} },
		"key":  func(s *KeptSample) { s.Key.Last[0] = 9 },
		"name": func(s *KeptSample) { s.Chain = "c" },
	} {
		c := a
		f(&c)
		if (KeepSet{Samples: []KeptSample{c, b}}).Digest() == base {
			t.Errorf("%s: same digest", name)
		}
	}
	if (KeepSet{Samples: []KeptSample{a, b}, Respond: true}).Digest() == base {
		t.Errorf("respond: same digest")
	}

	k := NewKeeper("n", "")
	if k.Digest() != (KeepSet{}).Digest() {
		t.Errorf("a new keeper reports %q, want the empty set's", k.Digest())
	}
	if _, err := k.Set([]KeptSample{{Chain: ""}}, false); err == nil {
		t.Fatal("a sample without a chain was kept")
	}
	if k.Digest() != "" {
		t.Errorf("after a failed Set the keeper reports %q, want unknown", k.Digest())
	}
	if _, err := k.Set([]KeptSample{idle}, false); err != nil {
		t.Fatal(err)
	}
	if k.Digest() != (KeepSet{}).Digest() {
		t.Errorf("after an empty Set the keeper reports %q, want the empty set's", k.Digest())
	}
}
