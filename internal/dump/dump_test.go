package dump

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func runFile(t *testing.T, path string, pr Printer, f Filter) string {
	t.Helper()
	src, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out bytes.Buffer
	if _, err := Run(context.Background(), Config{Source: src, Printer: pr, Filter: f, Out: &out}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestGolden renders the scapy capture in every format and compares with
// testdata/*.golden (go test -update rewrites them). The pcapng copy of the
// same frames must render identically.
func TestGolden(t *testing.T) {
	c := goldenCapture(t)
	res := NewTable([]SIDInfo{
		{SID: mustPrefix("fc00:1::/48"), Node: "nfv1", Service: "fw", Behavior: "End.AD", LocatorBits: 48, FunctionBits: 16, ArgsBits: 64},
		{SID: mustPrefix("fc00:2::200/128"), Node: "nfv2", Service: "ids", Behavior: "End", LocatorBits: 48, FunctionBits: 16},
	})
	tests := []struct {
		name string
		pr   Printer
	}{
		{"line", Printer{Format: FormatLine}},
		{"tree", Printer{Format: FormatTree}},
		{"json", Printer{Format: FormatJSON}},
		{"line-annotated", Printer{Format: FormatLine, Resolver: res}},
		{"tree-annotated", Printer{Format: FormatTree, Resolver: res}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runFile(t, c.pcap(), tt.pr, NewFilter())
			if ng := runFile(t, c.pcapng(), tt.pr, NewFilter()); ng != got {
				t.Errorf("pcapng output differs from pcap output (-pcap +pcapng):\n%s", cmp.Diff(got, ng))
			}
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update once)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("output (-golden +got):\n%s", diff)
			}
		})
	}
}

type jsonPkt struct {
	IPv6 *struct {
		Src, Dst string
	}
	SRH *struct {
		SegmentsLeft int `json:"segments_left"`
		LastEntry    int `json:"last_entry"`
		Flags        int
		Tag          int
		Segments     []struct {
			Index int
			SID   string
			State string
			InSRH *bool `json:"in_srh"`
		}
		TLVs []struct {
			Type  int
			Name  string
			D     bool
			KeyID uint32 `json:"key_id"`
		}
	}
	Inner *struct {
		Kind           string
		Proto          int
		Sport, Dport   int
		TCPFlags       string `json:"tcp_flags"`
		ICMPType       *int   `json:"icmp_type"`
		ChecksumStatus string `json:"checksum_status"`
	}
	Error *struct {
		Reason string
		Offset int
	}
}

func jsonPackets(t *testing.T, out string) []jsonPkt {
	t.Helper()
	var pkts []jsonPkt
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("line %d is not valid JSON: %s", i+1, line)
		}
		var p jsonPkt
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		pkts = append(pkts, p)
	}
	return pkts
}

// TestSemantics checks, per scapy packet, the facts the issue asks for:
// error reasons, checksum verdicts, states, TLV decoding.
func TestSemantics(t *testing.T) {
	c := goldenCapture(t)
	pkts := jsonPackets(t, runFile(t, c.pcap(), Printer{Format: FormatJSON}, NewFilter()))
	if len(pkts) != len(c.names) {
		t.Fatalf("%d packets, want %d", len(pkts), len(c.names))
	}
	by := map[string]jsonPkt{}
	for i, n := range c.names {
		by[n] = pkts[i]
	}
	reasons := map[string]string{
		"malformed-segleft": "segments-left", "malformed-tlv-overflow": "tlv-overflow",
		"malformed-routing-type": "routing-type", "malformed-hmac-len": "bad-hmac-tlv", "truncated-ipv6": "truncated",
	}
	for _, n := range c.names {
		t.Run(n, func(t *testing.T) {
			p := by[n]
			got := ""
			if p.Error != nil {
				got = p.Error.Reason
			}
			if got != reasons[n] {
				t.Errorf("error reason %q, want %q", got, reasons[n])
			}
		})
	}
	csum := map[string]string{
		"encap-v6-udp": "ok", "encap-v4-tcp-hmac": "ok", "insert-icmp6-tlvs": "ok", "l2-encap": "ok", "encap-red": "ok",
		"insert-bad-cksum": "bad", "plain-icmp6": "ok", "encap-v6-tcp-bad-inner": "bad", "hbh-insert-udp": "ok", "flags-pad1": "ok",
	}
	for n, want := range csum {
		if in := by[n].Inner; in == nil || in.ChecksumStatus != want {
			t.Errorf("%s: checksum %+v, want %s", n, in, want)
		}
	}
	red := by["encap-red"].SRH
	if red == nil || len(red.Segments) != 3 || red.Segments[0].State != "active" || red.Segments[0].InSRH == nil ||
		red.Segments[0].SID != "fc00:1::100" || red.Segments[1].State != "remaining" {
		t.Errorf("reduced srh segments: %+v", red)
	}
	first := by["encap-v6-udp"].SRH
	var states []string
	for _, s := range first.Segments {
		states = append(states, strconv.Itoa(s.Index)+":"+s.State)
	}
	if diff := cmp.Diff([]string{"2:visited", "1:active", "0:remaining"}, states); diff != "" {
		t.Errorf("segment states (-want +got):\n%s", diff)
	}
	h := by["encap-v4-tcp-hmac"].SRH
	if h == nil || len(h.TLVs) != 1 || h.TLVs[0].Name != "hmac" || !h.TLVs[0].D || h.TLVs[0].KeyID != 0x01020304 {
		t.Errorf("hmac tlv: %+v", h)
	}
	if in := by["encap-v4-tcp-hmac"].Inner; in == nil || in.TCPFlags != "S." || in.Sport != 80 || in.Dport != 4321 {
		t.Errorf("inner tcp: %+v", in)
	}
}

