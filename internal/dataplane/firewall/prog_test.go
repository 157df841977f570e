package firewall

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/testutil"
)

// ---- packet builders (independent of the code under test) ----

var (
	macNode = testutil.MustMAC("02:00:00:00:00:0a") // the node's uplink (pa)
	macNext = testutil.MustMAC("02:00:00:00:00:0b") // next hop behind pa
	macPeer = testutil.MustMAC("02:00:00:00:00:99") // whoever sent the frame
)

func a6(s string) netip.Addr { return netip.MustParseAddr(s) }

// srh builds an SRH; list is Segment List[0..n-1] (list[0] = last segment).
func srh(nh uint8, list []netip.Addr, sl uint8, tag uint16, payload []byte) []byte {
	return testutil.SRH(nh, list, sl, tag, nil, payload)
}

func ip4(src, dst string, proto uint8, payload []byte) []byte {
	return testutil.IPv4(src, dst, proto, false, payload)
}

func l4(sport, dport uint16, n int) []byte { return testutil.L4(sport, dport, make([]byte, n)) }

// icmp6Err is the ICMPv6 error the node (fc00:99::1) owes the source of
// pkt (an IPv6 packet): RFC 4443, quoting as much as fits in 1280 bytes.
func icmp6Err(pkt []byte, typ, code uint8, info uint32) []byte {
	return testutil.ICMP6Error(a6("fc00:99::1"), pkt, typ, code, info)
}

// ---- test node: a namespace whose FIB the program consults ----

type testNode struct {
	ns string
	pa uint32
	n  *Node
}

func newTestNode(t testing.TB) *testNode {
	t.Helper()
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "fwu")
	tn := &testNode{ns: ns, pa: testutil.Uplink(t, ns, macNode, macNext)}
	tn.n = &Node{netns: ns, state: t.TempDir(), noAttach: true}
	if err := loadFwTCObjects(&tn.n.objs, nil); err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { tn.n.Close() })
	return tn
}

// seed installs an instance through the real compiler and table writer.
func (tn *testNode) seed(t testing.TB, in Instance) {
	t.Helper()
	c, err := compile(in)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if err := tn.n.apply(in, c); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

// Verdicts of a tc program.
const (
	vUnspec   = ^uint32(0) // TC_ACT_UNSPEC (-1): TCX_NEXT
	vOK       = 0
	vShot     = 2
	vRedirect = 7
)

func (tn *testNode) run(t *testing.T, pkt []byte) (uint32, []byte) {
	t.Helper()
	return testutil.RunTC(t, tn.ns, tn.n.objs.FwTc, tn.pa, pkt, 256)
}

func (tn *testNode) status(t *testing.T, sid netip.Prefix) Status {
	t.Helper()
	sts, err := tn.n.list()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if s.Instance.SID == sid {
			return s
		}
	}
	t.Fatalf("%s not installed", sid)
	return Status{}
}

func mustRules(t testing.TB, fam fwrule.Family, lines ...string) []fwrule.Rule {
	t.Helper()
	var out []fwrule.Rule
	for _, l := range lines {
		r, err := fwrule.ParseLine(l, fam)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// ---- fixtures ----

var (
	fwPfx  = netip.MustParsePrefix("fc00:2::f1:0/112")
	hostS  = a6("fc00:a::1")
	hostD  = a6("fc00:d::1")
	sidIn  = a6("fc00:1::1")
	sidNx  = a6("fc00:3::1")
	sidEg  = a6("fc00:4::d6")
	inner6 = testutil.IPv6(hostS, hostD, 17, 63, l4(1000, 2000, 16))
	inner4 = ip4("10.0.0.1", "10.9.9.9", 17, l4(1000, 53, 16))
	other4 = ip4("192.0.2.1", "10.9.9.9", 17, l4(1000, 53, 16))
)

// fwSID is the firewall's SID with ARGS value args.
func fwSID(args uint16) netip.Addr {
	b := fwPfx.Addr().As16()
	binary.BigEndian.PutUint16(b[14:], args)
	return netip.AddrFrom16(b)
}

// list is the path In, FW, Nx, Eg in Segment List order; the firewall is
// SL 2.
func list(args uint16) []netip.Addr { return []netip.Addr{sidEg, sidNx, fwSID(args), sidIn} }

// srPkt is an SRv6 packet at the firewall (SL 2) carrying payload.
func srPkt(args uint16, nh uint8, payload []byte) []byte {
	return testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, fwSID(args), 43, 60, srh(nh, list(args), 2, 0, payload)))
}

