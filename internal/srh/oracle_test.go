package srh

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/segchain/segchain/internal/testutil"
)

// scapyCases builds SRv6 packets with scapy and prints, per packet, the raw
// bytes, scapy's own dissection of them and the recipe, so that the test can
// rebuild the same packet with this package's builders.
const scapyCases = `
S, P0, P1, P2 = "fd00::1", "fc00:1::100", "fc00:2::200", "fc00:3::300"
H1, H2 = "2001:db8::1", "2001:db8::2"
inner6 = IPv6(src=H1, dst=H2, hlim=63)/UDP(sport=1234, dport=53)/b"hello"
SRH = IPv6ExtHdrSegmentRouting

def tlvs_of(objs):
    out = []
    for o in objs:
        b = bytes(o)
        if b[0] == 0:
            out.append({"type": 0, "value": ""})
        else:
            out.append({"type": b[0], "value": hexof(b[2:2+b[1]])})
    return out

def case(name, pkt, mode, path, inner=None, proto=0, orig=None, tlvs=(), tag=0, flags=0, reduced=False):
    rawb = bytes(pkt)
    p = IPv6(rawb)
    d = {"name": name, "hex": hexof(rawb), "src": p.src, "dst": p.dst, "hlim": p.hlim, "tc": p.tc,
         "fl": p.fl, "plen": p.plen, "nh": p.nh,
         "build": {"mode": mode, "path": path, "proto": proto, "tag": tag, "flags": flags, "reduced": reduced,
                   "inner": hexof(bytes(inner)) if inner is not None else "",
                   "orig": hexof(bytes(orig)) if orig is not None else "",
                   "tlvs": tlvs_of(tlvs)}}
    s = p.getlayer(SRH)
    if s is not None:
        fl = s.unused1 << 7 | s.protected << 6 | s.oam << 5 | s.alert << 4 | s.hmac << 3 | s.unused2
        d["srh"] = {"nh": s.nh, "len": s.len, "type": s.type, "sl": s.segleft, "le": s.lastentry,
                    "flags": fl, "tag": s.tag, "segs": list(s.addresses), "inner": hexof(bytes(s.payload))}
    print(json.dumps(d))

hm32 = SRHHMAC(D=1, keyid=0x01020304, hmac=bytes(range(32)))
case("encap-v6", IPv6(src=S, dst=P0)/SRH(nh=41, addresses=[P2, P1, P0], tag=0x1234)/inner6,
     "encap", [P0, P1, P2], inner=inner6, proto=41, tag=0x1234)
in4 = IP(src="10.0.0.1", dst="10.0.0.2", ttl=9)/TCP(sport=80, dport=4321, flags="SA")
case("encap-v4-hmac", IPv6(src=S, dst=P0)/SRH(nh=4, addresses=[P0], tlv_objects=[hm32])/in4,
     "encap", [P0], inner=in4, proto=4, tlvs=[hm32])
unk = SRHTLV(type=99, value=b"\x01\x02\x03")
icmp = ICMPv6EchoRequest(id=1, seq=2, data=b"ping")
case("insert-icmp-unknown-tlv", IPv6(src=H1, dst=P0)/SRH(nh=58, addresses=[H2, P1, P0], tlv_objects=[unk])/icmp,
     "insert", [P0, P1], orig=IPv6(src=H1, dst=H2)/icmp, tlvs=[unk])
eth = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")/IPv6(src=H1, dst=H2)/UDP(sport=7, dport=9)/b"l2"
case("l2-encap", IPv6(src=S, dst=P0)/SRH(nh=143, addresses=[P1, P0])/eth, "encap", [P0, P1], inner=eth, proto=143)
case("encap-red", IPv6(src=S, dst=P0)/SRH(nh=41, addresses=[P2, P1], segleft=2, lastentry=1)/inner6,
     "encap", [P0, P1, P2], inner=inner6, proto=41, reduced=True)
u5 = SRHTLV(type=200, value=b"abcde")
case("pad1", IPv6(src=S, dst=P0)/SRH(nh=41, addresses=[P0], tlv_objects=[u5])/inner6,
     "encap", [P0], inner=inner6, proto=41, tlvs=[u5])
hm16 = SRHHMAC(D=0, keyid=9, hmac=b"\xaa"*16)
padn = IPv6ExtHdrSegmentRoutingTLVPadN(padding=b"\x00"*4)
case("hmac16-padn", IPv6(src=S, dst=P0)/SRH(nh=41, addresses=[P1, P0], tlv_objects=[hm16, padn])/inner6,
     "encap", [P0, P1], inner=inner6, proto=41, tlvs=[hm16, padn])
udp = UDP(sport=5000, dport=6000)/b"x"
case("insert-hbh", IPv6(src=H1, dst=P0)/IPv6ExtHdrHopByHop()/SRH(nh=17, addresses=[H2, P0])/udp,
     "insert", [P0], orig=IPv6(src=H1, dst=H2)/IPv6ExtHdrHopByHop()/udp)
case("flags-tag", IPv6(src=S, dst=P0)/SRH(nh=41, addresses=[P1, P0], tag=0xffff, protected=1, oam=1)/inner6,
     "encap", [P0, P1], inner=inner6, proto=41, tag=0xffff, flags=0x60)
`

