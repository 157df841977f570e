package proxy_test

import (
	"net"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// An L2 service chain: the edge carries the client's frames with
// H.Encaps.L2 (seg6 l2encap), the NFV node hands them to an SR-unaware L2
// SF (a Linux bridge whose nftables bridge filter drops one flow) through a
// proxy with inner ethernet, and the egress delivers them with End.DX2.
//
//	nfv sf0 ──► p0 ┐
//	               br0 (nft bridge filter)   in the SF namespace
//	nfv sf1 ◄── p1 ┘
func TestEthernetProxyBridge(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "nft")
	cases := []struct{ name, sid, spec, segs string }{
		{"End.AD", "fc00:2::a2", "fc00:2::a2 End.AD inner ethernet oif sf0 iif sf1", "fc00:2::a2,fc00:4::d2"},
		{"End.AS", "fc00:2::a7", "fc00:2::a7 End.AS inner ethernet oif sf0 iif sf1 src fc00:2::5 segs fc00:4::d2", "fc00:2::a7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTopo(t)
			x := func(ns string, cmds ...string) {
				for _, c := range cmds {
					testutil.Exec(t, ns, strings.Fields(c)...)
				}
			}
			// A second link to the SF; both become ports of a bridge, and
			// nothing speaks IPv6 on the L2 segment itself.
			testutil.Exec(t, "", "ip", "-n", tp.nfv, "link", "add", "sf1", "type", "veth", "peer", "p1", "netns", tp.sf)
			x(tp.nfv, "sysctl -qw net.ipv6.conf.sf0.disable_ipv6=1", "sysctl -qw net.ipv6.conf.sf1.disable_ipv6=1",
				"ip link set sf1 up")
			x(tp.sf, "ip addr flush dev p0", "sysctl -qw net.ipv6.conf.p0.disable_ipv6=1", "sysctl -qw net.ipv6.conf.p1.disable_ipv6=1",
				"ip link add br0 type bridge", "sysctl -qw net.ipv6.conf.br0.disable_ipv6=1",
				"ip link set p0 master br0", "ip link set p1 master br0", "ip link set p1 up", "ip link set br0 up")
			writeAndLoadNft(t, tp.sf, `table bridge l2fw {
	chain flt {
		type filter hook forward priority 0; policy accept;
		udp dport 2000 counter drop
		udp dport 1000 counter accept
	}
}`)
			// The frames keep the client's L2 header end to end: the server
			// answers to the edge's MAC (the destination the client used).
			var edgeMAC string
			if err := nsutil.Do(tp.edge, func() error {
				i, err := net.InterfaceByName("c0")
				if err == nil {
					edgeMAC = i.HardwareAddr.String()
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			x(tp.srv, "ip link set e0 address "+edgeMAC)
			x(tp.eg, "ip -6 route add fc00:4::d2/128 encap seg6local action End.DX2 oif s0 dev n0")
			addProxy(t, tp.nfv, tc.spec)
			x(tp.edge, "ip -6 route add fc00:5::/64 encap seg6 mode l2encap segs "+tc.segs+" dev n0")

			atSF := startCaptureAll(t, tp.sf, "p1", "udp") // frames the bridge sends out
			towardsEg := startCapture(t, tp.eg, "n0", "ip6 proto 43")
			atSrv := startCapture(t, tp.srv, "e0", "udp")
			scapy(t, tp.cl, rawSockets+`
for port in (1000, 2000):
    send(IPv6(src="fc00:c::2", dst="fc00:5::2")/UDP(sport=5555, dport=port)/Raw(b"segchain-l2"), count=5)
`)
			// Out of the bridge: the client's frames, its own MACs, flow
			// 1000 only.
			sf := atSF.fields("udp", "eth.dst", "ipv6.dst", "udp.dstport")
			if got := count(sf, edgeMAC+"|fc00:5::2|1000"); got != 5 || count(sf, "|2000") != 0 {
				t.Errorf("bridge output: %d frames of flow 1000 (want 5), %d of flow 2000 (want 0):\n%s", got, count(sf, "|2000"), strings.Join(sf, "\n"))
			}
			// Leaving the NFV node: the whole frame behind the SRv6 headers
			// (next header 143), DA the DX2 SID.
			eg := towardsEg.fields("ipv6.routing", "ipv6.dst", "ipv6.routing.segleft", "ipv6.routing.nxt", "udp.dstport")
			if got := count(eg, "fc00:4::d2,fc00:5::2|0|143|1000"); got != 5 {
				t.Errorf("towards egress: %d L2-encapsulated frames of flow 1000, want 5:\n%s", got, strings.Join(eg, "\n"))
			}
			srv := atSrv.fields("udp", "ipv6.src", "udp.dstport")
			if count(srv, "fc00:c::2|1000") != 5 || count(srv, "|2000") != 0 {
				t.Errorf("server got %v, want 5 x port 1000 only", srv)
			}
			if out := nftCounter(t, tp.sf, "l2fw", "bridge", "flt"); !strings.Contains(out, "udp dport 2000 counter packets 5") {
				t.Errorf("bridge filter counter:\n%s", out)
			}
			st := status(t, tp.nfv, tc.sid)
			// Every frame of the L2 segment is encapsulated; a stray one
			// the SF side sends (link chatter) before the first inbound
			// frame finds no cache (End.AD), or, not being IPv6, cannot
			// resolve the next hop's neighbour entry (no-fib). Nothing
			// else may be dropped.
			delete(st.Counters.Drops, "cache-empty")
			delete(st.Counters.Drops, "no-fib")
			if st.Counters.InPackets != 10 || st.Counters.OutPackets < 5 || len(st.Counters.Drops) != 0 {
				t.Errorf("proxy counters %+v", st.Counters)
			}
		})
	}
}