// after is the same packet forwarded with SL sl: DA = list[sl], hop 59.
func after(args uint16, nh uint8, sl uint8, payload []byte) []byte {
	l := list(args)
	return testutil.Eth(macNext, macNode, 0x86dd, testutil.IPv6(sidIn, l[sl], 43, 59, srh(nh, l, sl, 0, payload)))
}

func l3(frame []byte) []byte { return frame[14:] }

type step struct {
	name    string
	in      []byte
	verdict uint32
	out     []byte // nil: not compared
	reason  string // drop counter that must increase
	rule    int    // 1-based rule whose counter must increase; 0: none checked; -1: the policy
}

func TestProgFixtures(t *testing.T) {
	mal := func(f func([]byte) []byte) []byte { return f(srPkt(0, 41, inner6)) }
	tests := []struct {
		name  string
		in    Instance
		rules []string
		fam   fwrule.Family
		steps []step
	}{
		{"basic rules on the inner IPv6 packet", Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Drop}, []string{
			"-s fc00:a::/64 -p udp --dport 2000 -j ACCEPT",
			"-p udp --dport 2001 -j DROP",
			"-p udp --dport 2002 -j SEG6 --seg6-action skip-next",
			"-p udp --dport 2003 -j SEG6 --seg6-action go-last",
			"-p udp --dport 2004 -j REJECT --reject-with icmp6-adm-prohibited",
			"-d fc00:d::1 -p udp --dport 2005 -j SEG6 --seg6-action eval-args",
		}, fwrule.IPv6, []step{
			{"accept = End", srPkt(0, 41, inner6), vRedirect, after(0, 41, 1, inner6), "", 1},
			{"drop", srPkt(0, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2001, 8))), vShot, nil, "rule", 2},
			{"skip-next", srPkt(0, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2002, 8))), vRedirect, after(0, 41, 0, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2002, 8))), "", 3},
			{"go-last", srPkt(0, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2003, 8))), vRedirect, after(0, 41, 0, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2003, 8))), "", 4},
			{"reject: ICMPv6 administratively prohibited to the source", srPkt(0, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2004, 8))), vRedirect,
				testutil.Eth(macNext, macNode, 0x86dd, icmp6Err(l3(srPkt(0, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2004, 8)))), 1, 1, 0)), "reject", 5},
			{"eval-args 0 = go-next", srPkt(0, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2005, 8))), vRedirect, after(0, 41, 1, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2005, 8))), "", 6},
			{"eval-args 1 = drop", srPkt(1, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2005, 8))), vShot, nil, "rule", 6},
			{"eval-args 2 = skip-next", srPkt(2, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2005, 8))), vRedirect, after(2, 41, 0, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2005, 8))), "", 6},
			{"eval-args 3 = go-last", srPkt(3, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2005, 8))), vRedirect, after(3, 41, 0, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2005, 8))), "", 6},
			{"eval-args 7: Parameter Problem pointing at the DA", srPkt(7, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2005, 8))), vRedirect,
				testutil.Eth(macNext, macNode, 0x86dd, icmp6Err(l3(srPkt(7, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 2005, 8)))), 4, 0, 24)), "unknown-args", 6},
			{"no match: policy drop", srPkt(0, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 9, 8))), vShot, nil, "policy", -1},
			{"source outside the prefix", srPkt(0, 41, testutil.IPv6(a6("fc00:b::1"), hostD, 17, 63, l4(1, 2000, 8))), vShot, nil, "policy", -1},
			{"hop limit 1", testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, fwSID(0), 43, 1, srh(41, list(0), 2, 0, inner6))), vShot, nil, "hop-limit", 1},
			{"not a firewall SID: next TCX program", testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, sidNx, 43, 60, srh(41, list(0), 1, 0, inner6))), vUnspec, nil, "", 0},
			{"IPv4: next TCX program", testutil.Eth(macNode, macPeer, 0x0800, inner4), vUnspec, nil, "", 0},
		}},
		{"iptables rules on an inner IPv4 packet, policy accept", Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Accept}, []string{
			"-s 10.0.0.0/8 -p udp --dport 53 -j DROP",
		}, fwrule.IPv4, []step{
			{"v4 inner dropped", srPkt(0, 4, inner4), vShot, nil, "rule", 1},
			{"other v4 accepted by policy", srPkt(0, 4, ip4("192.0.2.1", "10.9.9.9", 17, l4(1, 53, 8))), vRedirect, after(0, 4, 1, ip4("192.0.2.1", "10.9.9.9", 17, l4(1, 53, 8))), "", -1},
			{"v6 inner: the IPv4 rule does not apply", srPkt(0, 41, inner6), vRedirect, after(0, 41, 1, inner6), "", -1},
		}},
		{"custom eval-args table; iptables REJECT answered in ICMPv6", Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Accept,
			Args: map[uint32]fwrule.TargetKind{5: fwrule.Reject, 6: fwrule.GoLast}}, []string{
			"-4 -s 10.0.0.0/8 -p udp --dport 53 -j REJECT --reject-with icmp-host-prohibited",
			"-j SEG6 --seg6-action eval-args",
		}, fwrule.IPv4, []step{
			{"icmp-host-prohibited = administratively prohibited", srPkt(0, 4, inner4), vRedirect,
				testutil.Eth(macNext, macNode, 0x86dd, icmp6Err(l3(srPkt(0, 4, inner4)), 1, 1, 0)), "reject", 1},
			{"ARGS 6 = go-last", srPkt(6, 4, other4), vRedirect, after(6, 4, 0, other4), "", 2},
			{"ARGS 5 = reject: port unreachable", srPkt(5, 4, other4), vRedirect,
				testutil.Eth(macNext, macNode, 0x86dd, icmp6Err(l3(srPkt(5, 4, other4)), 1, 4, 0)), "reject", 2},
			{"ARGS 0 is not in this table: parameter problem", srPkt(0, 4, other4), vRedirect,
				testutil.Eth(macNext, macNode, 0x86dd, icmp6Err(l3(srPkt(0, 4, other4)), 4, 0, 24)), "unknown-args", 2},
		}},
		{"insert mode: source, final destination, transport after the SRH", Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Accept}, []string{
			"-s fc00:1::1 -d fc00:4::d6 -p udp --dport 2000 -j DROP",
		}, fwrule.IPv6, []step{
			{"matched on SegList[0]", srPkt(0, 17, l4(1000, 2000, 8)), vShot, nil, "rule", 1},
			{"other port: End", srPkt(0, 17, l4(1000, 2001, 8)), vRedirect, after(0, 17, 1, l4(1000, 2001, 8)), "", -1},
		}},
		{"advanced rules: outer header and SRH fields", Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Accept}, []string{
			"-m srh --srh-psid fc00:1::1 --srh-nsid fc00:3::1 --srh-lsid fc00:4::d6 --srh-segs-left-eq 2 --srh-last-entry-eq 3 -p udp --dport 7 -j DROP",
			"-s fc00:1::/64 -m srh --srh-tag 5 -j DROP",
			"-m srh --inner-src 10.0.0.0/8 -j SEG6 --seg6-action go-last",
			"-m srh ! --srh-next-hdr 41 --srh-hdr-len-gt 7 -j DROP",
			"-p udp --dport 9 -j ACCEPT",
		}, fwrule.IPv6, []step{
			{"psid/nsid/lsid/sl/last", srPkt(0, 41, testutil.IPv6(hostS, hostD, 17, 63, l4(1, 7, 8))), vShot, nil, "rule", 1},
			{"tag", testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, fwSID(0), 43, 60, srh(41, list(0), 2, 5, inner6))), vShot, nil, "rule", 2},
			{"inner-src IPv4 in an advanced rule", srPkt(0, 4, inner4), vRedirect, after(0, 4, 0, inner4), "", 3},
			{"next-hdr negated + hdr-len gt", srPkt(0, 17, l4(1, 2, 8)), vShot, nil, "rule", 4},
			{"no SRH: advanced rules never match, accept is delivery", testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, fwSID(0), 17, 60, l4(1, 9, 8))), vOK,
				testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, fwSID(0), 17, 60, l4(1, 9, 8))), "", 5},
			{"last segment accepted: delivered to the stack", testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, fwSID(0), 43, 60, srh(41, []netip.Addr{fwSID(0), sidIn}, 0, 0, inner6))), vOK, nil, "", -1},
		}},
		{"malformed input", Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Accept}, nil, fwrule.IPv6, []step{
			{"truncated SRH", mal(func(b []byte) []byte { b = b[:14+40+20]; binary.BigEndian.PutUint16(b[18:], 20); return b }), vShot, nil, "truncated", 0},
			{"payload length past the end", mal(func(b []byte) []byte { return b[:len(b)-4] }), vShot, nil, "truncated", 0},
			{"SL > last entry", mal(func(b []byte) []byte { b[14+40+3] = 7; return b }), vShot, nil, "bad-srh", 0},
			{"routing type 0", mal(func(b []byte) []byte { b[14+40+2] = 0; return b }), vShot, nil, "bad-srh", 0},
			{"hdr-len shorter than the segment list", mal(func(b []byte) []byte { b[14+40+1] = 2; return b }), vShot, nil, "bad-srh", 0},
			{"inner version is not 6", mal(func(b []byte) []byte { b[14+40+8+64] = 0x45; return b }), vShot, nil, "bad-inner", 0},
			{"fragment header", testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, fwSID(0), 44, 60, append([]byte{43, 0, 0, 1, 0, 0, 0, 1}, srh(41, list(0), 2, 0, inner6)...))), vShot, nil, "fragment", 0},
			{"nine extension headers", testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, fwSID(0), 60, 60, func() []byte {
				var b []byte
				for range 8 {
					b = append(b, 60, 0, 1, 4, 0, 0, 0, 0)
				}
				b[len(b)-8] = 17
				b = append(b, l4(1, 2, 8)...)
				b[8*7] = 60
				return append(b[:8*8], append([]byte{17, 0, 1, 4, 0, 0, 0, 0}, l4(1, 2, 8)...)...)
			}())), vShot, nil, "too-many-ext-hdrs", 0},
			{"inner UDP header cut", srPkt(0, 41, testutil.IPv6(hostS, hostD, 17, 63, nil)), vShot, nil, "truncated", 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tn := newTestNode(t)
			tc.in.Rules = mustRules(t, tc.fam, tc.rules...)
			tn.seed(t, tc.in)
			// The ICMPv6 errors the program built: their checksums verified
			// by tshark, not only compared with the frame our own code
			// built. (The program rewrites no other checksummed header; the
			// fixtures' UDP checksums are zero.)
			var outs [][]byte
			var names []string
			defer func() {
				if slices.ContainsFunc(outs, isICMP6) {
					testutil.VerifyChecksums(t, outs, names, "icmpv6.checksum.status")
				}
			}()
			for _, s := range tc.steps {
				before := tn.status(t, tc.in.SID)
				v, out := tn.run(t, s.in)
				after := tn.status(t, tc.in.SID)
				if v != s.verdict {
					t.Errorf("%s: verdict %d, want %d (drops %v)", s.name, int32(v), int32(s.verdict), after.Counters.Drops)
					continue
				}
				if s.out != nil {
					if diff := cmp.Diff(s.out, out); diff != "" {
						t.Errorf("%s: output (-want +got):\n%s", s.name, diff)
					}
					outs, names = append(outs, out), append(names, s.name)
				}
				if s.reason != "" && after.Counters.Drops[s.reason] != before.Counters.Drops[s.reason]+1 {
					t.Errorf("%s: drop counter %s did not increase: %v -> %v", s.name, s.reason, before.Counters.Drops, after.Counters.Drops)
				}
				switch {
				case s.rule > 0:
					if after.Rules[s.rule-1].Packets != before.Rules[s.rule-1].Packets+1 {
						t.Errorf("%s: rule %d counter %d -> %d", s.name, s.rule, before.Rules[s.rule-1].Packets, after.Rules[s.rule-1].Packets)
					}
				case s.rule < 0:
					if after.Counters.Policy != before.Counters.Policy+1 {
						t.Errorf("%s: policy counter %d -> %d", s.name, before.Counters.Policy, after.Counters.Policy)
					}
				}
			}
		})
	}
}

