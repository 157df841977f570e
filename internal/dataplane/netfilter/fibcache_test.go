package netfilter

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/segchain/segchain/internal/testutil"
)

// TestFIBCacheSamePackets: nf_out's next-hop cache (issue #32) must not
// change a byte: the same IPv4 and IPv6 packets through the same rule set
// (SNAT included) reach B identical, with the same counters, with the
// cache on and off (every packet through the full bpf_fib_lookup, the
// path before). Both runs use identical topologies (fixed MACs); the
// cache run shows the entry it filled for B.
func TestFIBCacheSamePackets(t *testing.T) {
	testutil.RequireScapy(t)
	const rules = `table ip nat {
 chain p {
  type nat hook postrouting priority 100
  ip saddr 10.0.1.1 snat to 10.9.9.9
 }
}
`
	type result struct {
		frames [][]byte
		c      Counters
		cached bool
	}
	run := func(cache bool) result {
		old := FIBCache
		FIBCache = cache
		defer func() { FIBCache = old }()
		tp := newTopo(t, 16)
		testutil.Exec(t, tp.n, "ip", "link", "set", "n1", "address", "02:00:00:00:0b:02")
		testutil.Exec(t, tp.b, "ip", "link", "set", "b0", "address", "02:00:00:00:0b:01")
		tp.load(t, "nft", rules)
		warmUp(t, tp)
		cb := capture(t, tp.b, "b0", "fc00:b::1", 6)
		var ps []pkt
		for i := 0; i < 3; i++ {
			ps = append(ps, fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", 1000+i, 5000)),
				fromA("fc00:e::e0:8", udp6("fc00:1::1", "fc00:2::1", 2000+i, 5000)))
		}
		send(t, tp.a, "a0", ps...)
		pcap := cb.Wait(5 * time.Second)
		return result{frames: testutil.PcapFrames(t, pcap), c: counters(t, tp.n), cached: cachedNextHop(t, tp.n, "fc00:b::1")}
	}
	off, on := run(false), run(true)
	if len(off.frames) != 6 || len(on.frames) != 6 {
		t.Fatalf("B received %d packets without the cache, %d with it; want 6 each", len(off.frames), len(on.frames))
	}
	for i := range off.frames {
		if !bytes.Equal(off.frames[i], on.frames[i]) {
			t.Errorf("packet %d differs:\nfull lookup %x\ncached      %x", i, off.frames[i], on.frames[i])
		}
	}
	if fmt.Sprint(off.c) != fmt.Sprint(on.c) {
		t.Errorf("counters: full lookup %+v, cached %+v", off.c, on.c)
	}
	if off.cached || !on.cached {
		t.Errorf("cache entry for fc00:b::1: %v with the cache off, %v with it on; want false, true", off.cached, on.cached)
	}
}

