package netfilter

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
)

// topo is three namespaces: A and B talk through End.AN.NF SIDs of N.
//
//	A (a0 fc00:a::1, 10.0.1.1) ── (n0 fc00:a::2) N (n1 fc00:b::2) ── (b0 fc00:b::1, 10.0.2.1) B
//
// N serves fc00:e::e0:0/112 with 16 ARGS bits. Inner IPv4/IPv6 addresses
// are only on A and B's links (N routes none of them): a packet that
// reaches B or A has been through End.AN.NF.
type topo struct{ a, n, b string }

var sidPrefix = netip.MustParsePrefix("fc00:e::e0:0/112")

func newTopo(t *testing.T, args int) topo {
	t.Helper()
	testutil.RequireTool(t, "nft")
	tp := topo{a: testutil.NewNetns(t, "nfa"), n: testutil.NewNetns(t, "nfn"), b: testutil.NewNetns(t, "nfb")}
	x := testutil.Exec
	x(t, tp.a, "ip", "link", "add", "a0", "type", "veth", "peer", "name", "n0", "netns", tp.n)
	x(t, tp.n, "ip", "link", "add", "n1", "type", "veth", "peer", "name", "b0", "netns", tp.b)
	x(t, tp.n, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	for _, c := range []struct{ ns, dev, addr string }{
		{tp.a, "a0", "fc00:a::1/64"}, {tp.n, "n0", "fc00:a::2/64"}, {tp.n, "n1", "fc00:b::2/64"}, {tp.b, "b0", "fc00:b::1/64"},
	} {
		x(t, c.ns, "ip", "-6", "addr", "add", c.addr, "dev", c.dev, "nodad")
		x(t, c.ns, "ip", "link", "set", c.dev, "up")
	}
	x(t, tp.a, "ip", "addr", "add", "10.0.1.1/24", "dev", "a0")
	x(t, tp.b, "ip", "addr", "add", "10.0.2.1/24", "dev", "b0")
	x(t, tp.a, "ip", "-6", "route", "add", "fc00::/16", "via", "fc00:a::2")
	x(t, tp.b, "ip", "-6", "route", "add", "fc00::/16", "via", "fc00:b::2")
	if err := Apply(tp.n, Instance{SID: sidPrefix, ArgsBits: args}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Flush(tp.n); err != nil {
			t.Errorf("flush: %v", err)
		}
	})
	return tp
}