// TestProgAtomicReplace: a rule update flips the table slot; counters of
// unchanged rules carry over; the old rule set is gone.
func TestProgAtomicReplace(t *testing.T) {
	tn := newTestNode(t)
	in := Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Accept, Rules: mustRules(t, fwrule.IPv6, "-p udp --dport 2000 -j DROP")}
	tn.seed(t, in)
	if v, _ := tn.run(t, srPkt(0, 41, inner6)); v != vShot {
		t.Fatalf("before: verdict %d", v)
	}
	s0 := tn.status(t, fwPfx)
	in.Rules = append(mustRules(t, fwrule.IPv6, "-p tcp -j DROP"), in.Rules...)
	in.Rules[1] = mustRules(t, fwrule.IPv6, "-p udp --dport 2001 -j DROP")[0]
	tn.seed(t, in)
	s1 := tn.status(t, fwPfx)
	if s1.Slot == s0.Slot {
		t.Errorf("slot did not flip: %d", s1.Slot)
	}
	if v, _ := tn.run(t, srPkt(0, 41, inner6)); v != vRedirect {
		t.Errorf("after: verdict %d, want the new rule set's End", v)
	}
	// Same rule set again: counters of the (unchanged) rules follow.
	tn.seed(t, in)
	in.Rules = append(in.Rules, mustRules(t, fwrule.IPv6, "-p udp --dport 2000 -j DROP")...)
	tn.seed(t, in)
	if v, _ := tn.run(t, srPkt(0, 41, inner6)); v != vShot {
		t.Fatalf("again: verdict %d", v)
	}
	tn.seed(t, Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Accept, Rules: in.Rules})
	if got := tn.status(t, fwPfx).Rules[2].Packets; got != 1 {
		t.Errorf("carried counter of the unchanged rule: %d, want 1", got)
	}
}

