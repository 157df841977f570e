package main

import (
	"bufio"
	"bytes"
	"compress/flate"
	"context"
	"encoding/hex"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/pkg/srv6svc"
)

func start(t *testing.T, tp *svctest.Topo, args ...string) {
	t.Helper()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--netns", tp.NFV, "--dev", tp.NIn}, args...), pw)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		_ = srv6svc.Unbind(tp.NFV, "compress")
	})
	if _, err := bufio.NewReader(pr).ReadString('\n'); err != nil {
		t.Fatalf("compress did not start: %v", err)
	}
	go io.Copy(io.Discard, pr)
}

// dissect reads the sink's packets with tshark, checksums validated.
func dissect(t *testing.T, pcap string) []map[string]string {
	return svctest.TsharkChecked(t, pcap, "udp.srcport", "tcp.srcport", "ipv6.plen", "ip.len", "udp.length",
		"udp.checksum.status", "ip.checksum.status", "udp.payload", "_ws.expert")
}

const craft = `
import zlib
def deflate(b):
    c = zlib.compressobj(1, zlib.DEFLATED, -15)
    return c.compress(b) + c.flush()
S = [FINAL, NEXT, "fc00:5::300"]
P6 = b"hello segment routing " * 30
P4 = b"abc" * 300
def u6(p): return IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=1006, dport=9999)/Raw(p)
def u4(p): return IP(src="192.0.2.1", dst="198.51.100.1")/UDP(sport=1004, dport=9999)/Raw(p)
def t4(): return IP(src="192.0.2.1", dst="198.51.100.1")/TCP(sport=1080, dport=80)/Raw(b"tcp stays" * 10)
`

func TestPrivilegedCompress(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	tp := svctest.New(t, "h17z")
	start(t, tp, "--sid", "fc00:5::300")
	c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 3)
	tp.Send(t, craft, `[srv6("fc00:5::300", S, 2, u6(P6)), srv6("fc00:5::300", S, 2, u4(P4)), srv6("fc00:5::300", S, 2, t4())]`)
	rows := dissect(t, c.Wait(5*time.Second))
	if len(rows) != 3 {
		t.Fatalf("sink got %d packets, want 3", len(rows))
	}
	want := map[string][]byte{"1006": bytes.Repeat([]byte("hello segment routing "), 30), "1004": bytes.Repeat([]byte("abc"), 300)}
	for _, r := range rows {
		if r["tcp.srcport"] == "1080" {
			if r["ip.len"] != "130" || r["ip.checksum.status"] != "1" {
				t.Errorf("TCP packet changed: %v", r)
			}
			continue
		}
		orig, ok := want[r["udp.srcport"]]
		if !ok {
			t.Errorf("unexpected packet %v", r)
			continue
		}
		if r["udp.checksum.status"] != "1" || (r["udp.srcport"] == "1004" && r["ip.checksum.status"] != "1") || r["_ws.expert"] != "" {
			t.Errorf("sport %s: bad checksum or an expert warning: %v", r["udp.srcport"], r)
		}
		comp, _ := hex.DecodeString(strings.ReplaceAll(r["udp.payload"], ":", ""))
		if len(comp) >= len(orig) {
			t.Errorf("sport %s: payload %d bytes, not compressed from %d", r["udp.srcport"], len(comp), len(orig))
		}
		got, err := io.ReadAll(flate.NewReader(bytes.NewReader(comp)))
		if err != nil || !bytes.Equal(got, orig) {
			t.Errorf("sport %s: payload does not inflate to the original: %v", r["udp.srcport"], err)
		}
		if r["udp.length"] != strconv.Itoa(len(comp)+8) {
			t.Errorf("sport %s: udp.length %s for %d payload bytes", r["udp.srcport"], r["udp.length"], len(comp))
		}
	}
}

func TestPrivilegedDecompress(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	tp := svctest.New(t, "h17d")
	start(t, tp, "--sid", "fc00:5::300", "--mode", "decompress")
	c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 2)
	// The third packet's payload is not DEFLATE data: it is dropped.
	tp.Send(t, craft, `[srv6("fc00:5::300", S, 2, u6(deflate(P6))), srv6("fc00:5::300", S, 2, u4(deflate(P4))), srv6("fc00:5::300", S, 2, u6(b"\xff"*40))]`)
	time.Sleep(300 * time.Millisecond)
	rows := dissect(t, c.Wait(5*time.Second))
	if len(rows) != 2 {
		t.Fatalf("sink got %d packets, want 2 (the garbage one dropped)", len(rows))
	}
	for _, r := range rows {
		wantHex := hex.EncodeToString(bytes.Repeat([]byte("hello segment routing "), 30))
		if r["udp.srcport"] == "1004" {
			wantHex = hex.EncodeToString(bytes.Repeat([]byte("abc"), 300))
		}
		if strings.ReplaceAll(r["udp.payload"], ":", "") != wantHex || r["udp.checksum.status"] != "1" || r["_ws.expert"] != "" {
			t.Errorf("sport %s: not restored or bad checksum: %v", r["udp.srcport"], r)
		}
	}
}
