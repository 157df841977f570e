package srunaware

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDropNames(t *testing.T) {
	if len(dropNames) != numDropReasons {
		t.Fatalf("dropNames has %d names, enum proxy_drop_reason has %d", len(dropNames), numDropReasons)
	}
	for r := range numDropReasons {
		if DropReason(r).String() == "unknown" {
			t.Errorf("drop reason %d has no name", r)
		}
	}
}

func TestParseSpec(t *testing.T) {
	sid := netip.MustParsePrefix("fc00:2::ad/128")
	mac, _ := net.ParseMAC("02:00:00:00:00:1b")
	tests := []struct {
		name     string
		behavior string
		params   string
		want     Spec
		wantErr  string
	}{
		{"AD6 keywords", "End.AD", "inner ipv6 nh6 fc00:5f::2 oif sf0 iif sf1",
			Spec{SID: sid, Behavior: EndAD, Inner: InnerIPv6, NH: a6("fc00:5f::2"), OIF: "sf0", IIF: "sf1"}, ""},
		{"AD4 spelling", "End.AD4", "nh4 10.0.0.2 oif sf0 iif sf1",
			Spec{SID: sid, Behavior: EndAD, Inner: InnerIPv4, NH: netip.MustParseAddr("10.0.0.2"), OIF: "sf0", IIF: "sf1"}, ""},
		{"srconf end.ad6", "end.ad6", "ip fc00:5f::2 sf0 sf1",
			Spec{SID: sid, Behavior: EndAD, Inner: InnerIPv6, NH: a6("fc00:5f::2"), OIF: "sf0", IIF: "sf1"}, ""},
		{"srconf end.ead4", "end.ead4", "ip 10.0.0.2 sf0 sf1",
			Spec{SID: sid, Behavior: EndEAD, Inner: InnerIPv4, NH: netip.MustParseAddr("10.0.0.2"), OIF: "sf0", IIF: "sf1"}, ""},
		{"srconf end.am mac", "end.am", "mac 02:00:00:00:00:1b sf0 sf1",
			Spec{SID: sid, Behavior: EndAM, Inner: InnerIPv6, MAC: mac, OIF: "sf0", IIF: "sf1"}, ""},
		{"AS full", "End.AS", "inner ipv4 nh4 10.0.0.2 oif sf0 iif sf1 src fc00:2::5 segs fc00:3::1,fc00:4::d6 tag 7",
			Spec{SID: sid, Behavior: EndAS, Inner: InnerIPv4, NH: netip.MustParseAddr("10.0.0.2"), OIF: "sf0", IIF: "sf1",
				Src: a6("fc00:2::5"), Segs: []netip.Addr{a6("fc00:3::1"), a6("fc00:4::d6")}, Tag: 7}, ""},
		{"AD flow", "End.AD", "inner ipv6 mac 02:00:00:00:00:1b oif sf0 iif sf1 flow timeout 30",
			Spec{SID: sid, Behavior: EndAD, Inner: InnerIPv6, MAC: mac, OIF: "sf0", IIF: "sf1", Flow: true, FlowTimeout: 30 * time.Second}, ""},
		{"AD6 with inner ipv4 contradicts", "End.AD6", "inner ipv4 nh4 10.0.0.2 oif a iif b", Spec{}, "contradicts"},
		{"AS without segs", "End.AS", "inner ipv6 nh6 fc00::2 oif a iif b src fc00::1", Spec{}, "segs"},
		{"two S-ADDRs", "End.AD6", "nh6 fc00::2 mac 02:00:00:00:00:01 oif a iif b", Spec{}, "one S-ADDR"},
		{"missing iif", "End.AD6", "nh6 fc00::2 oif a", Spec{}, "iif"},
		{"AM with nh4", "End.AM", "nh4 10.0.0.1 oif a iif b", Spec{}, "IPv6 only"},
		{"flow on AM", "End.AM", "nh6 fc00::2 oif a iif b flow", Spec{}, "flow belongs"},
		{"unknown keyword", "End.AD6", "nh6 fc00::2 oif a iif b color red", Spec{}, "unknown parameter"},
		{"flow max", "End.AD6", "nh6 fc00:5f::2 oif sf0 iif sf1 flow max 1000 timeout 30",
			Spec{SID: sid, Behavior: EndAD, Inner: InnerIPv6, NH: a6("fc00:5f::2"), OIF: "sf0", IIF: "sf1", Flow: true, FlowMax: 1000, FlowTimeout: 30 * time.Second}, ""},
		{"flow max without timeout", "End.AD6", "nh6 fc00::2 oif a iif b flow max 10", Spec{}, "needs flow timeout"},
		{"max without flow", "End.AD6", "nh6 fc00::2 oif a iif b max 10 timeout 5", Spec{}, "max needs flow"},
		{"flow max too big", "End.AD6", "nh6 fc00::2 oif a iif b flow max 65537 timeout 5", Spec{}, "want 1..65536"},
		{"AD ethernet", "End.AD", "inner ethernet oif sf0 iif sf1",
			Spec{SID: sid, Behavior: EndAD, Inner: InnerEthernet, OIF: "sf0", IIF: "sf1"}, ""},
		{"AS ethernet", "End.AS", "inner ethernet oif sf0 iif sf1 src fc00:2::5 segs fc00:4::d2",
			Spec{SID: sid, Behavior: EndAS, Inner: InnerEthernet, OIF: "sf0", IIF: "sf1", Src: a6("fc00:2::5"), Segs: []netip.Addr{a6("fc00:4::d2")}}, ""},
		{"ethernet with a MAC", "End.AD", "inner ethernet mac 02:00:00:00:00:01 oif a iif b", Spec{}, "no S-ADDR"},
		{"ethernet with nh6", "End.AD", "inner ethernet nh6 fc00::2 oif a iif b", Spec{}, "no S-ADDR"},
		{"ethernet per flow", "End.AD", "inner ethernet oif a iif b flow", Spec{}, "not for frames"},
		{"not a proxy", "End.DX6", "nh6 fc00::2", Spec{}, "not an SR proxy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSpec(sid, tc.behavior, strings.Fields(tc.params))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// Params() must parse back to the same spec.
			again, err := ParseSpec(sid, got.Behavior, got.Params())
			if err != nil || !again.Equal(got) {
				t.Errorf("round trip of %q: %v, %v", got.Params(), again, err)
			}
		})
	}
}

func TestBuildEncapDecode(t *testing.T) {
	segs := []netip.Addr{a6("fc00:3::1"), a6("fc00:4::2"), a6("fc00:5::3")}
	hdr, nhOff := BuildEncap(a6("fc00:2::5"), segs, 9, InnerIPv4)
	if nhOff != 40 || hdr[40] != 4 {
		t.Fatalf("next header at %d = %d", nhOff, hdr[nhOff])
	}
	got := DecodeHeader(hdr)
	want := HeaderView{Len: 40 + 8 + 48, Src: a6("fc00:2::5"), DA: segs[0], HopLimit: 64, SL: 2, Tag: 9, Path: segs, ExtHdrs: []uint8{43}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