type scapyCase struct {
	Name     string `json:"name"`
	Hex      string `json:"hex"`
	Src, Dst string
	Hlim     uint8  `json:"hlim"`
	TC       uint8  `json:"tc"`
	FL       uint32 `json:"fl"`
	Plen     uint16 `json:"plen"`
	NH       uint8  `json:"nh"`
	SRH      *struct {
		NH, Len, Type, SL, LE, Flags uint8
		Tag                          uint16
		Segs                         []string
		Inner                        string
	} `json:"srh"`
	Build struct {
		Mode    string
		Path    []string
		Proto   uint8
		Tag     uint16
		Flags   uint8
		Reduced bool
		Inner   string
		Orig    string
		TLVs    []struct {
			Type  uint8
			Value string
		}
	} `json:"build"`
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadScapyCases(t *testing.T) []scapyCase {
	out := testutil.RunScapy(t, scapyCases)
	var cases []scapyCase
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c scapyCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("scapy output %q: %v", sc.Text(), err)
		}
		cases = append(cases, c)
	}
	if len(cases) < 9 {
		t.Fatalf("scapy produced %d cases, want 9", len(cases))
	}
	return cases
}

// TestScapyOracle decodes scapy-built packets and compares every field with
// scapy's own dissection, then rebuilds each packet with BuildEncap /
// BuildInsert and requires the same bytes scapy produced.
func TestScapyOracle(t *testing.T) {
	for _, c := range loadScapyCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			raw := mustHex(t, c.Hex)
			p, err := DecodePacket(raw)
			if err != nil {
				t.Fatalf("DecodePacket: %v", err)
			}
			type outer struct {
				Src, Dst    string
				Hlim, TC, N uint8
				FL          uint32
				Plen        uint16
			}
			if diff := cmp.Diff(outer{c.Src, c.Dst, c.Hlim, c.TC, c.NH, c.FL, c.Plen},
				outer{p.Src.String(), p.Dst.String(), p.HopLimit, p.TrafficClass, p.NextHeader, p.FlowLabel, p.PayloadLen}); diff != "" {
				t.Errorf("outer header (-scapy +ours):\n%s", diff)
			}
			if c.SRH == nil || p.SRH == nil {
				t.Fatalf("srh: scapy %v, ours %v", c.SRH != nil, p.SRH != nil)
			}
			var segs []string
			for _, a := range p.SRH.Segments {
				segs = append(segs, a.String())
			}
			s := p.SRH
			got := []any{s.NextHeader, s.HdrExtLen, s.RoutingType, s.SegmentsLeft, s.LastEntry, s.Flags, s.Tag, segs, hex.EncodeToString(p.Inner)}
			want := []any{c.SRH.NH, c.SRH.Len, c.SRH.Type, c.SRH.SL, c.SRH.LE, c.SRH.Flags, c.SRH.Tag, c.SRH.Segs, c.SRH.Inner}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("srh nh/len/type/sl/le/flags/tag/segments/inner (-scapy +ours):\n%s", diff)
			}
			// The TLVs scapy was given, in order, are ours minus trailing padding.
			var gotTLVs []TLV
			for _, tlv := range s.TLVs {
				gotTLVs = append(gotTLVs, TLV{Type: tlv.Type, Value: append([]byte{}, tlv.Value...)})
			}
			wantTLVs := make([]TLV, 0, len(c.Build.TLVs))
			for _, tlv := range c.Build.TLVs {
				wantTLVs = append(wantTLVs, TLV{Type: tlv.Type, Value: mustHex(t, tlv.Value)})
			}
			if len(gotTLVs) > len(wantTLVs) {
				for _, extra := range gotTLVs[len(wantTLVs):] {
					if !extra.IsPadding() {
						t.Errorf("unexpected trailing TLV %+v", extra)
					}
				}
				gotTLVs = gotTLVs[:len(wantTLVs)]
			}
			if diff := cmp.Diff(wantTLVs, gotTLVs, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("TLVs (-scapy +ours):\n%s", diff)
			}
			for _, tlv := range s.TLVs {
				if h, ok := tlv.HMAC(); ok && c.Name == "encap-v4-hmac" {
					if !h.D || h.KeyID != 0x01020304 || len(h.HMAC) != 32 || h.HMAC[31] != 31 {
						t.Errorf("HMAC view %+v", h)
					}
				}
			}

			// Rebuild with our builders: same bytes as scapy.
			path := make([]netip.Addr, len(c.Build.Path))
			for i, a := range c.Build.Path {
				path[i] = netip.MustParseAddr(a)
			}
			// HMAC TLVs are re-encoded through our typed constructor so that
			// NewHMACTLV's layout is checked against scapy's bytes too.
			buildTLVs := make([]TLV, len(wantTLVs))
			for i, tlv := range wantTLVs {
				buildTLVs[i] = tlv
				if h, ok := tlv.HMAC(); ok {
					buildTLVs[i] = NewHMACTLV(h.D, h.KeyID, h.HMAC)
				}
			}
			opts := Options{Tag: c.Build.Tag, Flags: c.Build.Flags, Reduced: c.Build.Reduced, TLVs: buildTLVs}
			var built []byte
			switch c.Build.Mode {
			case "encap":
				built, err = BuildEncap(netip.MustParseAddr(c.Src), path, mustHex(t, c.Build.Inner), c.Build.Proto, opts)
			case "insert":
				built, err = BuildInsert(mustHex(t, c.Build.Orig), path, opts)
			default:
				t.Fatalf("mode %q", c.Build.Mode)
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(raw, built); diff != "" {
				t.Errorf("our build differs from scapy's (-scapy +ours):\n%s", diff)
			}
		})
	}
}

