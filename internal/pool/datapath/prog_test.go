package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/segchain/segchain/internal/nsutil"
	"math/rand"
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/testutil"
)

var (
	mac    = testutil.MustMAC("02:00:00:00:00:01")
	peer   = testutil.MustMAC("02:00:00:00:00:02")
	egress = netip.MustParseAddr("fc00:9::d6")
	src    = netip.MustParseAddr("fc00:1::1")
)

func testPool(onFailure string) pool.Pool {
	return pool.Pool{Name: "fw", Placeholder: netip.MustParseAddr("fc00:2::f1"), OnFailure: onFailure, AllDown: pool.Drop,
		Instances: []pool.Instance{
			{Name: "fw-a", SID: netip.MustParseAddr("fc00:2::f1"), Weight: 1},
			{Name: "fw-b", SID: netip.MustParseAddr("fc00:3::f1"), Weight: 2},
			{Name: "fw-c", SID: netip.MustParseAddr("fc00:4::f1"), Weight: 1},
		}}
}

// frame is H.Encaps of an inner IPv6 UDP (or IPv4 when v4) packet of flow
// f with SID list [placeholder, egress], SL 1.
func frame(p pool.Pool, f pool.Flow) []byte {
	var inner []byte
	var nh uint8 = 41
	if f.Src.Is4() {
		inner = testutil.IPv4(f.Src.String(), f.Dst.String(), 17, false, testutil.L4(f.Sport, f.Dport, []byte("payload!")))
		nh = 4
	} else {
		inner = testutil.IPv6(f.Src, f.Dst, 17, 64, testutil.L4(f.Sport, f.Dport, []byte("payload!")))
	}
	srh := testutil.SRH(nh, []netip.Addr{egress, p.Placeholder}, 1, 0, nil, inner)
	return testutil.Eth(peer, mac, 0x86dd, testutil.IPv6(src, p.Placeholder, 43, 64, srh))
}

func randFlow(r *rand.Rand, v4 bool) pool.Flow {
	var a, b [16]byte
	r.Read(a[:])
	r.Read(b[:])
	f := pool.Flow{Sport: uint16(r.Intn(65536)), Dport: uint16(r.Intn(65536)), Proto: 17}
	if v4 {
		f.Src = netip.AddrFrom4([4]byte(a[:4]))
		f.Dst = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		f.Src, f.Dst = netip.AddrFrom16(a), netip.AddrFrom16(b)
	}
	return f
}

// fixture is one namespace with a forwarding uplink and the selector,
// shared by the tests (a namespace and a verified program each would
// cost seconds on a loaded machine); TestMain removes it.
var fixture struct {
	once sync.Once
	ns   string
	ifx  uint32
	h    *Headend
	err  error
	done func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixture.done != nil {
		fixture.done()
	}
	os.Exit(code)
}

func openTest(t *testing.T) (*Headend, string, uint32) {
	testutil.RequireRoot(t)
	fixture.once.Do(func() {
		ns := testutil.UniqueName("sct-pool-")
		if fixture.err = nsutil.Create(ns); fixture.err != nil {
			return
		}
		fixture.done = func() {
			if fixture.h != nil {
				fixture.h.Close()
				_ = Remove(ns)
			}
			_ = nsutil.Delete(ns)
		}
		fixture.ns = ns
		fixture.ifx = testutil.Uplink(t, ns, mac, peer)
		fixture.h, fixture.err = Open(ns)
	})
	if fixture.err != nil {
		var ve *ebpf.VerifierError
		if errors.As(fixture.err, &ve) {
			for _, l := range ve.Log {
				t.Log(l)
			}
		}
		t.Fatal(fixture.err)
	}
	// Each test starts from no pool and clean counters.
	if err := fixture.h.Program(nil); err != nil {
		t.Fatal(err)
	}
	for id := 0; id < pool.MaxPools; id++ {
		_ = fixture.h.objs.PoolConfs.Put(uint32(id), poolTCPoolConf{})
		_ = fixture.h.objs.PoolCounters.Put(uint32(id), make([]poolTCPoolStats, ebpfCPUs(t)))
	}
	return fixture.h, fixture.ns, fixture.ifx
}

