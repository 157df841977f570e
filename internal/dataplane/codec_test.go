package dataplane

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/nodestate"
)

// unhex decodes a hex string written with spaces and "|" separators.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "|", "", "\n", "", "\t", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, x := range s {
		out = append(out, netip.MustParseAddr(x))
	}
	return out
}

const (
	segA    = "fc00 0000 0000 0000 0000 0000 0000 000a"
	segB    = "fc00 0000 0000 0000 0000 0000 0000 000b"
	segZero = "0000 0000 0000 0000 0000 0000 0000 0000"
)

// The expected layouts are derived by hand from RFC 8754 §2 (Next Header,
// Hdr Ext Len in 8-octet units not counting the first 8, Routing Type 4,
// Segments Left, Last Entry, Flags, Tag, Segment List[0..n] with [0] the
// LAST segment) and §2.1.2 (HMAC TLV: type 5, length 38, D bit + reserved,
// key id, 32-byte HMAC).
func TestEncodeSRHLayout(t *testing.T) {
	tests := []struct {
		name      string
		segs      []netip.Addr
		reserveDA bool
		hmac      uint32
		want      string
	}{
		{
			name: "encap two segments",
			segs: addrs("fc00::a", "fc00::b"),
			// hdrlen (8+32)/8-1=4, SL=1, LE=1
			want: "00 04 04 01 01 00 0000 |" + segB + "|" + segA,
		},
		{
			name: "inline reserves Segment List[0]",
			segs: addrs("fc00::a", "fc00::b"), reserveDA: true,
			// three entries: hdrlen (8+48)/8-1=6, SL=LE=2, [0] zero for the final DA
			want: "00 06 04 02 02 00 0000 |" + segZero + "|" + segB + "|" + segA,
		},
		{
			name: "encap one segment with hmac",
			segs: addrs("fc00::a"), hmac: 7,
			// 8+16+40=64 bytes: hdrlen 7, H flag 0x08, TLV 05 26 0000 00000007 + 32 zero bytes
			want: "00 07 04 00 00 08 0000 |" + segA + "| 05 26 0000 00000007 |" + strings.Repeat("00", 32),
		},
		{
			name: "inline with hmac",
			segs: addrs("fc00::a"), reserveDA: true, hmac: 0x01020304,
			want: "00 09 04 01 01 08 0000 |" + segZero + "|" + segA + "| 05 26 0000 01020304 |" + strings.Repeat("00", 32),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeSRH(tc.segs, tc.reserveDA, tc.hmac)
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, tc.want); !bytes.Equal(got, want) {
				t.Errorf("EncodeSRH:\n got % x\nwant % x", got, want)
			}
			segs, keyID, err := DecodeSRH(got, tc.reserveDA)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.segs, segs, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("DecodeSRH segs (-want +got):\n%s", diff)
			}
			if keyID != tc.hmac {
				t.Errorf("DecodeSRH hmac = %d, want %d", keyID, tc.hmac)
			}
		})
	}
}

