package native

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// absent marks a tshark field that must not be in the packet.
var absent []string

// behaviorCase is one native behaviour: what the SUT is given, the packet
// src sends, and the fields dst must see (tshark field → every occurrence,
// outer header first).
type behaviorCase struct {
	name    string
	sid     []string         // `segchain sid add` arguments, "" for headend cases
	headend *nodestate.Route // installed with dataplane.ReplaceRoute
	// probed: `sid add` asks dataplane.Probe first (flavors, VRF).
	probed bool
	pkt    string // scapy expression of the L3 packet src sends
	filter string // pcap filter selecting it at dst
	want   testutil.Packet
}

const (
	nPkts = 3
	udp   = "UDP(sport=40001, dport=40002)"
)

func srh(addrs string, sl int, nh string) string {
	s := fmt.Sprintf("IPv6ExtHdrSegmentRouting(addresses=[%s], segleft=%d", addrs, sl)
	if nh != "" {
		s += ", nh=" + nh
	}
	return s + ")"
}

func v6(src, dst string, hlim int) string {
	return fmt.Sprintf("IPv6(src=%q, dst=%q, hlim=%d)", src, dst, hlim)
}

func payload(s string) string { return fmt.Sprintf("Raw(b%q)", s) }

func q(a ...string) string {
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(s, ", ")
}