// TestTsharkOracle writes packets encoded by this package to a pcap and
// checks that tshark's dissection of the SRH agrees with what we encoded.
func TestTsharkOracle(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	src := netip.MustParseAddr("fd00::1")
	inner := rawIPv6("2001:db8::1", "2001:db8::2", ProtoUDP, 63, udpPayload)
	type want struct {
		sl, le, flags uint8
		tag           uint16
		path          []netip.Addr
	}
	cases := []struct {
		name  string
		build func() ([]byte, error)
	}{
		{"encap3", func() ([]byte, error) {
			return BuildEncap(src, addrs("fc00:1::1", "fc00:2::2", "fc00:3::3"), inner, ProtoIPv6, Options{Tag: 0x4242, Flags: 0x20})
		}},
		{"encap-hmac", func() ([]byte, error) {
			return BuildEncap(src, addrs("fc00:1::1"), inner, ProtoIPv6, Options{TLVs: []TLV{NewHMACTLV(true, 3, make([]byte, 32))}})
		}},
		{"insert", func() ([]byte, error) { return BuildInsert(inner, addrs("fc00:1::1", "fc00:9::9"), Options{Tag: 1}) }},
		{"red", func() ([]byte, error) {
			return BuildEncap(src, addrs("fc00:1::1", "fc00:2::2", "fc00:3::3"), inner, ProtoIPv6, Options{Reduced: true, Tag: 77})
		}},
		{"l2", func() ([]byte, error) {
			return BuildL2Encap(src, addrs("fc00:5::5", "fc00:6::6"), make([]byte, 60), Options{})
		}},
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "srh.pcap")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		t.Fatal(err)
	}
	var wants []*SRH
	for _, c := range cases {
		b, err := c.build()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p, err := DecodePacket(b)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		wants = append(wants, p.SRH)
		if err := w.WritePacket(captureInfo(len(b)), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tshark", "-r", file, "-T", "fields", "-E", "separator=;", "-E", "aggregator=,",
		"-e", "ipv6.routing.type", "-e", "ipv6.routing.segleft", "-e", "ipv6.routing.srh.last_entry",
		"-e", "ipv6.routing.srh.flags", "-e", "ipv6.routing.srh.tag", "-e", "ipv6.routing.srh.addr",
		"-e", "ipv6.routing.len").Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("tshark printed %d lines, want %d:\n%s", len(lines), len(cases), out)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := wants[i]
			var segs []string
			for _, a := range s.Segments {
				segs = append(segs, a.String())
			}
			want := fmt.Sprintf("4;%d;%d;0x%02x;%s;%s;%d", s.SegmentsLeft, s.LastEntry, s.Flags,
				fmt.Sprintf("%04x", s.Tag), strings.Join(segs, ","), s.HdrExtLen)
			if diff := cmp.Diff(want, normTshark(lines[i])); diff != "" {
				t.Errorf("type/sl/le/flags/tag/segments/len (-ours +tshark):\n%s", diff)
			}
		})
	}
}