// ---- differential test: the program vs fwrule.Extract + Classify ----

// randFrame builds a random frame addressed to the firewall (or not), in
// plain, encap (IPv6/IPv4) or insert mode, sometimes malformed.
func randFrame(r *rand.Rand) []byte {
	args := pick(r, []uint16{0, 1, 2, 3, 7})
	da := fwSID(args)
	a6p := func() netip.Addr { return netip.MustParseAddr(pick(r, pool6)) }
	var upper []byte
	var proto uint8
	v4 := false
	mode := r.IntN(5) // 0 plain, 1-2 encap6, 3 encap4, 4 insert
	if mode == 3 {
		v4 = true
	}
	switch r.IntN(4) {
	case 0:
		proto, upper = 6, l4(pick(r, ports), pick(r, ports), 12)
	case 1:
		if v4 {
			proto, upper = 1, []byte{pick(r, []uint8{0, 3, 8}), uint8(r.IntN(2)), 0, 0, 0, 0, 0, 0}
		} else {
			proto, upper = 58, []byte{pick(r, []uint8{1, 128, 129}), uint8(r.IntN(2)), 0, 0, 0, 0, 0, 0}
		}
	case 2:
		proto, upper = 59, nil
	default:
		proto, upper = 17, l4(pick(r, ports), pick(r, ports), r.IntN(20))
	}
	var payload []byte
	var nh uint8
	if mode == 0 {
		payload, nh = upper, proto
	} else {
		n := 1 + r.IntN(4)
		l := make([]netip.Addr, n)
		for i := range l {
			l[i] = a6p()
		}
		sl := uint8(r.IntN(n))
		l[sl] = da
		var inner []byte
		inh := proto
		switch mode {
		case 1, 2:
			inh6, up6 := extChain(r, proto, upper, true)
			inner, inh = testutil.IPv6(a6p(), a6p(), inh6, 64, up6), 41
		case 3:
			inner, inh = ip4(pick(r, pool4), pick(r, pool4), proto, upper), 4
			if r.IntN(5) == 0 { // a non-first fragment: no ports
				inner[6], inner[7] = 0, 0x10
				binary.BigEndian.PutUint16(inner[10:], 0)
				binary.BigEndian.PutUint16(inner[10:], testutil.Checksum(inner[:20]))
			}
		default:
			inh, inner = extChain(r, proto, upper, false)
		}
		payload = srh(inh, l, sl, uint16(r.IntN(3)), inner)
		nh = 43
		if r.IntN(4) == 0 {
			nh, payload = extChain(r, 43, payload, false)
		}
	}
	hop := pick(r, []uint8{1, 2, 64, 64, 64})
	if r.IntN(10) == 0 {
		da = a6p() // probably not ours
	}
	p := testutil.IPv6(a6p(), da, nh, hop, payload)
	switch r.IntN(20) {
	case 0:
		p = p[:40+r.IntN(len(p)-40+1)] // cut, payload length left as is
	case 1:
		if len(p) > 41 {
			p[40+r.IntN(len(p)-40)] ^= 1 << r.IntN(8)
		}
	}
	return testutil.Eth(macNode, macPeer, 0x86dd, p)
}