func behaviorCases(tp *topo) []behaviorCase {
	dev := sutOut
	encap := func(dst, mode string, segs ...string) *nodestate.Route {
		e := &nodestate.Seg6Encap{Mode: mode}
		for _, s := range segs {
			e.Segs = append(e.Segs, netip.MustParseAddr(s))
		}
		return &nodestate.Route{Dst: netip.MustParsePrefix(dst), Dev: dev, Seg6: e}
	}
	return []behaviorCase{
		{
			name:    "H.Encaps",
			headend: encap("fc00:95::/64", "encap", dstAddr6),
			pkt:     v6("fc00:12::1", "fc00:95::1", 64) + "/" + udp + "/" + payload("h.encaps"),
			filter:  "ip6 dst host " + dstAddr6,
			want: testutil.Packet{
				"ipv6.src": {sutOutAddr6, "fc00:12::1"}, "ipv6.dst": {dstAddr6, "fc00:95::1"},
				"ipv6.hlim": {"63", "64"}, "ipv6.nxt": {"43", "17"}, "ipv6.routing.nxt": {"41"},
				"ipv6.routing.type": {"4"}, "ipv6.routing.segleft": {"0"}, "ipv6.routing.srh.last_entry": {"0"},
				"ipv6.routing.srh.addr": {dstAddr6}, "data.data": {hexPayload("h.encaps")},
			},
		},
		{
			name:    "H.Insert",
			headend: encap("fc00:94::/64", "inline", dstAddr6),
			pkt:     v6("fc00:12::1", "fc00:94::1", 64) + "/" + udp + "/" + payload("h.insert"),
			filter:  "ip6 dst host " + dstAddr6,
			want: testutil.Packet{
				"ipv6.src": {"fc00:12::1"}, "ipv6.dst": {dstAddr6}, "ipv6.hlim": {"63"},
				"ipv6.nxt": {"43"}, "ipv6.routing.nxt": {"17"}, "ipv6.routing.segleft": {"1"},
				"ipv6.routing.srh.last_entry": {"1"},
				// SRH order: Segment List[0] is the original destination.
				"ipv6.routing.srh.addr": {"fc00:94::1", dstAddr6}, "data.data": {hexPayload("h.insert")},
			},
		},
		{
			name:    "H.Encaps.L2",
			headend: encap("fc00:93::/64", "l2encap", dstAddr6),
			pkt:     v6("fc00:12::1", "fc00:93::1", 64) + "/" + udp + "/" + payload("h.encaps.l2"),
			filter:  "ip6 dst host " + dstAddr6,
			want: testutil.Packet{
				// The whole Ethernet frame src sent rides inside.
				"eth.src": {tp.sutOutMAC, tp.srcMAC}, "eth.dst": {tp.dstMAC, tp.sutInMAC},
				"ipv6.dst": {dstAddr6, "fc00:93::1"}, "ipv6.hlim": {"63", "64"},
				"ipv6.routing.nxt": {"143"}, "ipv6.routing.segleft": {"0"},
				"ipv6.routing.srh.addr": {dstAddr6}, "data.data": {hexPayload("h.encaps.l2")},
			},
		},
		{
			name:    "H.Encaps.Red",
			headend: encap("fc00:92::/64", "encap.red", dstAddr6, "fc00:91::1"),
			pkt:     v6("fc00:12::1", "fc00:92::1", 64) + "/" + udp + "/" + payload("encap.red"),
			filter:  "ip6 dst host " + dstAddr6,
			want: testutil.Packet{
				// Reduced SRH: the first SID is only in the DA, so SL 1 > Last Entry 0.
				"ipv6.dst": {dstAddr6, "fc00:92::1"}, "ipv6.routing.segleft": {"1"},
				"ipv6.routing.srh.last_entry": {"0"}, "ipv6.routing.srh.addr": {"fc00:91::1"},
				"ipv6.routing.nxt": {"41"}, "data.data": {hexPayload("encap.red")},
			},
		},
		{
			name:    "IPv4-in-IPv6 H.Encaps",
			headend: encap("10.0.95.0/24", "encap", dstAddr6),
			pkt:     `IP(src="10.0.12.1", dst="10.0.95.1", ttl=64)/` + udp + "/" + payload("v4encap"),
			filter:  "ip6 dst host " + dstAddr6,
			want: testutil.Packet{
				"ipv6.src": {sutOutAddr6}, "ipv6.dst": {dstAddr6}, "ipv6.routing.nxt": {"4"},
				"ipv6.routing.segleft": {"0"}, "ipv6.routing.srh.addr": {dstAddr6},
				"ip.src": {"10.0.12.1"}, "ip.dst": {"10.0.95.1"}, "ip.ttl": {"64"},
				"data.data": {hexPayload("v4encap")},
			},
		},
		{
			name:   "End",
			sid:    []string{"fc00:2::e1", "End"},
			pkt:    v6("fc00:12::1", "fc00:2::e1", 64) + "/" + srh(q(dstAddr6, "fc00:2::e1"), 1, "") + "/" + udp + "/" + payload("end"),
			filter: "ip6 dst host " + dstAddr6,
			want: testutil.Packet{
				"ipv6.src": {"fc00:12::1"}, "ipv6.dst": {dstAddr6}, "ipv6.hlim": {"63"},
				"ipv6.routing.segleft": {"0"}, "ipv6.routing.srh.last_entry": {"1"},
				"ipv6.routing.srh.addr": {dstAddr6, "fc00:2::e1"}, "data.data": {hexPayload("end")},
			},
		},
		{
			// fc00:96::1 has no route on the SUT: only the cross-connect gets it to dst.
			name:   "End.X",
			sid:    []string{"fc00:2::e3", "end.x", "nh6", dstAddr6},
			pkt:    v6("fc00:12::1", "fc00:2::e3", 64) + "/" + srh(q("fc00:96::1", "fc00:2::e3"), 1, "") + "/" + udp + "/" + payload("end.x"),
			filter: "ip6 dst host fc00:96::1",
			want: testutil.Packet{
				"ipv6.dst": {"fc00:96::1"}, "ipv6.hlim": {"63"}, "ipv6.routing.segleft": {"0"},
				"ipv6.routing.srh.addr": {"fc00:96::1", "fc00:2::e3"}, "data.data": {hexPayload("end.x")},
			},
		},
		{
			// fc00:98::/64 is only in table 100.
			name:   "End.T",
			sid:    []string{"fc00:2::e4", "End.T", "table", altTable},
			pkt:    v6("fc00:12::1", "fc00:2::e4", 64) + "/" + srh(q("fc00:98::1", "fc00:2::e4"), 1, "") + "/" + udp + "/" + payload("end.t"),
			filter: "ip6 dst host fc00:98::1",
			want: testutil.Packet{
				"ipv6.dst": {"fc00:98::1"}, "ipv6.hlim": {"63"}, "ipv6.routing.segleft": {"0"},
				"data.data": {hexPayload("end.t")},
			},
		},
		{
			name: "End.DX2",
			sid:  []string{"fc00:2::d2", "End.DX2", "oif", sutOut},
			pkt: v6("fc00:12::1", "fc00:2::d2", 64) + "/" + srh(q("fc00:2::d2"), 0, "143") +
				`/Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")/IP(src="10.1.1.1", dst="10.2.2.2", ttl=9)/` + udp + "/" + payload("end.dx2"),
			filter: "ether src 02:00:00:00:00:01",
			want: testutil.Packet{
				// The inner frame leaves unchanged: no outer IPv6, TTL untouched.
				"eth.src": {"02:00:00:00:00:01"}, "eth.dst": {"02:00:00:00:00:02"}, "ipv6.dst": absent,
				"ip.src": {"10.1.1.1"}, "ip.dst": {"10.2.2.2"}, "ip.ttl": {"9"}, "data.data": {hexPayload("end.dx2")},
			},
		},
		{
			name: "End.DX4",
			sid:  []string{"fc00:2::d4", "End.DX4", "nh4", dstAddr4},
			pkt: v6("fc00:12::1", "fc00:2::d4", 64) + "/" + srh(q("fc00:2::d4"), 0, "4") +
				`/IP(src="10.0.12.1", dst="10.0.23.3", ttl=9)/` + udp + "/" + payload("end.dx4"),
			filter: "ip dst host " + dstAddr4,
			want: testutil.Packet{
				"ipv6.dst": absent, "ip.src": {"10.0.12.1"}, "ip.dst": {dstAddr4}, "ip.ttl": {"8"},
				"eth.dst": {tp.dstMAC}, "data.data": {hexPayload("end.dx4")},
			},
		},
		{
			// fc00:97::1 has no route: nh6 alone takes the inner packet to dst.
			name: "End.DX6",
			sid:  []string{"fc00:2::d6", "End.DX6", "nh6", dstAddr6},
			pkt: v6("fc00:12::1", "fc00:2::d6", 64) + "/" + srh(q("fc00:2::d6"), 0, "41") + "/" +
				v6("fc00:12::1", "fc00:97::1", 9) + "/" + udp + "/" + payload("end.dx6"),
			filter: "ip6 dst host fc00:97::1",
			want: testutil.Packet{
				"ipv6.src": {"fc00:12::1"}, "ipv6.dst": {"fc00:97::1"}, "ipv6.hlim": {"8"},
				"ipv6.routing.segleft": absent, "eth.dst": {tp.dstMAC}, "data.data": {hexPayload("end.dx6")},
			},
		},
		{
			name: "End.DT6",
			sid:  []string{"fc00:2::d7", "End.DT6", "table", altTable},
			pkt: v6("fc00:12::1", "fc00:2::d7", 64) + "/" + srh(q("fc00:2::d7"), 0, "41") + "/" +
				v6("fc00:12::1", "fc00:98::2", 9) + "/" + udp + "/" + payload("end.dt6"),
			filter: "ip6 dst host fc00:98::2",
			want: testutil.Packet{
				"ipv6.src": {"fc00:12::1"}, "ipv6.dst": {"fc00:98::2"}, "ipv6.hlim": {"8"},
				"ipv6.routing.segleft": absent, "data.data": {hexPayload("end.dt6")},
			},
		},
		{
			// Linux's End.B6 is T.Insert of the policy: a new SRH goes on top,
			// with the packet's DA (the binding SID) as its last segment; the
			// original SRH is left as it was.
			name: "End.B6",
			sid:  []string{"fc00:2::b6", "End.B6", "segs", dstAddr6},
			pkt: v6("fc00:12::1", "fc00:2::b6", 64) + "/" + srh(q("fc00:90::1", "fc00:2::b6"), 1, "") + "/" +
				udp + "/" + payload("end.b6"),
			filter: "ip6 dst host " + dstAddr6,
			want: testutil.Packet{
				"ipv6.dst": {dstAddr6}, "ipv6.hlim": {"63"}, "ipv6.routing.segleft": {"1", "1"},
				"ipv6.routing.srh.last_entry": {"1", "1"},
				"ipv6.routing.srh.addr":       {"fc00:2::b6", dstAddr6, "fc00:90::1", "fc00:2::b6"},
				"data.data":                   {hexPayload("end.b6")},
			},
		},
		{
			// End on the packet (SL 1 -> 0, DA <- fc00:90::1), then H.Encaps.
			name: "End.B6.Encaps",
			sid:  []string{"fc00:2::be", "End.B6.Encaps", "segs", dstAddr6, "dev", sutOut},
			pkt: v6("fc00:12::1", "fc00:2::be", 64) + "/" + srh(q("fc00:90::1", "fc00:2::be"), 1, "") + "/" +
				udp + "/" + payload("end.b6.encaps"),
			filter: "ip6 dst host " + dstAddr6,
			want: testutil.Packet{
				"ipv6.src": {sutOutAddr6, "fc00:12::1"}, "ipv6.dst": {dstAddr6, "fc00:90::1"},
				"ipv6.hlim": {"63", "64"}, "ipv6.routing.segleft": {"0", "0"},
				"ipv6.routing.srh.addr": {dstAddr6, "fc00:90::1", "fc00:2::be"},
				"data.data":             {hexPayload("end.b6.encaps")},
			},
		},
		{
			// PSP: the penultimate SID pops the SRH.
			name:   "End flavors psp",
			sid:    []string{"fc00:2::e2", "End", "flavors", "psp"},
			probed: true,
			pkt:    v6("fc00:12::1", "fc00:2::e2", 64) + "/" + srh(q(dstAddr6, "fc00:2::e2"), 1, "") + "/" + udp + "/" + payload("psp"),
			filter: "ip6 dst host " + dstAddr6,
			want: testutil.Packet{
				"ipv6.dst": {dstAddr6}, "ipv6.nxt": {"17"}, "ipv6.hlim": {"63"},
				"ipv6.routing.segleft": absent, "ipv6.routing.srh.addr": absent, "data.data": {hexPayload("psp")},
			},
		},
	}
}