// TestFIBCacheFollowsRouting: a cached next hop is dropped as soon as the
// namespace's routing changes. Between packets of one flow through
// End.AN.NF, N's route to the next SID (B) moves to A, back, and then a
// policy rule (with its table filled before, so that only the rule
// changes) sends it to A again; each packet must go where the routing
// says at the time.
func TestFIBCacheFollowsRouting(t *testing.T) {
	testutil.RequireScapy(t)
	// Entries live longer than the test: only the routing generation
	// may renew them.
	old := fibCacheNs
	fibCacheNs = 1 << 62
	defer func() { fibCacheNs = old }()
	tp := newTopo(t, 16)
	tp.load(t, "nft", nftForward("counter"))
	port := 3000
	step := func(what, to string) {
		t.Helper()
		ns, dev, other, odev := tp.b, "b0", tp.a, "a0"
		if to == "A" {
			ns, dev, other, odev = tp.a, "a0", tp.b, "b0"
		}
		c := capture(t, ns, dev, "fc00:b::1", 1)
		o := capture(t, other, odev, "fc00:b::1", 1)
		port++
		send(t, tp.a, "a0", fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", port, 5000)))
		c.Wait(5 * time.Second)
		if c.Count() != 1 {
			t.Fatalf("%s: the packet did not reach %s", what, to)
		}
		// It reached one side: it cannot also be on the other.
		if o.Count() != 0 {
			t.Errorf("%s: the packet also reached the other side", what)
		}
	}
	step("first packet (fills the cache)", "B")
	step("second packet (from the cache)", "B")
	testutil.Exec(t, tp.n, "ip", "-6", "route", "add", "fc00:b::1/128", "via", "fc00:a::1", "dev", "n0")
	step("after a more specific route towards A", "A")
	testutil.Exec(t, tp.n, "ip", "-6", "route", "del", "fc00:b::1/128")
	step("after deleting it", "B")
	testutil.Exec(t, tp.n, "ip", "-6", "route", "add", "fc00:b::1/128", "via", "fc00:a::1", "dev", "n0", "table", "100")
	step("after a route in a table no rule uses", "B")
	testutil.Exec(t, tp.n, "ip", "-6", "rule", "add", "from", "fc00:a::1", "lookup", "100", "pref", "50")
	step("after a policy rule to that table", "A")
	testutil.Exec(t, tp.n, "ip", "-6", "rule", "del", "pref", "50")
	step("after deleting the rule", "B")
}

// cachedNextHop reports whether a CPU's nf_fib_cache of ns holds a valid
// entry for the destination dst.
func cachedNextHop(t *testing.T, ns, dst string) bool {
	t.Helper()
	want := netip.MustParseAddr(dst).As16()
	found := false
	err := state.Do(ns, func(n *node) error {
		m, err := ebpf.LoadPinnedMap(n.dir+"/nf_fib_cache", nil)
		if err != nil {
			return err
		}
		defer m.Close()
		var k uint32
		var vs []nfTCNfFibEnt
		it := m.Iterate()
		for it.Next(&k, &vs) {
			for _, v := range vs {
				if v.Valid != 0 && v.Dst == want {
					found = true
				}
			}
		}
		return it.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestFIBCacheMTU: a cached next hop does not skip the egress MTU. With
// the link to B at 1280 and B's neighbour entry resolved (only answers
// with a neighbour are cached, and only they check the MTU: without one
// the kernel queues the packet, with or without the cache), a flow's
// small packet fills the cache, then a
// 1358-byte one must take the full lookup and the stack's answer (an
// ICMPv6 Packet Too Big to A), as without the cache, and the next small
// one still reaches B.
func TestFIBCacheMTU(t *testing.T) {
	testutil.RequireScapy(t)
	old := fibCacheNs
	fibCacheNs = 1 << 62
	defer func() { fibCacheNs = old }()
	tp := newTopo(t, 16)
	testutil.Exec(t, tp.n, "ip", "link", "set", "n1", "mtu", "1280")
	testutil.Exec(t, tp.b, "ip", "link", "set", "b0", "mtu", "1280")
	tp.load(t, "nft", nftForward("counter"))
	warmUp(t, tp)
	big := `IP(src="10.0.1.1", dst="10.0.2.1", ttl=64) / UDP(sport=4001, dport=5000) / Raw(b"x" * 1250)`
	cb := capture(t, tp.b, "b0", "fc00:b::1", 2)
	ptb := testutil.StartInboundCapture(t, tp.a, "a0", "icmp6 and ip6[40] == 2", 1)
	send(t, tp.a, "a0",
		fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", 4000, 5000)),
		fromA("fc00:e::e0:7", big),
		fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", 4002, 5000)))
	if !cachedNextHop(t, tp.n, "fc00:b::1") {
		t.Errorf("no cache entry for fc00:b::1: the packets did not take the cached path")
	}
	ptb.Wait(5 * time.Second)
	if ptb.Count() != 1 {
		t.Errorf("A got %d ICMPv6 Packet Too Big for the 1358-byte packet, want 1", ptb.Count())
	}
	_, ports := got(t, cb)
	want(t, "inner source ports at B", ports, []string{"4000", "4002"})
}

// warmUp sends one packet A to B through End.AN.NF and waits for it at B:
// N then has B's neighbour entry, so the next packets' FIB answers are
// complete (cacheable) whatever the timing of neighbour discovery.
func warmUp(t *testing.T, tp topo) {
	t.Helper()
	c := capture(t, tp.b, "b0", "fc00:b::1", 1)
	send(t, tp.a, "a0", fromA("fc00:e::e0:7", udp6("fc00:1::1", "fc00:2::1", 999, 5000)))
	c.Wait(5 * time.Second)
	if c.Count() != 1 {
		t.Fatal("the warm-up packet did not reach B")
	}
}

// TestFIBCacheUnresolvedNeighbour: packets of a flow that reach nf_out
// while N is still resolving B's address (B's neighbour advertisements
// held back) wait in the neighbour queue and must reach B with B's and
// N's MACs once it answers. A cache that also kept answers without a
// neighbour entry and handed the next hop to bpf_redirect_neigh failed
// this (TestTunLoopSamePackets caught it when the timing fell that way):
// the queued packet still held the loop route's dst and went out, once
// resolved, through the loop's neighbour, with the loop's MACs.
func TestFIBCacheUnresolvedNeighbour(t *testing.T) {
	testutil.RequireScapy(t)
	old := fibCacheNs
	fibCacheNs = 1 << 62
	defer func() { fibCacheNs = old }()
	tp := newTopo(t, 16)
	testutil.Exec(t, tp.n, "ip", "link", "set", "n1", "address", "02:00:00:00:0b:02")
	testutil.Exec(t, tp.b, "ip", "link", "set", "b0", "address", "02:00:00:00:0b:01")
	tp.load(t, "nft", nftForward("counter"))
	// B answers no neighbour solicitation until the packets are sent (N
	// retries for 3 s before giving up).
	testutil.Exec(t, tp.b, "nft", "add table ip6 hold; add chain ip6 hold o { type filter hook output priority 0; icmpv6 type nd-neighbor-advert drop; }")
	cb := capture(t, tp.b, "b0", "fc00:b::1", 3)
	send(t, tp.a, "a0",
		fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", 6000, 5000)),
		fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", 6001, 5000)),
		fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", 6002, 5000)))
	testutil.Exec(t, tp.b, "nft", "delete table ip6 hold")
	pcap := cb.Wait(10 * time.Second)
	fr := testutil.PcapFrames(t, pcap)
	if len(fr) != 3 {
		t.Fatalf("B received %d packets, want 3", len(fr))
	}
	for i, f := range fr {
		if got := fmt.Sprintf("%x %x", f[0:6], f[6:12]); got != "020000000b01 020000000b02" {
			t.Errorf("packet %d: MACs at B (dst src) %s, want 020000000b01 020000000b02", i, got)
		}
	}
}
