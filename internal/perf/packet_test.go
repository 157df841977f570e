package perf

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/testutil"
)

// fakeEnv lets recipes build frames without a SUT.
func fakeEnv() *Env {
	mac := func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	return &Env{
		In: "in0", Out: "out0",
		InMAC: mac("02:00:00:00:00:01"), TxMAC: mac("02:00:00:00:00:02"),
		OutMAC: mac("02:00:00:00:00:03"), RxMAC: mac("02:00:00:00:00:04"),
		Run: func(...string) (string, error) { return "", nil },
	}
}

// decoded is what scapy says about a frame (testdata/decode.py).
type decoded struct {
	FrameLen     int      `json:"frame_len"`
	EthType      int      `json:"eth_type"`
	OuterFamily  int      `json:"outer_family"`
	OuterSrc     string   `json:"outer_src"`
	OuterDst     string   `json:"outer_dst"`
	OuterLen     int      `json:"outer_len"`
	OuterCsumOK  *bool    `json:"outer_csum_ok,omitempty"`
	SL           *int     `json:"sl,omitempty"`
	LastEntry    *int     `json:"last_entry,omitempty"`
	Segs         []string `json:"segs,omitempty"`
	SRHNH        *int     `json:"srh_nh,omitempty"`
	InnerEthType int      `json:"inner_eth_type,omitempty"`
	InnerFamily  int      `json:"inner_family,omitempty"`
	InnerDst     string   `json:"inner_dst,omitempty"`
	InnerLen     int      `json:"inner_len,omitempty"`
	InnerCsumOK  *bool    `json:"inner_csum_ok,omitempty"`
	UDPDport     int      `json:"udp_dport"`
	UDPLen       int      `json:"udp_len"`
	UDPCsumOK    *bool    `json:"udp_csum_ok,omitempty"`
}

func ip(n int) *int { return &n }
func yes() *bool    { b := true; return &b }