func TestPrivilegedNativeBehaviors(t *testing.T) {
	requireNative(t)
	tp := newTopo(t)
	h, err := dataplane.Open(tp.sut)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	for i, tc := range behaviorCases(tp) {
		viaExec := i%2 == 0 // half the SIDs through `ip netns exec`, half with --netns
		t.Run(tc.name, func(t *testing.T) {
			if tc.probed {
				// `sid add` consults dataplane.Probe for this feature: where
				// the kernel lacks it, the install must fail naming it.
				out, err := sid(tp.sut, viaExec, append([]string{"add"}, tc.sid...)...)
				// iproute2, not segchain's probe, says whether the kernel has it.
				ok, evidence := testutil.Seg6LocalAccepted(t, tc.sid[1:]...)
				testutil.AgreeWithProbe(t, strings.Join(tc.sid[1:], " "), err == nil, ok, evidence)
				if err != nil {
					if !strings.Contains(out, "not supported by this kernel") {
						t.Fatalf("sid add %s: %v, without saying what the kernel lacks: %s", strings.Join(tc.sid, " "), err, out)
					}
					t.Skipf("kernel lacks it; install fails clearly: %s", strings.TrimSpace(out))
				}
			}
			switch {
			case tc.headend != nil:
				if err := h.ReplaceRoute(*tc.headend); err != nil {
					t.Fatalf("install headend: %v", err)
				}
				t.Cleanup(func() { _ = h.DeleteRoute(*tc.headend) })
			case !tc.probed:
				mustSid(t, tp.sut, viaExec, append([]string{"add"}, tc.sid...)...)
			}
			if tc.sid != nil {
				t.Cleanup(func() { _, _ = sid(tp.sut, false, "del", tc.sid[0]) })
			}

			capt := tp.capture(t, tc.filter, nPkts)
			l3len := tp.send(t, tc.pkt, nPkts)
			pcap := capt.Wait(captureWait)
			pkts := testutil.Tshark(t, pcap, tsharkFields...)
			if len(pkts) != nPkts {
				t.Fatalf("dst captured %d packets matching %q, want %d\ntcpdump: %s\nSUT: %s", len(pkts), tc.filter, nPkts,
					capt.Log(), testutil.Exec(t, "", "ip", "-n", tp.sut, "-s", "-d", "-6", "route"))
			}
			for i, p := range pkts {
				got := testutil.Packet{}
				for k := range tc.want {
					got[k] = p[k]
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("packet %d at dst (-want +got):\n%s\nfull dissection: %v", i, diff, p)
				}
			}

			if tc.sid != nil {
				checkCounters(t, tp.sut, prefix128(tc.sid[0]), nPkts, uint64(nPkts*l3len), 0)
			}
		})
	}

	for _, tc := range []struct{ name, sid string }{
		{"End.DT4", "fc00:2::d8 End.DT4 vrftable 100"},
		{"End.DT46", "fc00:2::d9 End.DT46 vrftable 100"},
		{"End.DT6 vrftable", "fc00:2::da End.DT6 vrftable 100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := strings.Fields(tc.sid)
			out, err := sid(tp.sut, true, append([]string{"add"}, args...)...)
			if err == nil {
				_, _ = sid(tp.sut, false, "del", args[0])
				t.Skipf("this kernel has VRF (sid add %s worked): the not-supported path does not apply", tc.sid)
			}
			// apply's preflight sentence (dataplane.Features.Explain).
			for _, want := range []string{"needs VRF devices, which the kernel of node", "lacks"} {
				if !strings.Contains(out, want) {
					t.Errorf("error %q does not say %q", strings.TrimSpace(out), want)
				}
			}
			if r := testutil.Exec(t, "", "ip", "-n", tp.sut, "-6", "route", "show", prefix128(args[0])); strings.TrimSpace(r) != "" {
				t.Errorf("a route was left behind: %s", r)
			}
		})
	}
}

// checkCounters compares a SID's counters as segchain reports them (sid
// show -o json) with the expected values and with iproute2's reading.
func checkCounters(t *testing.T, ns, sidPrefix string, pkts, bytes, errs uint64) {
	t.Helper()
	es := showJSON(t, ns, sidPrefix)
	if len(es) != 1 {
		t.Fatalf("sid show %s: %d entries, want 1", sidPrefix, len(es))
	}
	want := map[string]uint64{"packets": pkts, "bytes": bytes, "errors": errs}
	if diff := cmp.Diff(want, es[0].Counters); diff != "" {
		t.Errorf("segchain counters of %s (-want +got):\n%s", sidPrefix, diff)
	}
	p, b, e := ipRouteCounters(t, ns, sidPrefix)
	if diff := cmp.Diff(want, map[string]uint64{"packets": p, "bytes": b, "errors": e}); diff != "" {
		t.Errorf("iproute2 counters of %s (-want +got):\n%s", sidPrefix, diff)
	}
}
