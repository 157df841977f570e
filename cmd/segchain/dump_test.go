package main

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/srh"
)

// writeDumpPcap writes three raw-IPv6 SRv6 packets (tags 1, 2, 7).
func writeDumpPcap(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "in.pcap")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		t.Fatal(err)
	}
	inner := make([]byte, 40) // an empty IPv6 header: no next header
	inner[0], inner[6] = 0x60, 59
	path := []netip.Addr{netip.MustParseAddr("fc00:1::1"), netip.MustParseAddr("fc00:2::2")}
	for i, tag := range []uint16{1, 2, 7} {
		b, err := srh.BuildEncap(netip.MustParseAddr("fd00::1"), path, inner, srh.ProtoIPv6, srh.Options{Tag: tag})
		if err != nil {
			t.Fatal(err)
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1700000000+int64(i), 0), CaptureLength: len(b), Length: len(b)}
		if err := w.WritePacket(ci, b); err != nil {
			t.Fatal(err)
		}
	}
	return file
}

func runDumpCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs(append([]string{"dump"}, args...))
	err := cmd.Execute()
	return out.String(), err
}

func TestDumpCLI(t *testing.T) {
	in := writeDumpPcap(t)
	out, err := runDumpCLI(t, "-r", in, "--tag", "7")
	if err != nil {
		t.Fatal(err)
	}
	want := "22:13:22.000000 fd00::1 > fc00:1::1 srh sl 1 le 1 tag 7 [fc00:1::1*, fc00:2::2] | ipv6 :: > :: none\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("--tag 7 (-want +got):\n%s", diff)
	}

	out, err = runDumpCLI(t, "-r", in, "-o", "json", "-c", "2")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n"); n != 2 || !strings.Contains(out, `"segments_left":1`) {
		t.Errorf("-o json -c 2 printed %d lines:\n%s", n, out)
	}

	written := filepath.Join(t.TempDir(), "out.pcap")
	if out, err = runDumpCLI(t, "-r", in, "-w", written, "--sid", "fc00:2::/32", "--tag", "2"); err != nil || out != "" {
		t.Fatalf("-w: err %v, printed %q", err, out)
	}
	out, err = runDumpCLI(t, "-r", written)
	if err != nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, "tag 2 ") {
		t.Errorf("re-read of -w output: err %v\n%s", err, out)
	}

	for _, bad := range [][]string{
		{},
		{"-r", in, "-i", "lo"},
		{"-r", in, "-o", "xml"},
		{"-r", in, "--inner", "port"},
		{"-r", in, "--sid", "not-an-address"},
		{"-r", in, "--netns", "x"},
		{"--lab", "x", "-i", "no-colon"},
	} {
		if _, err := runDumpCLI(t, bad...); err == nil {
			t.Errorf("dump %v: no error", bad)
		}
	}
}

func TestResolverFromDomainDefault(t *testing.T) {
	res, err := resolverFromDomain("")
	if err != nil {
		t.Fatal(err)
	}
	d, err := loadDomain("")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.SIDs) == 0 {
		t.Skip("default domain has no SIDs")
	}
	for _, s := range p.SIDs {
		got, ok := res.Lookup(s.SID.Addr())
		if !ok {
			t.Errorf("SID %v not annotated", s.SID)
			continue
		}
		if got.Node != s.Node || got.Service != s.Service || got.Behavior != s.Behavior ||
			got.LocatorBits != s.LocatorBits || got.FunctionBits != s.FunctionBits || got.ArgsBits != s.Args {
			t.Errorf("SID %v annotated %+v, plan says %+v", s.SID, got, s)
		}
	}
}

// TestDumpTcpdumpFlags: tcpdump's everyday flags are accepted and do what
// they do there.
func TestDumpTcpdumpFlags(t *testing.T) {
	file := writeDumpPcap(t)
	plain, err := runDumpCLI(t, "-r", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, flags := range [][]string{{"-n"}, {"-nn"}, {"-n", "-e"}} {
		out, err := runDumpCLI(t, append([]string{"-r", file}, flags...)...)
		if err != nil {
			t.Errorf("dump %v: %v", flags, err)
			continue
		}
		if flags[len(flags)-1] == "-e" {
			if !strings.Contains(out, "link type") {
				t.Errorf("dump -e: no link-level header:\n%s", out)
			}
		} else if out != plain {
			t.Errorf("dump %v differs from plain output:\n%s", flags, out)
		}
	}
	out, err := runDumpCLI(t, "-r", file, "-X", "-c", "1")
	if err != nil || !strings.Contains(out, "\t0x0000:  6000 0000 ") {
		t.Errorf("dump -X: %v\n%s", err, out)
	}
	out, err = runDumpCLI(t, "-r", file, "-A", "-c", "1")
	if err != nil || !strings.Contains(out, "\t0x0000:  `") {
		t.Errorf("dump -A: %v\n%s", err, out)
	}
	// -s 40 keeps the IPv6 header only: the SRH is cut, reported, not a crash.
	out, err = runDumpCLI(t, "-r", file, "-s", "40", "-c", "1")
	if err != nil || out == plain || out == "" {
		t.Errorf("dump -s 40: %v\n%s", err, out)
	}
}