// load loads a rule set into N with its own tool (nft -f, iptables-restore,
// ip6tables-restore).
func (tp topo) load(t *testing.T, tool, rules string) {
	t.Helper()
	testutil.RequireTool(t, strings.Fields(tool)[0])
	f := filepath.Join(t.TempDir(), "rules")
	if err := os.WriteFile(f, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	if tool == "nft" {
		testutil.Exec(t, tp.n, "nft", "-f", f)
	} else {
		testutil.Exec(t, tp.n, "sh", "-c", tool+" < "+f)
	}
	// A UDP flow's conntrack entry lives 30 s without a reply by default;
	// on a loaded machine the test's reply can come later than that (it
	// did: the reply was then a new flow). Where conntrack is loaded (the
	// rules use it), give the tests time.
	_, _ = testutil.ExecErr(tp.n, "sysctl", "-qw", "net.netfilter.nf_conntrack_udp_timeout=600")
}

// nftForward is an nft rule set with rules in a forward base chain.
func nftForward(rules ...string) string {
	return "table inet t {\n chain c {\n  type filter hook forward priority 0; policy accept\n  " + strings.Join(rules, "\n  ") + "\n }\n}\n"
}

// pkt is one SRv6 packet scapy sends: outer src, active SID, final
// segment, inner packet (a scapy expression).
type pkt struct{ src, sid, last, inner string }

// send crafts pkts with scapy in ns, in order, out of dev.
func send(t *testing.T, ns, dev string, pkts ...pkt) {
	t.Helper()
	var b strings.Builder
	// One CPU sends, so one CPU's nf_out (and its per-CPU next-hop
	// cache) handles every packet of a test.
	b.WriteString("import os\nos.sched_setaffinity(0, {0})\nps = []\n")
	for _, p := range pkts {
		fmt.Fprintf(&b, "ps.append(IPv6(src=%q, dst=%q, hlim=64) / IPv6ExtHdrSegmentRouting(addresses=[%q, %q], segleft=1) / %s)\n",
			p.src, p.sid, p.last, p.sid, p.inner)
	}
	fmt.Fprintf(&b, "for p in ps:\n    send(p, iface=%q, verbose=False)\n", dev)
	testutil.RunScapyIn(t, ns, b.String())
}

// fromA / fromB: a packet A (B) sends to B (A) through sid.
func fromA(sid, inner string) pkt { return pkt{"fc00:a::1", sid, "fc00:b::1", inner} }
func fromB(sid, inner string) pkt { return pkt{"fc00:b::1", sid, "fc00:a::1", inner} }

func udp4(src, dst string, sport, dport int) string {
	return fmt.Sprintf(`IP(src=%q, dst=%q, ttl=64) / UDP(sport=%d, dport=%d) / Raw(b"x" * 20)`, src, dst, sport, dport)
}

func udp6(src, dst string, sport, dport int) string {
	return fmt.Sprintf(`IPv6(src=%q, dst=%q, hlim=64) / UDP(sport=%d, dport=%d) / Raw(b"x" * 20)`, src, dst, sport, dport)
}

// fields dissected from every capture.
var fields = []string{"ipv6.dst", "ipv6.hlim", "ipv6.routing.segleft", "ipv6.routing.nxt", "ip.src", "ip.dst", "ip.ttl",
	"ip.checksum.status", "udp.srcport", "udp.dstport", "udp.checksum.status"}

// capture starts an inbound capture on dev of ns of the packets for dst
// (the last segment) carrying an SRH (not ND: neighbour probes to dst
// come at any time) that stops after n packets.
func capture(t *testing.T, ns, dev, dst string, n int) *testutil.Capture {
	return testutil.StartInboundCapture(t, ns, dev, "ip6 dst "+dst+" and ip6 proto 43", n)
}

// got dissects the capture: the inner source ports seen, sorted.
func got(t *testing.T, c *testutil.Capture) ([]testutil.Packet, []string) {
	t.Helper()
	pcap := c.Wait(5 * time.Second)
	// tshark validates the checksums it reports (status 1 = good).
	out := tshark(t, "-r", pcap, "-n", "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|", "-e", "udp.srcport", "-e", "ip.checksum.status", "-e", "udp.checksum.status")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		f := strings.Split(l, "\t")
		for _, st := range f[1:] {
			// 1: tshark verified it good (0 bad, 2 unverified: neither passes).
			if st != "" && st != "1" {
				t.Errorf("checksum not verified good by tshark in a forwarded packet (0 bad, 2 unverified): %q", l)
			}
		}
	}
	pkts := testutil.Tshark(t, pcap, fields...)
	var ports []string
	for _, p := range pkts {
		ports = append(ports, p.First("udp.srcport"))
	}
	sort.Strings(ports)
	return pkts, ports
}