func ebpfCPUs(t *testing.T) int {
	n, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// outcome reads what the program did: the instance whose SID the packet
// now carries (as destination and segment 1), or bypass (one segment
// less, DA = egress), or drop.
func outcome(t *testing.T, p pool.Pool, ret uint32, in, out []byte) pool.Decision {
	t.Helper()
	if ret == 2 { // TC_ACT_SHOT
		return pool.Decision{Action: pool.Dropped, Instance: -1}
	}
	if len(out) == len(in)-16 {
		if da := netip.AddrFrom16([16]byte(out[14+24 : 14+40])); da != egress {
			t.Fatalf("bypass: DA %s, want %s", da, egress)
		}
		if out[54+3] != 0 || out[54+4] != 0 || out[54+1] != 2 {
			t.Fatalf("bypass: SRH % x", out[54:62])
		}
		if pl := binary.BigEndian.Uint16(out[18:]); int(pl) != len(out)-54 {
			t.Fatalf("bypass: payload length %d, want %d", pl, len(out)-54)
		}
		if string(out[54+8+16:]) != string(in[54+8+32:]) {
			t.Fatalf("bypass: inner packet changed")
		}
		return pool.Decision{Action: pool.Bypassed, Instance: -1}
	}
	da := netip.AddrFrom16([16]byte(out[14+24 : 14+40]))
	seg := netip.AddrFrom16([16]byte(out[54+8+16 : 54+8+32]))
	if da != seg {
		t.Fatalf("DA %s but active segment %s", da, seg)
	}
	for i, in := range p.Instances {
		if in.SID == da {
			return pool.Decision{Action: pool.Send, Instance: i}
		}
	}
	t.Fatalf("DA %s is no instance", da)
	return pool.Decision{}
}

// TestSelectionMatchesModel: the program's choice is the reference
// model's for random flows (IPv6 and IPv4 inner) under every liveness
// word and policy; the packet is rewritten as the choice says.
func TestSelectionMatchesModel(t *testing.T) {
	h, ns, ifx := openTest(t)
	r := rand.New(rand.NewSource(29))
	for _, pol := range []string{pool.Failover, pool.Bypass, pool.Drop} {
		p := testPool(pol)
		if err := h.Program([]pool.Pool{p}); err != nil {
			t.Fatal(err)
		}
		for live := uint32(0); live < 8; live++ {
			if err := h.SetLive(0, live); err != nil {
				t.Fatal(err)
			}
			var fl []pool.Flow
			var pkts [][]byte
			for n := 0; n < 40; n++ {
				f := randFlow(r, n%4 == 0)
				fl = append(fl, f)
				pkts = append(pkts, frame(p, f))
			}
			rets, outs := runBatch(t, ns, h, ifx, pkts)
			for n, f := range fl {
				got := outcome(t, p, rets[n], pkts[n], outs[n])
				want := p.Decide(live, f.Hash(false))
				if got.Action != want.Action || got.Instance != want.Instance {
					t.Fatalf("%s live %03b flow %v: program %v/%d, model %v/%d", pol, live, f, got.Action, got.Instance, want.Action, want.Instance)
				}
			}
		}
	}
}

// TestCounters: packets per instance, moved, bypass and drop are counted.
func TestCounters(t *testing.T) {
	h, ns, ifx := openTest(t)
	p := testPool(pool.Failover)
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(7))
	want := make([]uint64, 3)
	var moved uint64
	_ = h.SetLive(0, 0b101) // fw-b down
	var pkts [][]byte
	for n := 0; n < 300; n++ {
		f := randFlow(r, false)
		d := p.Decide(0b101, f.Hash(false))
		want[d.Instance]++
		if d.Moved {
			moved++
		}
		pkts = append(pkts, frame(p, f))
	}
	runBatch(t, ns, h, ifx, pkts)
	st, err := h.Stats(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if st.Instances[i] != want[i] {
			t.Errorf("instance %d: %d packets, want %d", i, st.Instances[i], want[i])
		}
	}
	if st.Moved != moved || moved == 0 {
		t.Errorf("moved %d, want %d (> 0)", st.Moved, moved)
	}
}