func TestSeg6EncapAttributeLayout(t *testing.T) {
	// RTA_ENCAP payload: nlattr{len=4+4+40, type=SEG6_IPTUNNEL_SRH} then
	// struct seg6_iptunnel_encap{int mode (host order); srh}.
	e := &Seg6Encap{nodestate.Seg6Encap{Mode: "encap", Segs: addrs("fc00::a", "fc00::b")}}
	got, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, "3000 0100 | 01000000 | 00 04 04 01 01 00 0000 |"+segB+"|"+segA)
	if !bytes.Equal(got, want) {
		t.Errorf("Encode:\n got % x\nwant % x", got, want)
	}
	for mode, num := range map[string]byte{"inline": 0, "encap": 1, "l2encap": 2, "encap.red": 3, "l2encap.red": 4} {
		t.Run(mode, func(t *testing.T) {
			in := nodestate.Seg6Encap{Mode: mode, Segs: addrs("fc00::1", "fc00::2", "fc00::3"), HMACKeyID: 9}
			b, err := (&Seg6Encap{in}).Encode()
			if err != nil {
				t.Fatal(err)
			}
			if b[4] != num {
				t.Errorf("mode byte = %d, want %d", b[4], num)
			}
			var out Seg6Encap
			if err := out.Decode(b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(in, out.Seg6Encap, cmpAddr); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

var cmpAddr = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func TestSeg6LocalEncapRoundTrip(t *testing.T) {
	tests := []nodestate.Seg6Local{
		{Action: "End"},
		{Action: "End", Count: true, Flavors: []string{"psp"}},
		{Action: "End.X", Nh6: netip.MustParseAddr("fc00::9"), Flavors: []string{"next-csid"}},
		{Action: "End.T", Table: 100},
		{Action: "End.DX4", Nh4: netip.MustParseAddr("10.0.0.2")},
		{Action: "End.DX6", Nh6: netip.MustParseAddr("fc00::2")},
		{Action: "End.DT6", Table: 300, Count: true},
		{Action: "End.DT4", VRFTable: 10},
		{Action: "End.DT46", VRFTable: 10},
		{Action: "End.B6", Segs: addrs("fc00::1", "fc00::2"), HMAC: 5},
		{Action: "End.B6.Encaps", Segs: addrs("fc00::1", "fc00::2", "fc00::3")},
	}
	for _, in := range tests {
		t.Run(in.String(), func(t *testing.T) {
			b, err := (&Seg6LocalEncap{Seg6Local: in}).Encode()
			if err != nil {
				t.Fatal(err)
			}
			var out Seg6LocalEncap
			if err := out.Decode(b); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(in, out.Seg6Local, cmpAddr); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			if in.Count != (out.Counters != nil) {
				t.Errorf("counters = %v, count = %v", out.Counters, in.Count)
			}
		})
	}
}

func TestSeg6LocalEncodeLayout(t *testing.T) {
	// SEG6_LOCAL_ACTION(1)=End(1), SEG6_LOCAL_COUNTERS(10)|NLA_F_NESTED with
	// PACKETS(2)/BYTES(3)/ERRORS(4) u64 zero, SEG6_LOCAL_FLAVORS(11)|NESTED
	// with OPERATION(1) = 1<<SEG6_LOCAL_FLV_OP_PSP(1) = 2 (host order).
	e := &Seg6LocalEncap{Seg6Local: nodestate.Seg6Local{Action: "End", Count: true, Flavors: []string{"psp"}}}
	got, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, `0800 0100 01000000
		2800 0a80 | 0c00 0200 0000000000000000 | 0c00 0300 0000000000000000 | 0c00 0400 0000000000000000
		0c00 0b80 | 0800 0100 02000000`)
	if !bytes.Equal(got, want) {
		t.Errorf("Encode:\n got % x\nwant % x", got, want)
	}
}

func TestDecodeSRHErrors(t *testing.T) {
	good, err := EncodeSRH(addrs("fc00::a", "fc00::b"), false, 3)
	if err != nil {
		t.Fatal(err)
	}
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	tests := []struct {
		name string
		b    []byte
	}{
		{"truncated fixed header", good[:5]},
		{"hdr len beyond buffer", good[:len(good)-8]},
		{"routing type 3", mut(func(b []byte) []byte { b[2] = 3; return b })},
		{"last entry overflows", mut(func(b []byte) []byte { b[4] = 9; return b })},
		{"tlv overflows", mut(func(b []byte) []byte { b[8+32+1] = 200; return b })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := DecodeSRH(tc.b, false); !errors.Is(err, ErrMalformed) {
				t.Errorf("DecodeSRH error = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	tests := []struct {
		name string
		enc  interface{ Encode() ([]byte, error) }
	}{
		{"no segments", &Seg6Encap{nodestate.Seg6Encap{Mode: "encap"}}},
		{"bad mode", &Seg6Encap{nodestate.Seg6Encap{Mode: "tunnel", Segs: addrs("fc00::1")}}},
		{"ipv4 segment", &Seg6Encap{nodestate.Seg6Encap{Mode: "encap", Segs: addrs("10.0.0.1")}}},
		{"bad action", &Seg6LocalEncap{Seg6Local: nodestate.Seg6Local{Action: "End.Q"}}},
		{"bad flavor", &Seg6LocalEncap{Seg6Local: nodestate.Seg6Local{Action: "End", Flavors: []string{"xsp"}}}},
		{"nh4 not v4", &Seg6LocalEncap{Seg6Local: nodestate.Seg6Local{Action: "End.DX4", Nh4: netip.MustParseAddr("fc00::1")}}},
		{"bpf without fd", &Seg6LocalEncap{Seg6Local: nodestate.Seg6Local{Action: "End.BPF", BPF: "/sys/fs/bpf/x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.enc.Encode(); err == nil {
				t.Error("Encode succeeded, want an error")
			}
		})
	}
}

func TestSysctlPath(t *testing.T) {
	tests := []struct {
		key, want string
		wantErr   bool
	}{
		{key: "net.ipv6.conf.eth0.seg6_enabled", want: "/proc/sys/net/ipv6/conf/eth0/seg6_enabled"},
		{key: "net.ipv6.conf.eth0.100.seg6_enabled", want: "/proc/sys/net/ipv6/conf/eth0.100/seg6_enabled"},
		{key: "net.ipv4.conf.all.rp_filter", want: "/proc/sys/net/ipv4/conf/all/rp_filter"},
		{key: "net.ipv6.neigh.v.1.base_reachable_time_ms", want: "/proc/sys/net/ipv6/neigh/v.1/base_reachable_time_ms"},
		{key: "net.ipv6.seg6_flowlabel", want: "/proc/sys/net/ipv6/seg6_flowlabel"},
		{key: "net.ipv4.ip_forward", want: "/proc/sys/net/ipv4/ip_forward"},
		{key: "net.ipv6.conf.../x", wantErr: true},
		{key: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			got, err := SysctlPath(tc.key)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("SysctlPath(%q) = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	in := nodestate.Route{
		Dst: netip.MustParsePrefix("fc00::1:2/64"), Table: 254, Metric: 1024, Owner: "x",
		Dev: "lo", Seg6Local: &nodestate.Seg6Local{Action: "End", Segs: []netip.Addr{}, Flavors: []string{}},
	}
	want := nodestate.Route{Dst: netip.MustParsePrefix("fc00::/64"), Seg6Local: &nodestate.Seg6Local{Action: "End"}}
	if diff := cmp.Diff(want, Canonical(in), cmpAddr, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("Canonical (-want +got):\n%s", diff)
	}
}

func TestFeaturesCheck(t *testing.T) {
	yes := func(n string) Feature { return Feature{Name: n, Supported: true} }
	no := func(n string) Feature { return Feature{Name: n, Reason: "missing here"} }
	f := Features{
		VRF: no("vrf"), EndDT4: no("End.DT4"), EndDT46: no("End.DT46"), VRFTable: no("vrftable"),
		Counters: yes("count"), FlavorPSP: yes("flavor psp"), FlavorNextCSID: no("flavor next-csid"),
		EndBPF: yes("End.BPF"), HMAC: no("seg6 hmac"), L2Encap: yes("mode l2encap"),
		EncapRed: no("mode encap.red"), L2EncapRed: yes("mode l2encap.red"),
	}
	seg := []netip.Addr{netip.MustParseAddr("fc00::1")}
	tests := []struct {
		name    string
		r       nodestate.Route
		missing string // "" = supported
	}{
		{"plain", nodestate.Route{Dst: netip.MustParsePrefix("fc00::/64")}, ""},
		{"encap", nodestate.Route{Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: seg}}, ""},
		{"l2encap", nodestate.Route{Seg6: &nodestate.Seg6Encap{Mode: "l2encap", Segs: seg}}, ""},
		{"encap.red", nodestate.Route{Seg6: &nodestate.Seg6Encap{Mode: "encap.red", Segs: seg}}, "mode encap.red"},
		{"hmac", nodestate.Route{Seg6: &nodestate.Seg6Encap{Mode: "encap", Segs: seg, HMACKeyID: 1}}, "seg6 hmac"},
		{"End count psp", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End", Count: true, Flavors: []string{"psp"}}}, ""},
		{"End next-csid", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End", Flavors: []string{"next-csid"}}}, "flavor next-csid"},
		{"End usd", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End", Flavors: []string{"usd"}}}, "flavor usd"},
		{"End.DT4", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End.DT4", VRFTable: 10}}, "End.DT4"},
		{"End.DT46", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End.DT46", VRFTable: 10}}, "End.DT46"},
		{"End.DT6 table", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End.DT6", Table: 10}}, ""},
		{"End.DT6 vrftable", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End.DT6", VRFTable: 10}}, "vrftable"},
		{"End.B6 hmac", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End.B6", Segs: seg, HMAC: 2}}, "seg6 hmac"},
		{"End.X next-csid", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End.X", Flavors: []string{"next-csid"}}}, "flavor next-csid"},
		{"End.X psp", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End.X", Flavors: []string{"psp"}}}, "only for End"},
		{"End.T psp ignored by kernel", nodestate.Route{Seg6Local: &nodestate.Seg6Local{Action: "End.T", Table: 1, Flavors: []string{"psp"}}}, "psp on End.T"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := f.Check(tc.r)
			if tc.missing == "" {
				if err != nil {
					t.Errorf("Check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), tc.missing) {
				t.Errorf("Check = %v, want ErrNotSupported naming %q", err, tc.missing)
			}
		})
	}
}

// Explain is the sentence apply's preflight and segchain sid add share.
func TestFeaturesExplain(t *testing.T) {
	yes := func(n string) Feature { return Feature{Name: n, Supported: true} }
	f := Features{VRF: Feature{Name: "vrf", Reason: "no vrf link kind"}, EndDT4: yes("End.DT4"), EndDT46: yes("End.DT46"),
		VRFTable: yes("vrftable"), Counters: Feature{Name: "count", Reason: "kernel rejected fc00::1 End count: invalid argument"},
		FlavorPSP: yes("flavor psp"), FlavorNextCSID: yes("flavor next-csid"), EndBPF: yes("End.BPF"), HMAC: yes("seg6 hmac"),
		L2Encap: yes("mode l2encap"), EncapRed: yes("mode encap.red"), L2EncapRed: yes("mode l2encap.red")}
	sid := netip.MustParsePrefix("fc00:5::1/128")
	tests := []struct {
		name string
		r    nodestate.Route
		want string // "" = nil
	}{
		{"End", nodestate.Route{Dst: sid, Seg6Local: &nodestate.Seg6Local{Action: "End"}}, ""},
		{"counters", nodestate.Route{Dst: sid, Owner: "chain web", Seg6Local: &nodestate.Seg6Local{Action: "End", Count: true}},
			"chain web: End at fc00:5::1/128: the kernel of node n1 cannot do it (count: the kernel said: invalid argument: not supported by this kernel)"},
		// End.DT4's own feature reported supported: the VRF it needs is still checked.
		{"End.DT4 without VRF", nodestate.Route{Dst: sid, Seg6Local: &nodestate.Seg6Local{Action: "End.DT4", VRFTable: 10}},
			"End.DT4 at fc00:5::1/128: needs VRF devices, which the kernel of node n1 lacks (no vrf link kind)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := f.Explain(tc.r, "n1")
			if tc.want == "" {
				if err != nil {
					t.Errorf("Explain = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tc.want || !errors.Is(err, ErrNotSupported) {
				t.Errorf("Explain = %v,\nwant %s (wrapping ErrNotSupported)", err, tc.want)
			}
		})
	}
}