func reasonOf(err error) string {
	var pe *fwrule.PacketError
	if errors.As(err, &pe) {
		return pe.Reason.Error()
	}
	return err.Error()
}

func TestProgDifferential(t *testing.T) {
	tn := newTestNode(t)
	r := rand.New(rand.NewPCG(4, 2))
	const sets, perSet = 40, 100
	stats := map[string]int{}
	defer func() { t.Logf("outcomes: %v", stats) }()
	for set := range sets {
		n := 1 + r.IntN(30)
		if set%10 == 9 {
			n = 300 + r.IntN(700)
		}
		rules := randRules(r, n)
		pol := fwrule.Accept
		if r.IntN(2) == 0 {
			pol = fwrule.Drop
		}
		in := Instance{SID: fwPfx, ArgsBits: 16, Policy: pol, Rules: rules}
		tn.seed(t, in)
		for i := range perSet {
			frame := randFrame(r)
			before := tn.status(t, fwPfx)
			v, out := tn.run(t, frame)
			after := tn.status(t, fwPfx)
			ctx := func() string { return describe(rules) }
			da := netip.AddrFrom16([16]byte(frame[14+24 : 14+40]))
			if !fwPfx.Contains(da) {
				if v != vUnspec {
					t.Fatalf("set %d pkt %d: foreign DA %s: verdict %d", set, i, da, int32(v))
				}
				stats["foreign"]++
				continue
			}
			p, err := fwrule.Extract(frame[14:])
			if err != nil {
				want := reasonOf(err)
				if want == "too-many-ext-hdrs" {
					want = "too-many-ext-hdrs"
				}
				if v != vShot || after.Counters.Drops[want] != before.Counters.Drops[want]+1 {
					t.Fatalf("set %d pkt %d (% x): Extract: %v; program verdict %d drops %v -> %v", set, i, frame, err, int32(v), before.Counters.Drops, after.Counters.Drops)
				}
				stats["malformed "+want]++
				continue
			}
			idx, ok := fwrule.Classify(rules, p)
			kind := pol
			if ok {
				kind = rules[idx].Target.Kind
				if after.Rules[idx].Packets != before.Rules[idx].Packets+1 {
					t.Fatalf("set %d pkt %d (% x): reference rule %d (%s); program counters moved elsewhere (verdict %d)\npacket %+v\nrules:\n%s",
						set, i, frame, idx+1, rules[idx], int32(v), p, ctx())
				}
			} else if after.Counters.Policy != before.Counters.Policy+1 {
				t.Fatalf("set %d pkt %d (% x): reference: no rule; program matched one (verdict %d)\npacket %+v\nrules:\n%s", set, i, frame, int32(v), p, ctx())
			}
			if kind == fwrule.EvalArgs {
				a := binary.BigEndian.Uint16(frame[14+38:])
				switch a {
				case 0:
					kind = fwrule.GoNext
				case 1:
					kind = fwrule.Drop
				case 2:
					kind = fwrule.SkipNext
				case 3:
					kind = fwrule.GoLast
				default:
					kind = fwrule.Reject // Parameter Problem: same verdicts
				}
			}
			var wantV []uint32
			switch kind {
			case fwrule.Drop:
				wantV = []uint32{vShot}
			case fwrule.Reject:
				wantV = []uint32{vShot, vRedirect} // ICMP error or rate limited
			default:
				switch {
				case !p.HasSRH || p.SegsLeft == 0:
					wantV = []uint32{vOK}
				case frame[14+7] <= 1:
					wantV = []uint32{vShot}
				default:
					wantV = []uint32{vRedirect}
					sl := p.SegsLeft - 1
					switch kind {
					case fwrule.SkipNext:
						sl = p.SegsLeft - min(p.SegsLeft, 2)
					case fwrule.GoLast:
						sl = 0
					}
					if got := out[14+40+3+srhOff(frame)]; got != sl {
						t.Fatalf("set %d pkt %d: %s: SL %d, want %d", set, i, kind, got, sl)
					}
				}
			}
			found := false
			for _, w := range wantV {
				found = found || v == w
			}
			if !found {
				t.Fatalf("set %d pkt %d (% x): action %s: verdict %d, want %v (drops %v)", set, i, frame, kind, int32(v), wantV, after.Counters.Drops)
			}
			stats[kind.String()]++
		}
	}
}

