package datapath

import (
	"bytes"
	"math/rand"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool"
	"github.com/segchain/segchain/internal/testutil"
)

// plain is a chain's packet as the headend receives it: flow f, UDP.
func plain(f pool.Flow) []byte {
	if f.Src.Is4() {
		return testutil.Eth(mac, peer, 0x0800, testutil.IPv4(f.Src.String(), f.Dst.String(), f.Proto, false, testutil.L4(f.Sport, f.Dport, []byte("payload!"))))
	}
	return testutil.Eth(mac, peer, 0x86dd, testutil.IPv6(f.Src, f.Dst, f.Proto, 64, testutil.L4(f.Sport, f.Dport, []byte("payload!"))))
}

// withExt is f's IPv6 packet with extension headers of the types exts
// (8 bytes each: a PadN option, or a fragment header whose offset field
// is frag) between the IPv6 header and the transport header.
func withExt(f pool.Flow, exts []byte, frag uint16) []byte {
	var b []byte
	for i, typ := range exts {
		next := f.Proto
		if i+1 < len(exts) {
			next = exts[i+1]
		}
		if typ == 44 {
			b = append(b, next, 0, byte(frag>>8), byte(frag), 0, 0, 0, 7)
		} else {
			b = append(b, next, 0, 1, 4, 0, 0, 0, 0)
		}
	}
	b = append(b, testutil.L4(f.Sport, f.Dport, []byte("payload!"))...)
	return testutil.Eth(mac, peer, 0x86dd, testutil.IPv6(f.Src, f.Dst, exts[0], 64, b))
}