// tshark runs tshark and returns its standard output.
func tshark(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

func counters(t *testing.T, ns string) Counters {
	t.Helper()
	sts, err := List(ns)
	if err != nil || len(sts) != 1 {
		t.Fatalf("list: %v %v", sts, err)
	}
	return sts[0].Counters
}

func want(t *testing.T, what string, got, want any) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// TestDropByInnerTuple: rule sets loaded by nft -f, iptables-restore and
// ip6tables-restore drop one inner 5-tuple (sport 1001) of three; the two
// others arrive at B with End applied (DA = last segment, SL 0, outer hop
// limit 63), inner TTL/hop limit and checksums intact; the counters say
// in 3, accepted 2, dropped by netfilter 1.
func TestDropByInnerTuple(t *testing.T) {
	for _, tc := range []struct {
		name, tool, rules string
		v6                bool
	}{
		{"nft-ipv4", "nft", nftForward("ip saddr 10.0.1.1 ip daddr 10.0.2.1 udp sport 1001 udp dport 5000 drop"), false},
		{"nft-ipv6", "nft", nftForward("ip6 saddr fc00:1::1 ip6 daddr fc00:2::1 udp sport 1001 udp dport 5000 drop"), true},
		{"iptables", "iptables-restore", "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -s 10.0.1.1 -d 10.0.2.1 -p udp --sport 1001 --dport 5000 -j DROP\nCOMMIT\n", false},
		{"ip6tables", "ip6tables-restore", "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -s fc00:1::1 -d fc00:2::1 -p udp --sport 1001 --dport 5000 -j DROP\nCOMMIT\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTopo(t, 0)
			tp.load(t, tc.tool, tc.rules)
			var ps []pkt
			for _, sp := range []int{1001, 1000, 1002} {
				if tc.v6 {
					ps = append(ps, fromA("fc00:e::e0:1", udp6("fc00:1::1", "fc00:2::1", sp, 5000)))
				} else {
					ps = append(ps, fromA("fc00:e::e0:1", udp4("10.0.1.1", "10.0.2.1", sp, 5000)))
				}
			}
			c := capture(t, tp.b, "b0", "fc00:b::1", 2)
			send(t, tp.a, "a0", ps...)
			pkts, ports := got(t, c)
			want(t, "source ports at B", ports, []string{"1000", "1002"})
			for _, p := range pkts {
				want(t, "outer DA", p.First("ipv6.dst"), "fc00:b::1")
				want(t, "SL", p.First("ipv6.routing.segleft"), "0")
				want(t, "outer hop limit", p.First("ipv6.hlim"), "63")
				if tc.v6 {
					want(t, "SRH next header", p.First("ipv6.routing.nxt"), "41")
					want(t, "inner hop limit", p["ipv6.hlim"], "[63 64]")
				} else {
					want(t, "SRH next header", p.First("ipv6.routing.nxt"), "4")
					want(t, "inner TTL", p.First("ip.ttl"), "64")
				}
			}
			cs := counters(t, tp.n)
			want(t, "packets", cs.Packets, 3)
			want(t, "accepted", cs.Accepted, 2)
			want(t, "dropped by netfilter", cs.DroppedNetfilter, 1)
			want(t, "malformed", cs.Malformed, 0)
		})
	}
}

// TestConntrackStateful: "established allowed, new denied" for flows from
// B's side. A opens a flow, B's reply passes (conntrack: established), a
// new flow from B is dropped. Both directions go through End.AN.NF SIDs of
// N (different ARGS, same instance), so conntrack sees both.
func TestConntrackStateful(t *testing.T) {
	tp := newTopo(t, 16)
	tp.load(t, "nft", `table inet t {
  chain c { type filter hook forward priority 0; policy accept;
    ct state established,related accept
    ip saddr 10.0.2.0/24 ct state new drop
  }
}`)
	cb := capture(t, tp.b, "b0", "fc00:b::1", 1)
	send(t, tp.a, "a0", fromA("fc00:e::e0:1", udp4("10.0.1.1", "10.0.2.1", 1000, 5000)))
	_, ports := got(t, cb)
	want(t, "A->B new flow at B", ports, []string{"1000"})

	ca := capture(t, tp.a, "a0", "fc00:a::1", 1)
	send(t, tp.b, "b0",
		fromB("fc00:e::e0:2", udp4("10.0.2.1", "10.0.1.1", 6000, 7000)), // new from B: dropped
		fromB("fc00:e::e0:2", udp4("10.0.2.1", "10.0.1.1", 5000, 1000))) // reply: established
	_, ports = got(t, ca)
	want(t, "B->A at A", ports, []string{"5000"})
	cs := counters(t, tp.n)
	want(t, "packets", cs.Packets, 3)
	want(t, "accepted", cs.Accepted, 2)
	want(t, "dropped by netfilter", cs.DroppedNetfilter, 1)
}

