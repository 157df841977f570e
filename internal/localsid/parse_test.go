package localsid

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/nodestate"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func sidRoute(sid string, l nodestate.Seg6Local) nodestate.Route {
	p, err := ParseSID(sid)
	if err != nil {
		panic(err)
	}
	return nodestate.Route{Dst: p, Seg6Local: &l}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		args string
		want nodestate.Route
	}{
		{"End", "fc00:2::100 End",
			sidRoute("fc00:2::100", nodestate.Seg6Local{Action: "End", Count: true})},
		{"lower case and prefix", "fc00:2::/64 end nocount",
			sidRoute("fc00:2::/64", nodestate.Seg6Local{Action: "End"})},
		{"prefix is masked", "fc00:2::5/64 End",
			sidRoute("fc00:2::/64", nodestate.Seg6Local{Action: "End", Count: true})},
		{"End flavors psp", "fc00:2::100 End flavors psp",
			sidRoute("fc00:2::100", nodestate.Seg6Local{Action: "End", Flavors: []string{"psp"}, Count: true})},
		{"End next-csid F4816", "2001:db8:aa:200::/64 End flavors next-csid lblen 48 nflen 16",
			sidRoute("2001:db8:aa:200::/64", nodestate.Seg6Local{Action: "End", Flavors: []string{"next-csid"}, LBLen: 48, NFLen: 16, Count: true})},
		{"End.X", "fc00:2::101 End.X nh6 fc00:23::3 oif veth1",
			sidRoute("fc00:2::101", nodestate.Seg6Local{Action: "End.X", Nh6: mustAddr("fc00:23::3"), Oif: "veth1", Count: true})},
		{"End.T main", "fc00:2::102 end.t table main",
			sidRoute("fc00:2::102", nodestate.Seg6Local{Action: "End.T", Table: 254, Count: true})},
		{"End.DX2", "fc00:2::103 End.DX2 oif veth1",
			sidRoute("fc00:2::103", nodestate.Seg6Local{Action: "End.DX2", Oif: "veth1", Count: true})},
		{"srconf end.dx2 OIF", "fc00:2::103 end.dx2 veth1",
			sidRoute("fc00:2::103", nodestate.Seg6Local{Action: "End.DX2", Oif: "veth1", Count: true})},
		{"End.DX4", "fc00:2::104 End.DX4 nh4 10.0.1.2",
			sidRoute("fc00:2::104", nodestate.Seg6Local{Action: "End.DX4", Nh4: mustAddr("10.0.1.2"), Count: true})},
		{"srconf end.dx4 ip NH4 OIF", "fc00:2::104 end.dx4 ip 10.0.1.2 veth2",
			sidRoute("fc00:2::104", nodestate.Seg6Local{Action: "End.DX4", Nh4: mustAddr("10.0.1.2"), Oif: "veth2", Count: true})},
		{"End.DX6 with dev", "fc00:2::105 End.DX6 nh6 fc00:24::4 dev veth0 count",
			nodestate.Route{Dst: netip.MustParsePrefix("fc00:2::105/128"), Dev: "veth0",
				Seg6Local: &nodestate.Seg6Local{Action: "End.DX6", Nh6: mustAddr("fc00:24::4"), Count: true}}},
		{"srconf end.dx6 ip NH6", "fc00:2::105 end.dx6 ip fc00:24::4",
			sidRoute("fc00:2::105", nodestate.Seg6Local{Action: "End.DX6", Nh6: mustAddr("fc00:24::4"), Count: true})},
		{"End.DT4", "fc00:2::106 End.DT4 vrftable 100",
			sidRoute("fc00:2::106", nodestate.Seg6Local{Action: "End.DT4", VRFTable: 100, Count: true})},
		{"End.DT6 table", "fc00:2::107 End.DT6 table 100",
			sidRoute("fc00:2::107", nodestate.Seg6Local{Action: "End.DT6", Table: 100, Count: true})},
		{"End.DT6 vrftable", "fc00:2::107 End.DT6 vrftable 100",
			sidRoute("fc00:2::107", nodestate.Seg6Local{Action: "End.DT6", VRFTable: 100, Count: true})},
		{"End.DT46", "fc00:2::108 END.DT46 vrftable 7",
			sidRoute("fc00:2::108", nodestate.Seg6Local{Action: "End.DT46", VRFTable: 7, Count: true})},
		{"End.B6 path order", "fc00:2::109 End.B6 segs fc00:3::1,fc00:4::1 hmac 7",
			sidRoute("fc00:2::109", nodestate.Seg6Local{Action: "End.B6", Segs: []netip.Addr{mustAddr("fc00:3::1"), mustAddr("fc00:4::1")}, HMAC: 7, Count: true})},
		{"End.B6.Encaps iproute2 srh segs", "fc00:2::10a End.B6.Encaps srh segs fc00:3::1",
			sidRoute("fc00:2::10a", nodestate.Seg6Local{Action: "End.B6.Encaps", Segs: []netip.Addr{mustAddr("fc00:3::1")}, Count: true})},
		{"End.BPF", "fc00:2::10b end.bpf endpoint /sys/fs/bpf/x",
			sidRoute("fc00:2::10b", nodestate.Seg6Local{Action: "End.BPF", BPF: "/sys/fs/bpf/x", Count: true})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(strings.Fields(tt.args))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
				cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.args, diff)
			}
			// Args must round-trip through Parse.
			again, err := Parse(Args(got))
			if err != nil {
				t.Fatalf("Parse(Args(%q)) = %v (args %q)", tt.args, err, Args(got))
			}
			if again.String() != got.String() || again.Dev != got.Dev {
				t.Errorf("round trip: %q -> %q", got, again)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, args, want string
	}{
		{"too short", "fc00::1", "usage"},
		{"bad sid", "10.0.0.1 End", "not an IPv6 address"},
		{"bad prefix", "fc00::/129 End", "not an IPv6 prefix"},
		{"unknown behaviour", "fc00::1 End.XYZ", "unknown behaviour"},
		{"End.DX6 requires nh6", "fc00::1 End.DX6", "End.DX6 requires nh6"},
		{"End.X requires nh6", "fc00::1 end.x oif veth0", "End.X requires nh6"},
		{"table not of End.X", "fc00::1 End.X nh6 fc00::2 table 100", "table is not a parameter of End.X"},
		{"nh6 family", "fc00::1 End.DX6 nh6 10.0.0.1", "wrong address family"},
		{"nh4 on DX6", "fc00::1 End.DX6 ip 10.0.0.1", "nh4 is not a parameter of End.DX6"},
		{"missing value", "fc00::1 End.T table", "table needs a value"},
		{"bad table", "fc00::1 End.T table x", "table \"x\""},
		{"DT6 needs one", "fc00::1 End.DT6", "exactly one of table, vrftable"},
		{"DT6 not both", "fc00::1 End.DT6 table 1 vrftable 2", "exactly one of table, vrftable"},
		{"segs v6 only", "fc00::1 End.B6 segs fc00::2,10.0.0.1", "not an IPv6 address"},
		{"B6 requires segs", "fc00::1 End.B6.Encaps hmac 3", "End.B6.Encaps requires segs"},
		{"hmac zero", "fc00::1 End.B6 segs fc00::2 hmac 0", "key id"},
		{"flavor unknown", "fc00::1 End flavors foo", "flavor \"foo\""},
		{"flavors not on DX6", "fc00::1 End.DX6 nh6 fc00::2 flavors psp", "flavors is not a parameter of End.DX6"},
		{"lblen without next-csid", "fc00::1 End flavors psp lblen 48 nflen 16", "give flavors next-csid"},
		{"lblen alone", "fc00::1 End flavors next-csid lblen 48", "lblen and nflen go together"},
		{"lblen not bytes", "fc00::1 End flavors next-csid lblen 44 nflen 16", "a positive multiple of 8"},
		{"lengths too long", "fc00::1 End flavors next-csid lblen 120 nflen 16", "> 128"},
		{"iif not native", "fc00::1 End.DX6 nh6 fc00::2 iif veth0", "iif is not a parameter of End.DX6"},
		{"twice", "fc00::1 End.X nh6 fc00::2 nh6 fc00::3", "nh6 given twice"},
		{"typo keyword", "fc00::1 End.X nh5 fc00::2", "unknown parameter \"nh5\""},
		{"srh without segs", "fc00::1 End.B6 srh fc00::2", "srh must be followed by segs"},
		{"dev twice", "fc00::1 End dev a dev b", "dev given twice"},
		{"endpoint required", "fc00::1 End.BPF", "End.BPF requires endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.Fields(tt.args))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) error = %v, want it to contain %q", tt.args, err, tt.want)
			}
		})
	}
	if _, err := Parse([]string{"fc00::1", "End.AS"}); !errors.Is(err, ErrUnknownBehavior) {
		t.Errorf("End.AS: error %v is not ErrUnknownBehavior", err)
	}
}

func TestFormat(t *testing.T) {
	r, err := Parse(strings.Fields("fc00:2::101 End.X nh6 fc00:23::3 oif veth1"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		c    *dataplane.Counters
		want string
	}{
		{"with counters", &dataplane.Counters{Packets: 3, Bytes: 312, Errors: 1},
			"fc00:2::101 End.X nh6 fc00:23::3 oif veth1 packets 3 bytes 312 errors 1"},
		{"no counters", nil, "fc00:2::101 End.X nh6 fc00:23::3 oif veth1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Format(r, tt.c)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	e := Entry{SID: netip.MustParsePrefix("fc00::/64"), Behavior: "End.AS",
		Params: map[string]string{"oif": "v1", "iif": "v2", "nh4": "10.0.0.2"}, Counters: map[string]uint64{"drop_nosrh": 2, "errors": 1, "packets": 5}}
	want := "fc00::/64 End.AS nh4 10.0.0.2 iif v2 oif v1 packets 5 errors 1 drop_nosrh 2"
	if diff := cmp.Diff(want, FormatEntry(e)); diff != "" {
		t.Errorf("FormatEntry (-want +got):\n%s", diff)
	}
}
