package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/testutil"
)

const (
	rulesFile = "rules/example.rules"
	pcapFile  = "testdata/srv6.pcap"
	homeNet   = "HOME_NET=[2001:db8:b::/48,10.0.2.0/24,10.0.9.0/24]"
)

type alert struct {
	SrcPort int `json:"src_port"`
	Alert   struct {
		Action      string `json:"action"`
		SignatureID int    `json:"signature_id"`
	} `json:"alert"`
	SRv6 *struct {
		Segments     []string `json:"segments"`
		SegmentsLeft int      `json:"segments_left"`
		Args         uint64   `json:"args"`
	} `json:"srv6"`
}

func runIDS(t *testing.T, args ...string) (code int, alerts []alert, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if l == "" {
			continue
		}
		var a alert
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatalf("EVE line %q: %v", l, err)
		}
		alerts = append(alerts, a)
	}
	return code, alerts, errb.String()
}

// sidsByPort is "inner source port: sid action" for each alert: the
// source ports in testdata/gen.py name the packets.
func sidsByPort(alerts []alert) []string {
	var s []string
	for _, a := range alerts {
		s = append(s, fmt.Sprintf("%d %d %s", a.SrcPort, a.Alert.SignatureID, a.Alert.Action))
	}
	return s
}

// TestOfflineIDS: every packet of testdata/srv6.pcap fires exactly the
// rules gen.py says, and IDS mode forwards everything.
func TestOfflineIDS(t *testing.T) {
	code, alerts, stderr := runIDS(t, "-rules", rulesFile, "-pcap", pcapFile, "-var", homeNet)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []string{
		"40000 1000001 allowed", // /etc/passwd, IPv6 inner
		"40002 1000002 allowed", // sqlmap: a drop rule only alerts in IDS mode
		"5353 1000003 allowed",  // DNS evil.example, IPv4 inner
		"0 1000004 allowed",     // ICMP
		"40006 1000006 allowed", // ARGS 0x0bad
		"40007 1000007 allowed", // quarantine locator in the segment list
		"40008 1000001 allowed", // plain IPv6, no SRH
	}
	if diff := cmp.Diff(want, sidsByPort(alerts)); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	if a := alerts[4]; a.SRv6 == nil || a.SRv6.Args != 0x0bad || a.SRv6.SegmentsLeft != 1 || a.SRv6.Segments[1] != "fc00:2::f1:bad" {
		t.Errorf("srv6 of the ARGS alert = %+v", a.SRv6)
	}
	if alerts[6].SRv6 != nil {
		t.Errorf("plain packet alert has srv6 %+v", alerts[6].SRv6)
	}
	if !strings.Contains(stderr, "8 rules: 9 packets, 9 forwarded, 0 dropped, 7 alerts") {
		t.Errorf("summary: %s", stderr)
	}
}

// TestOfflineIPS: IPS mode drops exactly the packets a drop rule matches;
// tshark (the oracle) reads the forwarded capture.
func TestOfflineIPS(t *testing.T) {
	out := filepath.Join(t.TempDir(), "forwarded.pcap")
	code, alerts, stderr := runIDS(t, "-rules", rulesFile, "-pcap", pcapFile, "-var", homeNet, "-ips", "-write-pcap", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var blocked []string
	for _, s := range sidsByPort(alerts) {
		if strings.HasSuffix(s, "blocked") {
			blocked = append(blocked, s)
		}
	}
	if diff := cmp.Diff([]string{"40002 1000002 blocked", "40006 1000006 blocked"}, blocked); diff != "" {
		t.Errorf("blocked alerts (-want +got):\n%s", diff)
	}
	var ports []string
	for _, p := range testutil.Tshark(t, out, "tcp.srcport", "udp.srcport", "icmp.type") {
		ports = append(ports, p.First("tcp.srcport")+p.First("udp.srcport")+p.First("icmp.type"))
	}
	// Packets 2 (sqlmap) and 6 (ARGS 0x0bad) are gone; the ICMP echo is type 8.
	want := []string{"40000", "40001", "5353", "8", "40005", "40007", "40008"}
	if diff := cmp.Diff(want, ports); diff != "" {
		t.Errorf("forwarded packets (-want +got):\n%s", diff)
	}
}

// TestRuleErrors: every rule error is reported with its line and column,
// and nothing is inspected.
func TestRuleErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.rules")
	src := "# comment\n" +
		"alert tcp any any -> any any (msg:\"x\"; flow:established; sid:1;)\n" +
		"alert tcp any any -> any any (msg:\"ok\"; sid:2;)\n" +
		"drop tcp $NOPE any -> any any \\\n  (content:\"|zz|\"; sid:3;)\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, alerts, stderr := runIDS(t, "-rules", bad, "-pcap", pcapFile)
	if code != 2 || len(alerts) != 0 {
		t.Errorf("exit %d with %d alerts, want 2 and none", code, len(alerts))
	}
	for _, w := range []string{
		bad + `:2:40: unsupported keyword "flow"`,
		bad + `:4:10: undefined variable $NOPE`,
		bad + `:5:12: content: |zz|: "zz" is not a hex byte`,
		"3 error(s)",
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if code, _, stderr := runIDS(t, "-rules", rulesFile, "-check"); code != 0 || !strings.Contains(stderr, "8 rules OK") {
		t.Errorf("-check on the example rules: exit %d, %s", code, stderr)
	}
	// Synthetic rules fire on nothing in the capture.
	if code, alerts, stderr := runIDS(t, "-synthetic-rules", "1000", "-pcap", pcapFile); code != 0 || len(alerts) != 0 ||
		!strings.Contains(stderr, "1000 rules: 9 packets, 9 forwarded") {
		t.Errorf("-synthetic-rules 1000: exit %d, %d alerts, %s", code, len(alerts), stderr)
	}
	if code, _, _ := runIDS(t, "-synthetic-rules", "10", "-rules", rulesFile, "-pcap", pcapFile); code != 2 {
		t.Errorf("-rules with -synthetic-rules: exit %d, want 2", code)
	}
}

// TestPcapUpToDate regenerates testdata/srv6.pcap with scapy (gen.py) and
// compares it with the committed one.
func TestPcapUpToDate(t *testing.T) {
	testutil.RequireScapy(t)
	dir := t.TempDir()
	gen, err := os.ReadFile("testdata/gen.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gen.py"), gen, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "gen.py")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen.py: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "srv6.pcap"))
	want, _ := os.ReadFile(pcapFile)
	if !bytes.Equal(got, want) {
		t.Errorf("testdata/srv6.pcap differs from what testdata/gen.py writes: run it in testdata/")
	}
}