// TestSNATAndReply: postrouting SNAT rewrites the inner source and the
// chain continues (B sees 10.9.9.9); B's reply to 10.9.9.9 through the
// other direction's End.AN.NF SID is de-NATed by conntrack (A sees its own
// address), with checksums fixed.
func TestSNATAndReply(t *testing.T) {
	for _, tc := range []struct{ name, tool, rules string }{
		{"nft", "nft", "table ip t {\n chain p {\n  type nat hook postrouting priority 100\n  ip saddr 10.0.1.1 snat to 10.9.9.9\n }\n}\n"},
		{"iptables", "iptables-restore", "*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -s 10.0.1.1 -j SNAT --to-source 10.9.9.9\nCOMMIT\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTopo(t, 16)
			tp.load(t, tc.tool, tc.rules)
			cb := capture(t, tp.b, "b0", "fc00:b::1", 1)
			send(t, tp.a, "a0", fromA("fc00:e::e0:1", udp4("10.0.1.1", "10.0.2.1", 1000, 5000)))
			pkts, _ := got(t, cb)
			if len(pkts) != 1 {
				t.Fatalf("at B: %v", pkts)
			}
			want(t, "inner source at B", pkts[0].First("ip.src"), "10.9.9.9")
			want(t, "outer DA at B", pkts[0].First("ipv6.dst"), "fc00:b::1")

			ca := capture(t, tp.a, "a0", "fc00:a::1", 1)
			send(t, tp.b, "b0", fromB("fc00:e::e0:2", udp4("10.0.2.1", "10.9.9.9", 5000, 1000)))
			pkts, _ = got(t, ca)
			if len(pkts) != 1 {
				t.Fatalf("at A: %v", pkts)
			}
			want(t, "inner destination at A (de-NATed)", pkts[0].First("ip.dst"), "10.0.1.1")
			want(t, "outer DA at A", pkts[0].First("ipv6.dst"), "fc00:a::1")
			cs := counters(t, tp.n)
			want(t, "accepted", cs.Accepted, 2)
		})
	}
}