// srhOff is the offset of the SRH after the outer IPv6 header (extension
// headers may come first).
func srhOff(frame []byte) int {
	nh, off := frame[14+6], 0
	for nh != 43 {
		b := frame[14+40+off:]
		if nh == 51 {
			nh, off = b[0], off+(int(b[1])+2)*4
		} else {
			nh, off = b[0], off+(int(b[1])+1)*8
		}
	}
	return off
}

// extChain puts 0..3 random extension headers (hop-by-hop, destination
// options, AH; with frag also fragment headers, first or not) before
// payload of protocol nh; it returns the new first next header.
func extChain(r *rand.Rand, nh uint8, payload []byte, frag bool) (uint8, []byte) {
	kinds := []uint8{0, 60, 51}
	if frag {
		kinds = append(kinds, 44)
	}
	for range r.IntN(4) {
		if r.IntN(2) == 0 {
			break
		}
		k := pick(r, kinds)
		if k == 0 && nh != 0 && r.IntN(2) == 0 {
			k = 60
		}
		var h []byte
		switch k {
		case 51: // AH: length in 4-byte units minus 2
			h = []byte{nh, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0}
		case 44:
			h = []byte{nh, 0, 0, 0, 0, 0, 0, 9}
			if r.IntN(2) == 0 {
				h[3] = 0x10 // offset 2: a non-first fragment
			}
		default:
			h = []byte{nh, 0, 1, 4, 0, 0, 0, 0}
		}
		payload = append(h, payload...)
		nh = k
	}
	return nh, payload
}