// TestProbePasses: a packet with the probe mark is never rewritten.
func TestProbePasses(t *testing.T) {
	h, ns, ifx := openTest(t)
	p := testPool(pool.Drop)
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	_ = h.SetLive(0, 0)
	in := frame(p, pool.Flow{Src: src, Dst: egress, Sport: 1, Dport: 2, Proto: 17})
	ret, out := runOutCtx(t, ns, h, in, testutil.SkbCtx{IngressIfindex: ifx, Ifindex: ifx})
	if ret == 2 || string(out) != string(in) {
		t.Fatalf("probe: verdict %d, changed %v", ret, string(out) != string(in))
	}
	if ret, _ = runOut(t, ns, h, ifx, in); ret != 2 {
		t.Fatalf("unmarked packet with every instance down under drop: verdict %d, want 2 (shot)", ret)
	}
}

// TestForwardedPasses: a forwarded packet (it has an input device) leaves
// pool_out untouched and uncounted even when it carries a pool's
// placeholder (pool_in chose it at its ingress, or it is no pool
// chain's); the same packet sent by the headend itself is selected.
func TestForwardedPasses(t *testing.T) {
	h, ns, ifx := openTest(t)
	p := testPool(pool.Drop)
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	_ = h.SetLive(0, 0)
	in := frame(p, pool.Flow{Src: src, Dst: egress, Sport: 1, Dport: 2, Proto: 17})
	var ret uint32
	out := make([]byte, len(in))
	err := nsutil.Do(ns, func() error {
		opts := &ebpf.RunOptions{Data: in, DataOut: out, Context: testutil.SkbCtx{IngressIfindex: ifx, Ifindex: ifx}}
		var err error
		ret, err = h.Prog().Run(opts)
		out = opts.DataOut
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ret == 2 || string(out) != string(in) {
		t.Fatalf("forwarded packet: verdict %d, changed %v; want it passed untouched", ret, string(out) != string(in))
	}
	if s, err := h.Stats(0, len(p.Instances)); err != nil || s.Drop != 0 {
		t.Fatalf("forwarded packet counted: %+v, %v", s, err)
	}
	if ret, _ = runOut(t, ns, h, ifx, in); ret != 2 {
		t.Fatalf("the same packet sent locally with every instance down under drop: verdict %d, want 2 (shot)", ret)
	}
}

// runOut runs pool_out on pkt as a locally originated packet leaving by
// ifx (no input device: pool_out lets forwarded packets pass).
func runOut(t *testing.T, ns string, h *Headend, ifx uint32, pkt []byte) (uint32, []byte) {
	t.Helper()
	return runMark(t, ns, h, ifx, pkt, 0)
}

// runMark runs pool_out on a local packet with a packet mark.
func runMark(t *testing.T, ns string, h *Headend, ifx uint32, pkt []byte, mark uint32) (uint32, []byte) {
	t.Helper()
	return runOutCtx(t, ns, h, pkt, testutil.SkbCtx{Mark: mark, Ifindex: ifx})
}

// runOutCtx runs pool_out on pkt with the skb context ctx.
func runOutCtx(t *testing.T, ns string, h *Headend, pkt []byte, ctx testutil.SkbCtx) (uint32, []byte) {
	t.Helper()
	var ret uint32
	out := make([]byte, len(pkt))
	err := nsutil.Do(ns, func() error {
		opts := &ebpf.RunOptions{Data: pkt, DataOut: out, Context: ctx}
		var err error
		ret, err = h.Prog().Run(opts)
		out = opts.DataOut
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ret, out
}

// TestRecoveryTakesOnlyNewFlows: a flow failover moved stays on its new
// instance when the failed one comes back; a new flow whose first choice
// is the recovered instance goes to it; with rebalance the moved flow
// returns too.
func TestRecoveryTakesOnlyNewFlows(t *testing.T) {
	h, ns, ifx := openTest(t)
	checkRecovery(t, h, "fw", 3, func(p pool.Pool) func(pool.Flow) int {
		return func(f pool.Flow) int {
			in := frame(p, f)
			ret, out := runOut(t, ns, h, ifx, in)
			return outcome(t, p, ret, in, out).Instance
		}
	})
}

// checkRecovery is the recovery scenario for one program, with and
// without rebalance: program(p) sets the pool's selection up and returns
// how to send a flow and read the instance it was given.
func checkRecovery(t *testing.T, h *Headend, name string, seed int64, program func(p pool.Pool) func(pool.Flow) int) {
	t.Helper()
	for _, rebalance := range []bool{false, true} {
		p := testPool(pool.Failover)
		p.Rebalance = rebalance
		p.Name = fmt.Sprintf("%s-%v", name, rebalance)
		if err := h.Program([]pool.Pool{p}); err != nil {
			t.Fatal(err)
		}
		send := program(p)
		r := rand.New(rand.NewSource(seed))
		var old, fresh pool.Flow
		for found := 0; found < 2; {
			f := randFlow(r, false)
			if first, _ := p.Choose(p.AllLive(), f.Hash(false)); first == 1 {
				if found == 0 {
					old = f
				} else {
					fresh = f
				}
				found++
			}
		}
		if got := send(old); got != 1 {
			t.Fatalf("old flow on %d before the failure, want 1", got)
		}
		if err := h.SetInstance(0, 1, false); err != nil {
			t.Fatal(err)
		}
		moved := send(old)
		if moved == 1 {
			t.Fatal("old flow stayed on the failed instance")
		}
		if err := h.SetInstance(0, 1, true); err != nil {
			t.Fatal(err)
		}
		want := moved
		if rebalance {
			want = 1
		}
		if got := send(old); got != want {
			t.Errorf("rebalance %v: old flow on %d after recovery, want %d", rebalance, got, want)
		}
		if got := send(fresh); got != 1 {
			t.Errorf("rebalance %v: new flow on %d after recovery, want 1", rebalance, got)
		}
	}
}

// runBatch is runOut for many packets in one visit of the namespace (a
// loaded machine makes each setns slow).
func runBatch(t *testing.T, ns string, h *Headend, ifx uint32, pkts [][]byte) ([]uint32, [][]byte) {
	t.Helper()
	rets := make([]uint32, len(pkts))
	outs := make([][]byte, len(pkts))
	err := nsutil.Do(ns, func() error {
		for i, pkt := range pkts {
			opts := &ebpf.RunOptions{Data: pkt, DataOut: make([]byte, len(pkt)), Context: testutil.SkbCtx{Ifindex: ifx}}
			ret, err := h.Prog().Run(opts)
			if err != nil {
				return err
			}
			rets[i], outs[i] = ret, opts.DataOut
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rets, outs
}

// TestDropReasons: a packet the selector drops is counted under its
// reason, per pool (status shows them as drop-<reason>).
func TestDropReasons(t *testing.T) {
	h, ns, ifx := openTest(t)
	p := testPool(pool.Drop)
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	if err := h.SetLive(0, 0); err != nil { // every instance down: drop
		t.Fatal(err)
	}
	before, err := h.Stats(0, len(p.Instances)) // the fixture is shared: counters carry over
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(32))
	var pkts [][]byte
	for range 25 {
		pkts = append(pkts, frame(p, randFlow(r, false)))
	}
	runBatch(t, ns, h, ifx, pkts)
	st, err := h.Stats(0, len(p.Instances))
	if err != nil {
		t.Fatal(err)
	}
	for reason, n := range st.Drops {
		if n -= before.Drops[reason]; reason != "policy" && n != 0 {
			t.Errorf("%d drops counted as %s, want none", n, reason)
		}
	}
	if d, pd := st.Drop-before.Drop, st.Drops["policy"]-before.Drops["policy"]; d != 25 || pd != 25 {
		t.Errorf("drop %d, by reason policy %d: want 25 and 25", d, pd)
	}
}

// TestUnparsedFrames: frames that are not a pool's pass untouched (the host
// stack's: ND, plain IPv6 and IPv4, an SRH without a pool SID); a pool's
// packet the selector cannot parse — an SRH whose SL or length does not
// hold its list, an inner IP packet cut short, a pool SID behind a VLAN
// tag in the frame, TLVs after the list (H.Encaps of a pool's chain adds
// none) — is dropped and counted under its reason, never sent on to the
// placeholder (down here); a pool's packet with a non-IP inner packet is
// still steered as the model says (hash 0).
func TestUnparsedFrames(t *testing.T) {
	h, ns, ifx := openTest(t)
	p := testPool(pool.Failover)
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	live := p.AllLive() &^ 1 // the placeholder's instance is down
	if err := h.SetLive(0, live); err != nil {
		t.Fatal(err)
	}
	f := pool.Flow{Src: src, Dst: egress, Sport: 4000, Dport: 53, Proto: 17}
	good := frame(p, f)
	host := map[string][]byte{
		"ND neighbour solicitation": testutil.Eth(peer, mac, 0x86dd, testutil.IPv6(src, egress, 58, 255, []byte{135, 0, 0, 0, 0, 0, 0, 0})),
		"plain IPv6 UDP":            testutil.Eth(peer, mac, 0x86dd, testutil.IPv6(src, egress, 17, 64, testutil.L4(1, 2, []byte("x")))),
		"IPv4":                      testutil.Eth(peer, mac, 0x0800, testutil.IPv4("10.0.0.1", "10.0.0.2", 17, false, testutil.L4(1, 2, []byte("x")))),
		"ARP":                       testutil.Eth(peer, mac, 0x0806, make([]byte, 28)),
		"SRH without a pool SID": testutil.Eth(peer, mac, 0x86dd, testutil.IPv6(src, egress, 43, 64,
			testutil.SRH(41, []netip.Addr{egress, netip.MustParseAddr("fc00:7::1")}, 1, 0, nil, good[94:]))),
		"VLAN-tagged, no pool SID": vlan(testutil.Eth(peer, mac, 0x86dd, testutil.IPv6(src, egress, 17, 64, testutil.L4(1, 2, []byte("x"))))),
	}
	for what, in := range host {
		ret, out := runOut(t, ns, h, ifx, in)
		if ret == 2 || string(out) != string(in) {
			t.Errorf("%s: verdict %d, changed %v; want it passed untouched", what, ret, string(out) != string(in))
		}
	}

	slBeyond := append([]byte{}, good...)
	slBeyond[54+3] = 2 // SL 2 > first segment 1
	shortHdr := append([]byte{}, good...)
	shortHdr[54+4] = 2 // first segment 2: three segments in room for two
	cut := good[:94+30]
	binary.BigEndian.PutUint16(cut[18:], uint16(len(cut)-54))
	dropped := map[string]struct {
		in     []byte
		reason string
	}{
		"SL beyond the list":          {slBeyond, "malformed"},
		"list longer than the header": {shortHdr, "malformed"},
		"inner IPv6 cut short":        {cut, "malformed"},
		"TLVs after the list (PadN)": {testutil.Eth(peer, mac, 0x86dd, testutil.IPv6(src, p.Placeholder, 43, 64,
			testutil.SRH(41, []netip.Addr{egress, p.Placeholder}, 1, 0, []byte{4, 6, 0, 0, 0, 0, 0, 0}, good[94:]))), "malformed"},
		"pool SID behind a VLAN tag": {vlan(good), "vlan-tagged"},
	}
	before, err := h.Stats(0, len(p.Instances))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{}
	for what, c := range dropped {
		if ret, _ := runOut(t, ns, h, ifx, c.in); ret != 2 {
			t.Errorf("%s: verdict %d, want 2 (dropped)", what, ret)
		}
		want[c.reason]++
	}
	after, err := h.Stats(0, len(p.Instances))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"policy", "no-route", "rewrite", "bypass-last", "malformed", "vlan-tagged"} {
		if got := after.Drops[r] - before.Drops[r]; got != want[r] {
			t.Errorf("drops counted as %s: %d, want %d", r, got, want[r])
		}
	}
	if e := after.Errors - before.Errors; e != uint64(len(dropped)) {
		t.Errorf("errors %d, want %d", e, len(dropped))
	}

	// Steered as the model says: an inner packet that is not IP (hash 0).
	noIP := testutil.Eth(peer, mac, 0x86dd, testutil.IPv6(src, p.Placeholder, 43, 64,
		testutil.SRH(59, []netip.Addr{egress, p.Placeholder}, 1, 0, nil, []byte("opaque"))))
	for _, c := range []struct {
		what string
		in   []byte
		hash uint64
	}{{"non-IP inner packet", noIP, 0}} {
		ret, out := runOut(t, ns, h, ifx, c.in)
		if got, want := outcome(t, p, ret, c.in, out), p.Decide(live, c.hash); got.Instance != want.Instance {
			t.Errorf("%s: instance %d, model %d", c.what, got.Instance, want.Instance)
		}
	}
}

// vlan inserts an 802.1Q tag (VLAN 7) after the frame's MACs.
func vlan(frame []byte) []byte {
	out := append([]byte{}, frame[:12]...)
	out = append(out, 0x81, 0x00, 0x00, 0x07)
	return append(out, frame[12:]...)
}
