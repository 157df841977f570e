package datapath

import (
	"math/rand"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/testutil"
)

// hostedLocator is the test boundary's SID space (no random flow of
// randFlow lands in it but by a 2^-48 chance; the drop case picks it).
var hostedLocator = netip.MustParsePrefix("fc00:ffff::/48")

// hosted puts the boundary filter on the fixture's namespace, hosting
// pool_in in its slot (host, as Open does), and returns a copy of
// boundary_in to run; the cleanup takes the filter off again and gives
// pool_in its own link back (Unhost, Remove, Rehost: as apply does).
func hosted(t *testing.T, ns string, h *Headend) *ebpf.Program {
	t.Helper()
	if err := boundary.Apply(ns, nodestate.Boundary{Locators: []netip.Prefix{hostedLocator}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Unhost(ns); err != nil {
			t.Error(err)
		}
		if err := boundary.Remove(ns); err != nil {
			t.Error(err)
		}
		if err := Rehost(ns); err != nil {
			t.Error(err)
		}
	})
	if err := h.host(); err != nil {
		t.Fatal(err)
	}
	in, err := boundary.Program(ns, "boundary_in")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

// runProg runs prog on pkt arriving on ifx with the mark mark, and
// returns the verdict and the mark it left.
func runProg(t *testing.T, ns string, prog *ebpf.Program, ifx uint32, pkt []byte, mark uint32) (uint32, uint32) {
	t.Helper()
	var ret uint32
	var out struct {
		testutil.SkbCtx
		_ [256]byte
	}
	err := nsutil.Do(ns, func() error {
		opts := &ebpf.RunOptions{Data: pkt, DataOut: make([]byte, len(pkt)),
			Context: testutil.SkbCtx{IngressIfindex: ifx, Ifindex: ifx, Mark: mark}, ContextOut: &out}
		var err error
		ret, err = prog.Run(opts)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ret, out.Mark
}

// TestHostedIngressMatchesModel: where the boundary filter hosts pool_in
// (boundary_in tail-calls it from bnd_next's slot), the packet's verdict
// and mark are the reference model's choice, as pool_in's own
// (TestIngressMatchesModel), under every liveness word and policy, and
// the pool's counters count each packet once, as the model decides it.
func TestHostedIngressMatchesModel(t *testing.T) {
	h, ns, ifx := openTest(t)
	bin := hosted(t, ns, h)
	if id, err := boundary.Next(ns); err != nil || id == 0 {
		t.Fatalf("boundary slot: program %d (%v), want pool_in", id, err)
	}
	r := rand.New(rand.NewSource(1829))
	for _, pol := range []string{pool.Failover, pool.Bypass, pool.Drop} {
		p := testPool(pol)
		p.Symmetric = true
		sp := pool.Spec{Pool: p, Chains: []pool.ChainSel{
			chainSel(1111, 3000, "::/0", p, true), chainSel(1222, 3000, "0.0.0.0/0", p, true)}}
		if err := h.Program([]pool.Pool{p}); err != nil {
			t.Fatal(err)
		}
		if err := h.ProgramRules([]pool.Spec{sp}); err != nil {
			t.Fatal(err)
		}
		if err := h.objs.PoolCounters.Put(uint32(0), make([]poolTCPoolStats, ebpfCPUs(t))); err != nil {
			t.Fatal(err)
		}
		var want Stats
		want.Instances = make([]uint64, len(p.Instances))
		for live := uint32(0); live < 8; live++ {
			if err := h.SetLive(0, live); err != nil {
				t.Fatal(err)
			}
			for n := 0; n < 30; n++ {
				f := randFlow(r, n%4 == 0)
				table := 1111
				if f.Src.Is4() {
					table = 1222
				}
				ret, mark := runProg(t, ns, bin, ifx, plain(f), 0)
				d := p.Decide(live, f.Hash(true))
				switch d.Action {
				case pool.Dropped:
					want.Drop++
					if ret != 2 {
						t.Fatalf("%s live %03b flow %v: verdict %d mark %#x, model drop", pol, live, f, ret, mark)
					}
				case pool.Bypassed:
					want.Bypass++
					if ret == 2 || mark != Mark(table, MarkBypass) {
						t.Fatalf("%s live %03b flow %v: verdict %d mark %#x, model bypass", pol, live, f, ret, mark)
					}
				default:
					want.Instances[d.Instance]++
					if d.Moved {
						want.Moved++
					}
					if ret == 2 || mark != Mark(table, d.Instance) {
						t.Fatalf("%s live %03b flow %v: verdict %d mark %#x, model instance %d", pol, live, f, ret, mark, d.Instance)
					}
				}
			}
		}
		got, err := h.Stats(0, len(p.Instances))
		if err != nil {
			t.Fatal(err)
		}
		if !equalCounts(got, want) {
			t.Errorf("%s: counters %+v, model %+v", pol, got, want)
		}
	}
}

func equalCounts(a, b Stats) bool {
	if a.Moved != b.Moved || a.Bypass != b.Bypass || a.Drop != b.Drop || len(a.Instances) != len(b.Instances) {
		return false
	}
	for i := range a.Instances {
		if a.Instances[i] != b.Instances[i] {
			return false
		}
	}
	return true
}

// TestHostedBoundaryDropsFirst: a packet the boundary filter drops never
// reaches the hosted pool_in (the pool counts nothing, the filter counts
// its drop), and a packet that pool_in chose for already on this hook
// (its own link still attached while apply moves it into the slot) is
// neither chosen for nor counted again.
func TestHostedBoundaryDropsFirst(t *testing.T) {
	h, ns, ifx := openTest(t)
	bin := hosted(t, ns, h)
	p := testPool(pool.Failover)
	sp := pool.Spec{Pool: p, Chains: []pool.ChainSel{chainSel(1111, 3000, "::/0", p, true)}}
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	if err := h.ProgramRules([]pool.Spec{sp}); err != nil {
		t.Fatal(err)
	}
	total := func() uint64 {
		st, err := h.Stats(0, len(p.Instances))
		if err != nil {
			t.Fatal(err)
		}
		n := st.Moved + st.Bypass + st.Drop + st.Errors
		for _, c := range st.Instances {
			n += c
		}
		return n
	}
	// Into the SID space, no SRH: the filter's sid-space drop.
	f := pool.Flow{Src: netip.MustParseAddr("fc00:1::5"), Dst: netip.MustParseAddr("fc00:ffff::9"), Sport: 1, Dport: 2, Proto: 17}
	if ret, mark := runProg(t, ns, bin, ifx, plain(f), 0); ret != 2 || mark != 0 {
		t.Fatalf("packet into the SID space: verdict %d mark %#x, want the filter's drop (2) unmarked", ret, mark)
	}
	if n := total(); n != 0 {
		t.Errorf("the pool counted %d packets the filter dropped", n)
	}
	cs, err := boundary.Counters(ns)
	if err != nil {
		t.Fatal(err)
	}
	var dropped uint64
	for _, c := range cs {
		if c.Reason == "sid-space" {
			dropped += c.Packets
		}
	}
	if dropped != 1 {
		t.Errorf("boundary counters %+v, want one sid-space drop", cs)
	}
	// An ordinary packet: chosen once, through the slot.
	f.Dst = netip.MustParseAddr("fc00:4d::9")
	ret, mark := runProg(t, ns, bin, ifx, plain(f), 0)
	if ret == 2 || mark&0xfffffff0 != Mark(1111, 0) {
		t.Fatalf("through the slot: verdict %d mark %#x, want chain 1111's", ret, mark)
	}
	if n := total(); n != 1 {
		t.Fatalf("pool counted %d, want 1", n)
	}
	// pool_in again on the marked packet (its own link after the slot):
	// nothing changes, nothing counts.
	ret2, mark2 := runProg(t, ns, h.InProg(), ifx, plain(f), mark)
	if ret2 == 2 || mark2 != mark {
		t.Errorf("second run: verdict %d mark %#x, want the first's %#x untouched", ret2, mark2, mark)
	}
	if n := total(); n != 1 {
		t.Errorf("second run counted again: %d, want 1", n)
	}
}