// TestProgICMPRateLimit: ICMP errors of one instance are limited to a
// burst, then counted as rate-limited; the packets are dropped either way.
// No wall clock: the program is loaded refilling 1 token a second and the
// test sets the bucket's timestamp through the map (a fake clock), so each
// phase's count is exact.
func TestProgICMPRateLimit(t *testing.T) {
	tn := newTestNodeRate(t, 1)
	tn.seed(t, Instance{SID: fwPfx, ArgsBits: 16, Policy: fwrule.Accept, Rules: mustRules(t, fwrule.IPv6, "-p udp -j REJECT")})
	total, totalSent := 0, 0
	for _, ph := range []struct {
		name    string
		tokens  uint64
		age     time.Duration // since the bucket was last refilled
		n, want int
	}{
		{"a full bucket: the burst", 20, 0, 60, 20},
		{"empty, 5 s later: 5 tokens at 1/s", 0, 5 * time.Second, 10, 5},
		{"empty, an hour later: no more than the burst", 0, time.Hour, 30, 20},
	} {
		tn.setBucket(t, ph.tokens, ph.age)
		sent, shot := 0, 0
		for range ph.n {
			switch v, _ := tn.run(t, srPkt(0, 41, inner6)); v {
			case vRedirect:
				sent++
			case vShot:
				shot++
			default:
				t.Fatalf("verdict %d", v)
			}
		}
		if sent != ph.want || shot != ph.n-ph.want {
			t.Errorf("%s: %d errors sent, %d suppressed of %d; want %d sent", ph.name, sent, shot, ph.n, ph.want)
		}
		total += ph.n
		totalSent += sent
	}
	st := tn.status(t, fwPfx)
	if st.Counters.ICMPSent != uint64(totalSent) || st.Counters.ICMPLimited != uint64(total-totalSent) || st.Counters.Drops["reject"] != uint64(total) {
		t.Errorf("counters %+v", st.Counters)
	}
}