// runIn runs pool_in on pkt (arriving on ifx) and returns its verdict and
// the mark it left.
func runIn(t *testing.T, ns string, h *Headend, ifx uint32, pkt []byte) (uint32, uint32) {
	t.Helper()
	var ret uint32
	var out struct {
		testutil.SkbCtx
		_ [256]byte // the kernel writes a whole __sk_buff back
	}
	err := nsutil.Do(ns, func() error {
		opts := &ebpf.RunOptions{Data: pkt, DataOut: make([]byte, len(pkt)), Context: testutil.SkbCtx{IngressIfindex: ifx, Ifindex: ifx}, ContextOut: &out}
		var err error
		ret, err = h.InProg().Run(opts)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ret, out.Mark
}

func chainSel(table, prio int, dst string, p pool.Pool, bypass bool) pool.ChainSel {
	d := netip.MustParsePrefix(dst)
	fam := 6
	if d.Addr().Is4() {
		fam = 4
	}
	cs := pool.ChainSel{Chain: "c", Rule: nodestate.Rule{Family: fam, Priority: prio, Dst: d, Table: table},
		Route: nodestate.Route{Dst: d, Table: table, Dev: "lo"}}
	for _, in := range p.Instances {
		cs.Instances = append(cs.Instances, nodestate.Seg6Encap{Mode: "encap", Segs: []netip.Addr{in.SID, egress}})
	}
	if bypass {
		cs.Bypass = &nodestate.Seg6Encap{Mode: "encap", Segs: []netip.Addr{egress}}
	}
	return cs
}

// TestIngressMatchesModel: pool_in's mark is the reference model's choice
// for random IPv6 and IPv4 flows under every liveness word and policy:
// Mark(table, instance), Mark(table, MarkBypass) or a drop.
func TestIngressMatchesModel(t *testing.T) {
	h, ns, ifx := openTest(t)
	r := rand.New(rand.NewSource(2912))
	for _, pol := range []string{pool.Failover, pool.Bypass, pool.Drop} {
		for _, sym := range []bool{false, true} {
			p := testPool(pol)
			p.Symmetric = sym
			sp := pool.Spec{Pool: p, Chains: []pool.ChainSel{
				chainSel(1111, 3000, "::/0", p, true), chainSel(1222, 3000, "0.0.0.0/0", p, true)}}
			if err := h.Program([]pool.Pool{p}); err != nil {
				t.Fatal(err)
			}
			if err := h.ProgramRules([]pool.Spec{sp}); err != nil {
				t.Fatal(err)
			}
			for live := uint32(0); live < 8; live++ {
				if err := h.SetLive(0, live); err != nil {
					t.Fatal(err)
				}
				for n := 0; n < 40; n++ {
					f := randFlow(r, n%4 == 0)
					table := 1111
					if f.Src.Is4() {
						table = 1222
					}
					ret, mark := runIn(t, ns, h, ifx, plain(f))
					want := p.Decide(live, f.Hash(sym))
					switch want.Action {
					case pool.Dropped:
						if ret != 2 {
							t.Fatalf("%s live %03b flow %v: verdict %d mark %#x, model drop", pol, live, f, ret, mark)
						}
					case pool.Bypassed:
						if ret == 2 || mark != Mark(table, MarkBypass) {
							t.Fatalf("%s live %03b flow %v: verdict %d mark %#x, model bypass (%#x)", pol, live, f, ret, mark, Mark(table, MarkBypass))
						}
					default:
						if ret == 2 || mark != Mark(table, want.Instance) {
							t.Fatalf("%s live %03b flow %v: verdict %d mark %#x, model instance %d (%#x)", pol, live, f, ret, mark, want.Instance, Mark(table, want.Instance))
						}
					}
					if sym && want.Action == pool.Send {
						if _, m := runIn(t, ns, h, ifx, plain(f.Reverse())); m != mark {
							t.Fatalf("symmetric: reverse of %v marked %#x, forward %#x", f, m, mark)
						}
					}
				}
			}
		}
	}
}

// TestIngressClassifies: pool_in follows the chains' rules in their
// order and with their selectors, as the kernel's rule lookup does: a
// chain without a pool whose rule comes first keeps its packets
// (unmarked), protocol, ports, source and input interface select, a
// packet no rule matches and a non-IP frame are left alone, and bypass
// with nothing after the pool is dropped (bypass-last).
func TestIngressClassifies(t *testing.T) {
	h, ns, ifx := openTest(t)
	p := testPool(pool.Failover)
	shadow := nodestate.Rule{Family: 6, Priority: 2000, Dst: netip.MustParsePrefix("fc00:4d::/64"), Dport: nodestate.PortRange{From: 53}, Table: 1333, Owner: "chain dns"}
	web := chainSel(1111, 3000, "fc00:4d::/48", p, true)
	web.Rule.IPProto, web.Rule.Sport, web.Rule.Dport = 17, nodestate.PortRange{From: 1000, To: 2000}, nodestate.PortRange{From: 50, To: 90}
	web.Rule.Src = netip.MustParsePrefix("fc00:1::/64")
	other := chainSel(1444, 2500, "fc00:4e::/64", p, false)
	other.Rule.Iif = "nosuchdev"
	byIf := chainSel(1555, 2600, "fc00:4f::/64", p, false)
	byIf.Rule.Iif = "pa"
	v4 := chainSel(1666, 3000, "10.9.0.0/16", p, false)
	v4.Rule.IPProto, v4.Rule.Dport = 17, nodestate.PortRange{From: 80}
	udp6 := chainSel(1888, 3000, "fc00:50::/64", p, false)
	udp6.Rule.IPProto = 17
	sp := pool.Spec{Pool: p, Chains: []pool.ChainSel{web, other, byIf, v4, udp6}, Shadows: []nodestate.Rule{shadow}}
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	if err := h.ProgramRules([]pool.Spec{sp}); err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	marked := func(m uint32, table int) bool { return m&0xfffffff0 == Mark(table, 0) }
	for _, c := range []struct {
		what  string
		f     pool.Flow
		table int // 0: no mark
	}{
		{"web's packet", pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:4d::9"), Sport: 1500, Dport: 85, Proto: 17}, 1111},
		{"dns (no pool, its rule first) keeps it", pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:4d::9"), Sport: 1500, Dport: 53, Proto: 17}, 0},
		{"another protocol", pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:4d::9"), Sport: 1500, Dport: 85, Proto: 6}, 0},
		{"source port out of range", pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:4d::9"), Sport: 999, Dport: 85, Proto: 17}, 0},
		{"destination port out of range", pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:4d::9"), Sport: 1500, Dport: 91, Proto: 17}, 0},
		{"another source", pool.Flow{Src: a("fc00:2::5"), Dst: a("fc00:4d::9"), Sport: 1500, Dport: 85, Proto: 17}, 0},
		{"no rule", pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:99::9"), Sport: 1500, Dport: 85, Proto: 17}, 0},
		{"iif of a missing device", pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:4e::9"), Sport: 1, Dport: 2, Proto: 17}, 0},
		{"iif of the receiving device", pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:4f::9"), Sport: 1, Dport: 2, Proto: 17}, 1555},
		{"IPv4", pool.Flow{Src: a("10.1.0.1"), Dst: a("10.9.3.4"), Sport: 7, Dport: 80, Proto: 17}, 1666},
		{"IPv4 another port", pool.Flow{Src: a("10.1.0.1"), Dst: a("10.9.3.4"), Sport: 7, Dport: 81, Proto: 17}, 0},
	} {
		ret, m := runIn(t, ns, h, ifx, plain(c.f))
		if ret == 2 {
			t.Errorf("%s: dropped", c.what)
			continue
		}
		if c.table == 0 && m != 0 {
			t.Errorf("%s: marked %#x, want none", c.what, m)
		}
		if c.table != 0 && !marked(m, c.table) {
			t.Errorf("%s: mark %#x, want chain table %d's", c.what, m, c.table)
		}
	}
	// A non-first IPv4 fragment has no ports: the chain's port rule does
	// not match it (the kernel's rule lookup sees none either).
	fr := plain(pool.Flow{Src: a("10.1.0.1"), Dst: a("10.9.3.4"), Sport: 7, Dport: 80, Proto: 17})
	fr[14+6] = 0x00
	fr[14+7] = 0x10 // offset 16 (x 8 bytes)
	fr[14+10], fr[14+11] = 0, 0
	if _, m := runIn(t, ns, h, ifx, fr); m != 0 {
		t.Errorf("IPv4 fragment: marked %#x, want none", m)
	}
	// IPv6 extension headers, as the kernel's rule lookup dissects them
	// (fib6_rules_early_flow_dissect): hop-by-hop, routing and destination
	// options are passed over to the ports; a fragment header gives its
	// next header as the protocol and no ports, in a first fragment too.
	webf := pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:4d::9"), Sport: 1500, Dport: 85, Proto: 17}
	udpf := pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:50::9"), Sport: 1500, Dport: 85, Proto: 17}
	for _, c := range []struct {
		what  string
		f     pool.Flow
		exts  []byte // extension header types, in order
		frag  uint16 // the fragment header's offset field (with M)
		table int
	}{
		{"hop-by-hop and destination options before UDP", webf, []byte{0, 60}, 0, 1111},
		{"a routing header before UDP", webf, []byte{43}, 0, 1111},
		{"first fragment: no ports for the port rule", webf, []byte{44}, 1, 0},
		{"first fragment behind hop-by-hop: the protocol rule", udpf, []byte{0, 44}, 1, 1888},
		{"non-first fragment: the protocol rule", udpf, []byte{44}, 0x100, 1888},
		{"seventeen destination options: beyond the dissector", webf, bytes.Repeat([]byte{60}, 17), 0, 0},
		{"sixteen destination options", webf, bytes.Repeat([]byte{60}, 16), 0, 1111},
	} {
		if _, m := runIn(t, ns, h, ifx, withExt(c.f, c.exts, c.frag)); (c.table == 0 && m != 0) || (c.table != 0 && !marked(m, c.table)) {
			t.Errorf("%s: mark %#x, want chain table %d's (0: none)", c.what, m, c.table)
		}
	}
	// ARP is not IP.
	arp := testutil.Eth(mac, peer, 0x0806, make([]byte, 28))
	if ret, m := runIn(t, ns, h, ifx, arp); ret == 2 || m != 0 {
		t.Errorf("ARP: verdict %d mark %#x", ret, m)
	}
	// Bypass without a segment after the pool: dropped, bypass-last.
	bp := testPool(pool.Bypass)
	only := chainSel(1777, 3000, "::/0", bp, false)
	if err := h.Program([]pool.Pool{bp}); err != nil {
		t.Fatal(err)
	}
	if err := h.ProgramRules([]pool.Spec{{Pool: bp, Chains: []pool.ChainSel{only}}}); err != nil {
		t.Fatal(err)
	}
	_ = h.SetLive(0, 0)
	st0, err := h.Stats(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ret, _ := runIn(t, ns, h, ifx, plain(pool.Flow{Src: a("fc00:1::5"), Dst: a("fc00:4d::9"), Sport: 1, Dport: 2, Proto: 17})); ret != 2 {
		t.Errorf("bypass with nothing after the pool: verdict %d, want drop", ret)
	}
	st, err := h.Stats(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if st.Drops["bypass-last"]-st0.Drops["bypass-last"] != 1 {
		t.Errorf("drops %v (before %v), want bypass-last +1", st.Drops, st0.Drops)
	}
}

// TestEgressLetsMarkedPass: a packet pool_in chose for (its mark) is not
// selected again by pool_out, even where its SRH holds a pool's SID.
func TestEgressLetsMarkedPass(t *testing.T) {
	h, ns, ifx := openTest(t)
	p := testPool(pool.Drop)
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	_ = h.SetLive(0, 0)
	in := frame(p, pool.Flow{Src: src, Dst: egress, Sport: 1, Dport: 2, Proto: 17})
	if ret, out := runMark(t, ns, h, ifx, in, Mark(1111, 2)); ret == 2 || string(out) != string(in) {
		t.Fatalf("marked packet: verdict %d, changed %v", ret, string(out) != string(in))
	}
	if ret, _ := runMark(t, ns, h, ifx, in, 0x28000002); ret != 2 {
		t.Fatalf("a mark that is not a pool's: verdict %d, want 2 (the selector drops it)", ret)
	}
}

// TestSelectKernelState: Select installs a table per instance (and
// bypass) with the chain's route and that instance's SID list, and a
// rule per table with the chain's selectors and the mark; a second
// Select without the chain removes them.
func TestSelectKernelState(t *testing.T) {
	h, ns, _ := openTest(t)
	p := testPool(pool.Failover)
	cs := chainSel(1888, 3000, "fc00:4d::/64", p, true)
	cs.Route.Dev = "pa"
	cs.Rule.IPProto = 17
	sp := pool.Spec{Pool: p, Chains: []pool.ChainSel{cs}}
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	if err := Select(ns, h, []pool.Spec{sp}); err != nil {
		t.Fatal(err)
	}
	ip := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	for k, in := range p.Instances {
		m := Mark(1888, k)
		got := ip("-6", "route", "show", "table", itoa(m))
		if !strings.Contains(got, "fc00:4d::/64") || !strings.Contains(got, in.SID.String()) || !strings.Contains(got, "proto 204") {
			t.Errorf("table %#x: %q, want the chain's route to %s, proto 204", m, got, in.SID)
		}
	}
	if got := ip("-6", "route", "show", "table", itoa(Mark(1888, MarkBypass))); !strings.Contains(got, "segs 1 [ "+egress.String()+" ]") {
		t.Errorf("bypass table: %q", got)
	}
	rules := ip("-6", "rule", "show")
	if n := strings.Count(rules, "to fc00:4d::/64 fwmark 0x290076"); n != 4 {
		t.Errorf("rules: %d with the chain's selectors and a mark, want 4:\n%s", n, rules)
	}
	if n, err := missingRules(ns, []pool.Spec{sp}); err != nil || n != 0 {
		t.Fatalf("missing rules %d (%v), want 0", n, err)
	}
	// The headend's own packets: their table's route runs pool_local, a
	// rule with the chain's selectors and iif lo (no pool mark) leads
	// there, and a rule per instance table, bypass and pass takes the
	// mark pool_local set (no selectors: its reroute has no ports).
	loc := itoa(Mark(1888, MarkLocal))
	if got := ip("-6", "route", "show", "table", loc); !strings.Contains(got, "fc00:4d::/64") || !strings.Contains(got, "encap bpf") || !strings.Contains(got, "proto 204") {
		t.Errorf("local table %s: %q, want the chain's destination through pool_local, proto 204", loc, got)
	}
	if n := strings.Count(rules, "from all to fc00:4d::/64 fwmark 0/0xff000000 iif lo ipproto udp lookup "+loc); n != 1 {
		t.Errorf("rules: %d into the local table, want 1:\n%s", n, rules)
	}
	if n := strings.Count(rules, "iif lo lookup"); n != 5 {
		t.Errorf("rules: %d local mark rules (iif lo, no selectors), want 5 (3 instances, bypass, pass):\n%s", n, rules)
	}
	if n, err := missingLocalRoutes(ns, []pool.Spec{sp}); err != nil || n != 0 {
		t.Fatalf("missing local routes %d (%v), want 0", n, err)
	}
	ip("-6", "route", "flush", "table", loc)
	if n, _ := missingLocalRoutes(ns, []pool.Spec{sp}); n != 1 {
		t.Errorf("local table flushed by hand: %d missing, want 1", n)
	}
	ip("-6", "rule", "del", "pref", "2999", "fwmark", itoa(Mark(1888, 1)), "table", itoa(Mark(1888, 1)))
	if n, _ := missingRules(ns, []pool.Spec{sp}); n != 1 {
		t.Errorf("one rule deleted by hand: %d missing, want 1", n)
	}
	if err := Select(ns, h, nil); err != nil {
		t.Fatal(err)
	}
	if rules := ip("-6", "rule", "show"); strings.Contains(rules, "fwmark") {
		t.Errorf("rules left after the chain went:\n%s", rules)
	}
	if got := ip("-6", "route", "show", "table", "all", "proto", "204"); strings.TrimSpace(got) != "" {
		t.Errorf("routes left after the chain went:\n%s", got)
	}
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// TestIngressRecoveryTakesOnlyNewFlows: pool_in remembers the flows
// failover moved (pool_moved), so a flow stays where it went when its
// instance comes back and only new flows return, unless the pool
// rebalances (the same decision code as pool_out's).
func TestIngressRecoveryTakesOnlyNewFlows(t *testing.T) {
	h, ns, ifx := openTest(t)
	checkRecovery(t, h, "fw-in", 5, func(p pool.Pool) func(pool.Flow) int {
		if err := h.ProgramRules([]pool.Spec{{Pool: p, Chains: []pool.ChainSel{chainSel(1111, 3000, "::/0", p, true)}}}); err != nil {
			t.Fatal(err)
		}
		return func(f pool.Flow) int {
			_, m := runIn(t, ns, h, ifx, plain(f))
			return int(m - Mark(1111, 0))
		}
	})
}

// TestIngressFlowLabel: an IPv6 packet without ports (ICMPv6 here) is
// hashed with its flow label in the ports' place, as the model's Flow
// says: flows that differ only in their label are spread like flows of
// different ports.
func TestIngressFlowLabel(t *testing.T) {
	h, ns, ifx := openTest(t)
	p := testPool(pool.Failover)
	if err := h.Program([]pool.Pool{p}); err != nil {
		t.Fatal(err)
	}
	if err := h.ProgramRules([]pool.Spec{{Pool: p, Chains: []pool.ChainSel{chainSel(1111, 3000, "::/0", p, true)}}}); err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	for fl := uint32(1); fl <= 40; fl++ {
		label := fl * 0x1357 & 0xfffff
		f := pool.Flow{Src: src, Dst: egress, Sport: uint16(label >> 16), Dport: uint16(label), Proto: 58}
		b := testutil.Eth(mac, peer, 0x86dd, testutil.IPv6(src, egress, 58, 64, []byte{128, 0, 0, 0, 0, 1, 0, 1}))
		b[14+1] = byte(label >> 16 & 0x0f)
		b[14+2], b[14+3] = byte(label>>8), byte(label)
		_, m := runIn(t, ns, h, ifx, b)
		want := p.Decide(p.AllLive(), f.Hash(false))
		if m != Mark(1111, want.Instance) {
			t.Fatalf("flow label %#x: mark %#x, model instance %d (%#x)", label, m, want.Instance, Mark(1111, want.Instance))
		}
		seen[m] = true
	}
	if len(seen) < 2 {
		t.Errorf("40 flow labels all on one instance: %v", seen)
	}
}

// TestIngressFlowKeyKinds: pool_in reads the common packet once for the
// classifier and the flow key (session 13); whatever kind of packet, the
// mark must still be the model's choice for the flow key the docs define
// (docs/pools.md "Flow key"), which differs from the classifier's view:
// ports of TCP, UDP and SCTP only (DCCP, ESP: the flow label in IPv6, 0
// in IPv4), an IPv6 extension header's type as the protocol and the flow
// label in the ports' place, an IPv4 first fragment's ports but none of
// a later one's, IPv4 options before the ports; a pool's packet cut short
// before its ports is dropped.
func TestIngressFlowKeyKinds(t *testing.T) {
	h, ns, ifx := openTest(t)
	r := rand.New(rand.NewSource(1329))
	for _, sym := range []bool{false, true} {
		p := testPool(pool.Failover)
		p.Symmetric = sym
		sp := pool.Spec{Pool: p, Chains: []pool.ChainSel{
			chainSel(1111, 3000, "::/0", p, true), chainSel(1222, 3000, "0.0.0.0/0", p, true)}}
		if err := h.Program([]pool.Pool{p}); err != nil {
			t.Fatal(err)
		}
		if err := h.ProgramRules([]pool.Spec{sp}); err != nil {
			t.Fatal(err)
		}
		if err := h.SetLive(0, p.AllLive()); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < 24; n++ {
			f6, f4 := randFlow(r, false), randFlow(r, true)
			label := uint32(r.Intn(1 << 20))
			withLabel := func(b []byte) []byte {
				b[14+1] |= byte(label >> 16 & 0x0f)
				b[14+2], b[14+3] = byte(label>>8), byte(label)
				return b
			}
			l4 := testutil.L4(f6.Sport, f6.Dport, []byte("payload!"))
			v6 := func(proto uint8, payload []byte) []byte {
				return withLabel(testutil.Eth(mac, peer, 0x86dd, testutil.IPv6(f6.Src, f6.Dst, proto, 64, payload)))
			}
			byLabel := func(proto uint8) pool.Flow {
				return pool.Flow{Src: f6.Src, Dst: f6.Dst, Sport: uint16(label >> 16), Dport: uint16(label), Proto: proto}
			}
			withPorts := func(f pool.Flow, proto uint8) pool.Flow { f.Proto = proto; return f }
			v4 := func(proto uint8, payload []byte, frag uint16, opts int) []byte {
				ip := testutil.IPv4(f4.Src.String(), f4.Dst.String(), proto, false, nil)
				ip[0] = 0x45 + byte(opts/4)
				ip = append(ip, make([]byte, opts)...) // NOPs... as zero (end of options) bytes
				ip = append(ip, payload...)
				ip[2], ip[3] = byte(len(ip)>>8), byte(len(ip))
				ip[6], ip[7] = byte(frag>>8), byte(frag)
				ip[10], ip[11] = 0, 0
				c := testutil.Checksum(ip[:20+opts])
				ip[10], ip[11] = byte(c>>8), byte(c)
				return testutil.Eth(mac, peer, 0x0800, ip)
			}
			l44 := testutil.L4(f4.Sport, f4.Dport, []byte("payload!"))
			noPorts4 := func(proto uint8) pool.Flow {
				return pool.Flow{Src: f4.Src, Dst: f4.Dst, Proto: proto}
			}
			ext := withExt(f6, []byte{0}, 0)
			frag := withExt(f6, []byte{44}, 1)
			for _, c := range []struct {
				what string
				pkt  []byte
				f    pool.Flow
				drop bool
			}{
				{"IPv6 UDP", v6(17, l4), withPorts(f6, 17), false},
				{"IPv6 TCP", v6(6, l4), withPorts(f6, 6), false},
				{"IPv6 SCTP", v6(132, l4), withPorts(f6, 132), false},
				{"IPv6 DCCP (the classifier's ports, the flow key's label)", v6(33, l4), byLabel(33), false},
				{"IPv6 ESP", v6(50, l4), byLabel(50), false},
				{"IPv6 ICMPv6", v6(58, []byte{128, 0, 0, 0, 0, 1, 0, 1}), byLabel(58), false},
				{"IPv6 hop-by-hop before UDP", withLabel(ext), byLabel(0), false},
				{"IPv6 first fragment", withLabel(frag), byLabel(44), false},
				{"IPv6 UDP cut short", v6(17, l4[:2]), pool.Flow{}, true},
				{"IPv4 UDP", v4(17, l44, 0, 0), withPorts(f4, 17), false},
				{"IPv4 TCP with options", v4(6, l44, 0, 8), withPorts(f4, 6), false},
				{"IPv4 ICMP", v4(1, []byte{8, 0, 0, 0, 0, 1, 0, 1}, 0, 0), noPorts4(1), false},
				{"IPv4 DCCP", v4(33, l44, 0, 0), noPorts4(33), false},
				{"IPv4 first fragment (ports in the flow key, not the classifier's)", v4(17, l44, 0x2000, 0), withPorts(f4, 17), false},
				{"IPv4 later fragment", v4(17, l44, 0x0010, 0), noPorts4(17), false},
				{"IPv4 UDP cut short", v4(17, l44[:2], 0, 0), pool.Flow{}, true},
			} {
				table := 1111
				if c.pkt[12] == 0x08 {
					table = 1222
				}
				ret, mark := runIn(t, ns, h, ifx, c.pkt)
				if c.drop {
					if ret != 2 {
						t.Errorf("sym %v %s: verdict %d mark %#x, want a drop (malformed)", sym, c.what, ret, mark)
					}
					continue
				}
				want := Mark(table, p.Decide(p.AllLive(), c.f.Hash(sym)).Instance)
				if ret == 2 || mark != want {
					t.Errorf("sym %v %s (flow %v): verdict %d mark %#x, model %#x", sym, c.what, c.f, ret, mark, want)
				}
			}
		}
	}
}