// TestTemplatesScapy builds every recipe's frame (k = 1, 64-byte inner
// packet) and checks scapy's dissection against what the behaviour needs,
// written out by hand from RFC 8754/8986 (wire order: Segment List[0] is the
// last segment).
func TestTemplatesScapy(t *testing.T) {
	testutil.RequireScapy(t)
	srv6 := func(dst string, sl int, segs []string, nh int, innerFam int, innerDst string) decoded {
		d := decoded{EthType: 0x86dd, OuterFamily: 6, OuterSrc: "fc00:1::2", OuterDst: dst, SL: ip(sl),
			LastEntry: ip(len(segs) - 1), Segs: segs, SRHNH: ip(nh), InnerFamily: innerFam, InnerDst: innerDst,
			InnerLen: 64, UDPDport: 5000, UDPLen: 24}
		d.OuterLen = 40 + 8 + 16*len(segs) + 64
		if nh == 143 {
			d.OuterLen += 14
			d.InnerEthType = 0x86dd
		}
		d.FrameLen = 14 + d.OuterLen
		if innerFam == 4 {
			d.UDPLen = 44
			d.InnerCsumOK = yes()
		} else {
			d.UDPCsumOK = yes()
		}
		return d
	}
	plain6 := func(dst string) decoded {
		return decoded{FrameLen: 78, EthType: 0x86dd, OuterFamily: 6, OuterSrc: "fc00:1::2", OuterDst: dst, OuterLen: 64,
			UDPDport: 5000, UDPLen: 24, UDPCsumOK: yes()}
	}
	endPkt := srv6("fc00:a:1::1", 1, []string{"fc00:100:1::1", "fc00:a:1::1"}, 41, 6, "fc00:100:1::1")
	decap6 := srv6("fc00:a:1::1", 0, []string{"fc00:a:1::1", "fc00:b00:1::9"}, 41, 6, "fc00:100:1::1")
	decap4 := srv6("fc00:a:1::1", 0, []string{"fc00:a:1::1", "fc00:b00:1::9"}, 4, 4, "10.100.1.1")
	want := map[string]decoded{
		"IPv6":       plain6("fc00:100:1::1"),
		"ip6tables":  plain6("fc00:100:1::1"),
		"nftables":   plain6("fc00:100:1::1"),
		"nfqueue":    plain6("fc00:100:1::1"),
		"nfqueue-rt": plain6("fc00:100:1::1"),
		"IPv4": {FrameLen: 78, EthType: 0x0800, OuterFamily: 4, OuterSrc: "10.1.0.2", OuterDst: "10.100.1.1", OuterLen: 64,
			OuterCsumOK: yes(), UDPDport: 5000, UDPLen: 44},
		"SRv6-transit":    srv6("fc00:b00:1::1", 1, []string{"fc00:100:1::1", "fc00:b00:1::1"}, 41, 6, "fc00:100:1::1"),
		"T.Encaps":        plain6("fc00:200:1::1"),
		"T.Encaps.Red":    plain6("fc00:200:1::1"),
		"T.Insert":        plain6("fc00:200:1::1"),
		"T.Encaps.L2":     plain6("fc00:200:1::1"),
		"T.Encaps.L2.Red": plain6("fc00:200:1::1"),
		"End":             endPkt, "End.X": endPkt, "End.X.onlink": endPkt, "End.T": endPkt,
		"End.B6": endPkt, "End.B6.Encaps": endPkt,
		"End.DX2": srv6("fc00:a:1::1", 0, []string{"fc00:a:1::1", "fc00:b00:1::9"}, 143, 6, "fc00:100:1::1"),
		"End.DX4": decap4, "End.DT4": decap4,
		"End.DX6": decap6, "End.DT6": decap6, "End.DT46": decap6, "decap+re-encap": decap6,
	}
	reg, err := NewRegistry(append(NativeRecipes(), BaselineRecipes()...)...)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var hexes bytes.Buffer
	for _, r := range reg.List() {
		frame, err := r.Setup(fakeEnv(), 1, Params{Size: 64})
		if IsNotSupported(err) {
			t.Logf("skip %s: %v", r.Name(), err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := want[r.Name()]; !ok {
			t.Errorf("recipe %s has no expectation in this test", r.Name())
			continue
		}
		names = append(names, r.Name())
		hexes.WriteString(hex.EncodeToString(frame) + "\n")
	}
	cmd := exec.Command("python3", "testdata/decode.py")
	cmd.Stdin = &hexes
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scapy: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for i := 0; sc.Scan(); i++ {
		name := names[i]
		t.Run(name, func(t *testing.T) {
			var got decoded
			if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want[name], got); diff != "" {
				t.Errorf("scapy disagrees (-want +got)\n%s", diff)
			}
		})
	}
}

// TestTemplatesTshark writes the frames into a pcap and checks tshark's
// reading of destinations, Segments Left and the UDP checksum.
func TestTemplatesTshark(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	reg, err := NewRegistry(NativeRecipes()...)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		recipe string
		want   string // ipv6.dst (outer,inner) \t segleft \t udp checksum status (1 = good)
	}{
		{"IPv6", "fc00:100:1::1\t\t1"},
		{"End", "fc00:a:1::1,fc00:100:1::1\t1\t1"},
		{"End.DX6", "fc00:a:1::1,fc00:100:1::1\t0\t1"},
		{"SRv6-transit", "fc00:b00:1::1,fc00:100:1::1\t1\t1"},
	}
	var frames [][]byte
	for _, c := range cases {
		r, err := reg.Get(c.recipe)
		if err != nil {
			t.Fatal(err)
		}
		frame, err := r.Setup(fakeEnv(), 1, Params{Size: 64})
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, frame)
	}
	path := filepath.Join(t.TempDir(), "templates.pcap")
	if err := os.WriteFile(path, pcapOf(frames), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("tshark", "-r", path, "-o", "udp.check_checksum:TRUE", "-T", "fields",
		"-e", "ipv6.dst", "-e", "ipv6.routing.segleft", "-e", "udp.checksum.status").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("tshark printed %d lines, want %d:\n%s", len(lines), len(cases), out)
	}
	for i, c := range cases {
		t.Run(c.recipe, func(t *testing.T) {
			if diff := cmp.Diff(c.want, lines[i]); diff != "" {
				t.Errorf("tshark disagrees (-want +got)\n%s", diff)
			}
		})
	}
}
