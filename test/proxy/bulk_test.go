package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
)

// bulkSize is large enough for TCP to build 64 KB GSO/GRO packets on veth.
const bulkSize = 4 << 20

// bulkTopo is the proxy topology with the offloads a Linux host has by
// default on veth (TSO/GSO on, GRO on where asked) and fabric links of MTU
// 9000, so that full-size segments still fit once encapsulated (as in the
// lab). The SF forwards.
func bulkTopo(t *testing.T) *topo {
	tp := newTopo(t)
	// newTopo turns the SF's offloads off; bulk tests want them back.
	testutil.Exec(t, tp.sf, "ethtool", "-K", "p0", "tso", "on", "gso", "on", "gro", "on")
	// The SF link too: End.AM hands the SF the whole SRv6 packet.
	for _, l := range [][2]string{{tp.edge, "n0"}, {tp.nfv, "e0"}, {tp.nfv, "g0"}, {tp.eg, "n0"}, {tp.nfv, "sf0"}, {tp.sf, "p0"}} {
		testutil.Exec(t, l[0], "ip", "link", "set", l[1], "mtu", "9000")
	}
	// GRO on the NFV node's uplink and on the SF's side (veth GRO needs
	// NAPI, which `gro on` enables): the proxy then sees aggregated SRv6
	// packets, the hardest case.
	testutil.Exec(t, tp.nfv, "ethtool", "-K", "e0", "gro", "on")
	testutil.Exec(t, tp.nfv, "ethtool", "-K", "sf0", "gro", "on")
	// The proxy's output is segmented and checksummed in software on the
	// way out of the NFV node (as for a NIC without tunnel TSO), so the
	// GSO metadata the proxy leaves is exercised, and the server's TCP
	// verifies every checksum.
	testutil.Exec(t, tp.nfv, "ethtool", "-K", "g0", "tso", "off", "gso", "off", "tx", "off")
	return tp
}

func TestBulkTCP(t *testing.T) {
	testutil.RequireTool(t, "ethtool")
	cases := []struct {
		name, sid, spec, route string
		setup                  func(t *testing.T, tp *topo)
		dst, prefix            string // server address and the prefix routed into the chain (default IPv6)
	}{
		{name: "End.AD6", sid: "fc00:2::ad", spec: "fc00:2::ad End.AD6 nh6 fc00:5f::2 oif sf0 iif sf0",
			route: "encap seg6 mode encap segs fc00:2::ad,fc00:4::d6"},
		{name: "End.AS", sid: "fc00:2::a6", spec: "fc00:2::a6 End.AS inner ipv6 nh6 fc00:5f::2 oif sf0 iif sf0 src fc00:2::6 segs fc00:4::d6",
			route: "encap seg6 mode encap segs fc00:2::a6"},
		{name: "End.AD6 flow", sid: "fc00:2::af", spec: "fc00:2::af End.AD6 nh6 fc00:5f::2 oif sf0 iif sf0 flow timeout 30",
			route: "encap seg6 mode encap segs fc00:2::af,fc00:4::d6"},
		{name: "End.AM", sid: "fc00:2::a3", spec: "fc00:2::a3 End.AM nh6 fc00:5f::2 oif sf0 iif sf0",
			route: "encap seg6 mode inline segs fc00:2::a3", setup: func(t *testing.T, tp *topo) {
				testutil.Exec(t, tp.srv, "sysctl", "-qw", "net.ipv6.conf.all.seg6_enabled=1")
				testutil.Exec(t, tp.srv, "sysctl", "-qw", "net.ipv6.conf.e0.seg6_enabled=1")
				// Insert mode: the SRH the edge inserts travels to the
				// server, 40 bytes more than the client's 1500.
				testutil.Exec(t, tp.eg, "ip", "link", "set", "s0", "mtu", "9000")
				testutil.Exec(t, tp.srv, "ip", "link", "set", "e0", "mtu", "9000")
			}},
	}
	cases = append(cases, struct {
		name, sid, spec, route string
		setup                  func(t *testing.T, tp *topo)
		dst, prefix            string
	}{name: "End.AS inner ipv4", sid: "fc00:2::a4", spec: "fc00:2::a4 End.AS inner ipv4 nh4 10.95.0.2 oif sf0 iif sf0 src fc00:2::4 segs fc00:4::d4",
		route: "encap seg6 mode encap segs fc00:2::a4", dst: "10.5.0.2", prefix: "10.5.0.0/24",
		setup: func(t *testing.T, tp *topo) {
			// The way back to the IPv4 client: End.DX4 at the edge.
			testutil.Exec(t, tp.eg, "ip", "route", "add", "10.1.0.0/24", "encap", "seg6", "mode", "encap", "segs", "fc00:1::d4", "dev", "n0")
		}})
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			tp := bulkTopo(t)
			if tc.setup != nil {
				tc.setup(t, tp)
			}
			addProxy(t, tp.nfv, tc.spec)
			dst, prefix := "fc00:5::2", "fc00:5::/64"
			if tc.dst != "" {
				dst, prefix = tc.dst, tc.prefix
			}
			testutil.Exec(t, tp.edge, append([]string{"ip", "route", "add", prefix},
				append(strings.Fields(tc.route), "dev", "n0")...)...)
			err := testutil.BulkTCP(t, tp.cl, tp.srv, dst, 0, bulkSize, 20*time.Second)
			st := status(t, tp.nfv, tc.sid)
			t.Logf("%s counters %+v", tc.sid, st.Counters)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Counters.Drops) != 0 {
				t.Errorf("proxy dropped packets: %v", st.Counters.Drops)
			}
			if st.Counters.OutPackets == 0 {
				t.Errorf("proxy counters %+v: nothing went through it", st.Counters)
			}
		})
	}
}
