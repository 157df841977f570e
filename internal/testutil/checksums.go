package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// checksumFields are tshark's verdicts on every checksum it can verify:
// 1 good, 0 bad, 2 unverified.
var checksumFields = []string{"ip.checksum.status", "udp.checksum.status", "tcp.checksum.status",
	"icmp.checksum.status", "icmpv6.checksum.status"}

// VerifyChecksums has tshark (not segchain's checksum code) verify the
// checksums of frames (Ethernet frames a program produced, e.g.
// BPF_PROG_TEST_RUN's output, whose checksums are complete: no offload)
// that fields name (tshark's *.checksum.status; default: IPv4, UDP, TCP,
// ICMP and ICMPv6): each one present must be verified good, bad or
// unverified fails the test, naming the frame (names[i]). At least one
// checksum must have been verified.
func VerifyChecksums(t testing.TB, frames [][]byte, names []string, fields ...string) {
	t.Helper()
	if len(frames) == 0 {
		return
	}
	if len(fields) == 0 {
		fields = checksumFields
	}
	RequireTool(t, "tshark")
	path := writePcap(t, frames...)
	args := []string{"-r", path, "-n", "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
		"-o", "tcp.check_checksum:TRUE", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|", "-E", "separator=/t"}
	for _, fl := range fields {
		args = append(args, "-e", fl)
	}
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	checked := 0
	for i, line := range lines {
		name := ""
		if i < len(names) {
			name = names[i]
		}
		for j, col := range strings.Split(line, "\t") {
			for _, st := range strings.Split(col, "|") {
				if st == "" {
					continue
				}
				checked++
				if st != "1" {
					t.Errorf("frame %d %s: tshark %s = %s (0 bad, 2 unverified, 3 none, 4 illegal; want 1 good)", i+1, name, fields[j], st)
				}
			}
		}
	}
	if checked == 0 {
		t.Errorf("tshark found none of %v to verify in %d frames", fields, len(frames))
	}
}

// writePcap writes Ethernet frames to a pcap file in the test's temporary
// directory and returns its path.
func writePcap(t testing.TB, frames ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "frames.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, fr := range frames {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(fr), Length: len(fr)}
		if err := w.WritePacket(ci, fr); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