// isICMP6 reports whether frame is Ethernet + IPv6 + ICMPv6.
func isICMP6(frame []byte) bool {
	return len(frame) > 14+40 && binary.BigEndian.Uint16(frame[12:]) == 0x86dd && frame[14+6] == 58
}

// newTestNodeRate is newTestNode with the program's ICMP refill rate
// (icmp_rate, tokens per second) set at load.
func newTestNodeRate(t testing.TB, rate uint64) *testNode {
	t.Helper()
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "fwu")
	tn := &testNode{ns: ns, pa: testutil.Uplink(t, ns, macNode, macNext)}
	tn.n = &Node{netns: ns, state: t.TempDir(), noAttach: true}
	spec, err := loadFwTC()
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.Variables["icmp_rate"].Set(rate); err != nil {
		t.Fatal(err)
	}
	if err := spec.LoadAndAssign(&tn.n.objs, nil); err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { tn.n.Close() })
	return tn
}

// setBucket sets every instance's ICMP token bucket: tokens left, last
// refilled age ago by the program's clock (bpf_ktime_get_ns is
// CLOCK_MONOTONIC).
func (tn *testNode) setBucket(t testing.TB, tokens uint64, age time.Duration) {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	var id uint32
	var rl fwTCFwRatelimit
	it := tn.n.objs.FwRatelimitMap.Iterate()
	n := 0
	for it.Next(&id, &rl) {
		rl.Tokens, rl.LastNs = tokens, uint64(ts.Nano()-age.Nanoseconds())
		if err := tn.n.objs.FwRatelimitMap.Put(id, &rl); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := it.Err(); err != nil || n == 0 {
		t.Fatalf("rate limit map: %v (%d entries)", err, n)
	}
}