// TestTsharkCrossCheck compares, frame by frame, what tshark decodes with
// our JSON: outer addresses, SRH fields, every segment, inner ports and
// TCP flags, ICMPv6 type. Frames we report as malformed are skipped (tshark
// does not check TLVs).
func TestTsharkCrossCheck(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	c := goldenCapture(t)
	pkts := jsonPackets(t, runFile(t, c.pcap(), Printer{Format: FormatJSON}, NewFilter()))
	out, err := exec.Command("tshark", "-r", c.pcap(), "-T", "fields", "-E", "separator=;", "-E", "aggregator=,",
		"-e", "ipv6.src", "-e", "ipv6.dst", "-e", "ipv6.routing.segleft", "-e", "ipv6.routing.srh.last_entry",
		"-e", "ipv6.routing.srh.tag", "-e", "ipv6.routing.srh.flags", "-e", "ipv6.routing.srh.addr",
		"-e", "udp.srcport", "-e", "udp.dstport", "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "tcp.flags",
		"-e", "icmpv6.type").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(pkts) {
		t.Fatalf("tshark printed %d lines, we %d packets", len(lines), len(pkts))
	}
	checked := 0
	for i, line := range lines {
		p := pkts[i]
		if p.Error != nil || p.SRH == nil {
			continue
		}
		t.Run(c.names[i], func(t *testing.T) {
			f := strings.Split(line, ";")
			first := func(s string) string { a, _, _ := strings.Cut(s, ","); return a }
			ts := map[string]string{
				"src": first(f[0]), "dst": first(f[1]), "sl": f[2], "le": f[3], "flags": f[5], "segs": f[6],
			}
			tag, err := strconv.ParseUint(strings.ReplaceAll(f[4], ":", ""), 16, 16)
			if err != nil {
				t.Fatalf("tshark tag %q: %v", f[4], err)
			}
			ts["tag"] = strconv.FormatUint(tag, 10)
			var segs []string
			for j := len(p.SRH.Segments) - 1; j >= 0; j-- { // wire order, as tshark lists them
				if s := p.SRH.Segments[j]; s.InSRH == nil {
					segs = append(segs, s.SID)
				}
			}
			ours := map[string]string{
				"src": p.IPv6.Src, "dst": p.IPv6.Dst, "sl": strconv.Itoa(p.SRH.SegmentsLeft), "le": strconv.Itoa(p.SRH.LastEntry),
				"flags": "0x" + strconv.FormatInt(int64(p.SRH.Flags)|0x100, 16)[1:], "segs": strings.Join(segs, ","),
				"tag": strconv.Itoa(p.SRH.Tag),
			}
			if in := p.Inner; in != nil {
				switch in.Proto {
				case 17:
					ts["ports"], ours["ports"] = f[7]+">"+f[8], strconv.Itoa(in.Sport)+">"+strconv.Itoa(in.Dport)
				case 6:
					ts["ports"], ours["ports"] = f[9]+">"+f[10], strconv.Itoa(in.Sport)+">"+strconv.Itoa(in.Dport)
					fl, _ := strconv.ParseUint(strings.TrimPrefix(f[11], "0x"), 16, 16)
					ts["tcpflags"], ours["tcpflags"] = tcpFlagString(uint8(fl)), in.TCPFlags
				case 58:
					ts["icmp6"], ours["icmp6"] = f[12], strconv.Itoa(*in.ICMPType)
				}
			}
			if diff := cmp.Diff(ts, ours); diff != "" {
				t.Errorf("tshark vs dump (-tshark +dump):\n%s", diff)
			}
		})
		checked++
	}
	if checked < 8 {
		t.Errorf("only %d frames cross-checked", checked)
	}
}

func tcpFlagString(f uint8) string { return string(appendTCPFlags(nil, f)) }