// TestMarkFromArgs: a rule on meta mark matches only the packets whose
// active SID carries ARGS 7; the mark is restored afterwards (a rule on
// the outer packet can't see 7). With args 0 the mark is left alone.
func TestMarkFromArgs(t *testing.T) {
	rules := "table inet t {\n chain c {\n  type filter hook forward priority 0; policy accept\n  meta mark 7 drop\n }\n}\n"
	t.Run("args16", func(t *testing.T) {
		tp := newTopo(t, 16)
		tp.load(t, "nft", rules)
		c := capture(t, tp.b, "b0", "fc00:b::1", 2)
		send(t, tp.a, "a0",
			fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", 1007, 5000)),
			fromA("fc00:e::e0:8", udp4("10.0.1.1", "10.0.2.1", 1008, 5000)),
			fromA("fc00:e::e0:0", udp4("10.0.1.1", "10.0.2.1", 1000, 5000)))
		_, ports := got(t, c)
		want(t, "ports at B", ports, []string{"1000", "1008"})
		want(t, "dropped by netfilter", counters(t, tp.n).DroppedNetfilter, 1)
	})
	t.Run("args0", func(t *testing.T) {
		tp := newTopo(t, 0)
		tp.load(t, "nft", rules)
		c := capture(t, tp.b, "b0", "fc00:b::1", 1)
		send(t, tp.a, "a0", fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", 1007, 5000)))
		_, ports := got(t, c)
		want(t, "ports at B", ports, []string{"1007"})
	})
}

// TestMalformed: SL = 0, a truncated SRH, no SRH, insert mode (no inner
// IP packet) and an outer hop limit of 1 are dropped and counted with
// their reason; nothing reaches B but the well-formed last packet.
func TestMalformed(t *testing.T) {
	tp := newTopo(t, 16)
	c := capture(t, tp.b, "b0", "fc00:b::1", 1)
	inner := udp4("10.0.1.1", "10.0.2.1", 1000, 5000)
	testutil.RunScapyIn(t, tp.a, fmt.Sprintf(`
sid = "fc00:e::e0:1"
o = IPv6(src="fc00:a::1", dst=sid, hlim=64)
ps = [
  o / IPv6ExtHdrSegmentRouting(addresses=["fc00:b::1", sid], segleft=0) / %[1]s,                 # sl-zero
  o / IPv6ExtHdrSegmentRouting(addresses=["fc00:b::1", sid], segleft=1, len=12) / %[1]s,         # truncated: hdr-len past the end
  o / %[1]s,                                                                                    # no-srh
  o / IPv6ExtHdrSegmentRouting(addresses=["fc00:b::1", sid], segleft=1) / UDP(sport=1, dport=2), # insert-mode
  IPv6(src="fc00:a::1", dst=sid, hlim=1) / IPv6ExtHdrSegmentRouting(addresses=["fc00:b::1", sid], segleft=1) / %[1]s, # hop-limit
  o / IPv6ExtHdrSegmentRouting(addresses=["fc00:b::1", sid], segleft=1) / %[1]s,                 # good
]
for p in ps:
    send(p, iface="a0", verbose=False)
`, inner))
	_, ports := got(t, c)
	want(t, "ports at B", ports, []string{"1000"})
	cs := counters(t, tp.n)
	want(t, "packets", cs.Packets, 6)
	want(t, "malformed", cs.Malformed, 5)
	want(t, "accepted", cs.Accepted, 1)
	for _, r := range []string{"sl-zero", "truncated", "no-srh", "insert-mode", "hop-limit"} {
		want(t, "drops "+r, cs.Drops[r], 1)
	}
	// A packet of the node's own out of the loop has no tag: dropped and
	// counted on the loop's row, never sent on.
	_, _ = testutil.ExecErr(tp.n, "ping", "-c", "1", "-W", "1", "-I", LoopOut, "10.9.9.9")
	ls, err := Loop(tp.n)
	if err != nil || ls.Drops["no-tag"] == 0 {
		t.Errorf("loop drops %v, %v: want no-tag", ls.Drops, err)
	}
}

// TestNextSIDLocal: the SID after End.AN.NF is served by this node too —
// a second End.AN.NF SID (which no route covers: nf_out hands the packet to
// the stack through the loop's outer end, where nf_in catches it again),
// then a native seg6local End — and the packet arrives at B with both
// applied; the rule set sees the inner packet twice (counter 2).
func TestNextSIDLocal(t *testing.T) {
	tp := newTopo(t, 16)
	testutil.Exec(t, tp.n, "ip", "-6", "route", "add", "fc00:e::ed/128", "encap", "seg6local", "action", "End", "dev", "n0")
	tp.load(t, "nft", nftForward("udp dport 5000 counter"))
	c := capture(t, tp.b, "b0", "fc00:b::1", 1)
	testutil.RunScapyIn(t, tp.a, fmt.Sprintf(`
p = IPv6(src="fc00:a::1", dst="fc00:e::e0:1", hlim=64) / \
    IPv6ExtHdrSegmentRouting(addresses=["fc00:b::1", "fc00:e::ed", "fc00:e::e0:2", "fc00:e::e0:1"], segleft=3) / %s
send(p, iface="a0", verbose=False)
`, udp4("10.0.1.1", "10.0.2.1", 1000, 5000)))
	pkts, _ := got(t, c)
	if len(pkts) != 1 {
		t.Fatalf("at B: %v", pkts)
	}
	want(t, "SL at B", pkts[0].First("ipv6.routing.segleft"), "0")
	want(t, "inner TTL", pkts[0].First("ip.ttl"), "64")
	cs := counters(t, tp.n)
	want(t, "packets (two passes)", cs.Packets, 2)
	want(t, "accepted", cs.Accepted, 2)
	want(t, "to the stack", cs.ToStack, 2)
	out := testutil.Exec(t, tp.n, "nft", "list", "chain", "inet", "t", "c")
	if !strings.Contains(out, "counter packets 2 ") {
		t.Errorf("the rule set saw the inner packet %s, want twice", out)
	}
}

// TestExtHeadersSurvive: a hop-by-hop header before the SRH and a
// destination options header after it come back with the packet, the
// Next Header chain intact (the inner packet's family is written into the
// destination options header, not the SRH).
func TestExtHeadersSurvive(t *testing.T) {
	tp := newTopo(t, 16)
	c := testutil.StartInboundCapture(t, tp.b, "b0", "ip6 dst fc00:b::1 and ip6[6] == 0", 1) // hop-by-hop first
	testutil.RunScapyIn(t, tp.a, fmt.Sprintf(`
p = IPv6(src="fc00:a::1", dst="fc00:e::e0:1", hlim=64) / IPv6ExtHdrHopByHop() / \
    IPv6ExtHdrSegmentRouting(addresses=["fc00:b::1", "fc00:e::e0:1"], segleft=1) / IPv6ExtHdrDestOpt() / %s
send(p, iface="a0", verbose=False)
`, udp4("10.0.1.1", "10.0.2.1", 1000, 5000)))
	pkts, _ := got(t, c)
	if len(pkts) != 1 {
		t.Fatalf("at B: %v", pkts)
	}
	out := tshark(t, "-r", c.Path(), "-n", "-T", "fields", "-e", "ipv6.nxt", "-e", "ipv6.hopopts.nxt",
		"-e", "ipv6.routing.nxt", "-e", "ipv6.dstopts.nxt", "-e", "ip.dst", "-e", "udp.dstport")
	want(t, "next header chain (ipv6, hbh, srh, dstopts, inner dst, dport)", strings.Fields(out), []string{"0", "43", "60", "4", "10.0.2.1", "5000"})
}

// TestBulkTCP: 20 MB of TCP from A to B, both ends' kernels encapsulating
// (seg6 encap route through the End.AN.NF SID, End.DX4 at the far end):
// veth hands N 64 KB GSO packets, which End.AN.NF decapsulates, passes
// through netfilter (a conntrack rule counts the flow) and re-encapsulates;
// every byte arrives and the FIB path forwards them (none goes the slow
// way for being "too big").
func TestBulkTCP(t *testing.T) {
	tp := newTopo(t, 16)
	x := testutil.Exec
	x(t, tp.a, "ip", "route", "add", "10.0.2.0/24", "encap", "seg6", "mode", "encap", "segs", "fc00:e::e0:1,fc00:b::d4", "dev", "a0")
	x(t, tp.b, "ip", "route", "add", "10.0.1.0/24", "encap", "seg6", "mode", "encap", "segs", "fc00:e::e0:2,fc00:a::d4", "dev", "b0")
	x(t, tp.b, "ip", "-6", "route", "add", "fc00:b::d4/128", "encap", "seg6local", "action", "End.DX4", "nh4", "10.0.2.1", "dev", "b0")
	x(t, tp.a, "ip", "-6", "route", "add", "fc00:a::d4/128", "encap", "seg6local", "action", "End.DX4", "nh4", "10.0.1.1", "dev", "a0")
	x(t, tp.n, "ip", "-6", "route", "add", "fc00:b::d4/128", "via", "fc00:b::1")
	x(t, tp.n, "ip", "-6", "route", "add", "fc00:a::d4/128", "via", "fc00:a::1")
	for _, ns := range []string{tp.a, tp.b} {
		x(t, ns, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	}
	tp.load(t, "nft", nftForward("ct state established tcp dport 7000 counter"))
	srv := exec.Command("ip", "netns", "exec", tp.b, "python3", "-c", `
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.0.2.1", 7000)); s.listen(1); s.settimeout(30)
print("listening", flush=True)
c, _ = s.accept(); n = 0
while True:
    b = c.recv(1 << 16)
    if not b: break
    n += len(b)
print(n)
`)
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The client connects once the server listens (it says so): python's
	// start took more than a fixed 500 ms on the loaded VM.
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "listening" {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		t.Fatalf("server did not start listening: %q %v", lines.Text(), lines.Err())
	}
	var out strings.Builder
	done := make(chan struct{})
	go func() {
		for lines.Scan() {
			out.WriteString(lines.Text() + "\n")
		}
		close(done)
	}()
	x(t, tp.a, "python3", "-c", `
import socket
s = socket.create_connection(("10.0.2.1", 7000), timeout=20)
for i in range(320): s.sendall(b"x" * 65536)
s.close()
`)
	<-done // the pipe is read to its end before Wait closes it
	if err := srv.Wait(); err != nil {
		t.Fatalf("server: %v", err)
	}
	want(t, "bytes received", strings.TrimSpace(out.String()), "20971520")
	cs := counters(t, tp.n)
	if cs.Accepted == 0 || cs.Accepted != cs.ToNetfilter || cs.ToStack != 0 || cs.Malformed != 0 {
		t.Errorf("counters %+v: want every packet accepted by the FIB path", cs)
	}
	if o := x(t, tp.n, "nft", "list", "chain", "inet", "t", "c"); strings.Contains(o, "counter packets 0 ") {
		t.Errorf("the conntrack rule saw nothing:\n%s", o)
	}
}
