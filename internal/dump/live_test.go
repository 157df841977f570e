package dump

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
)

// TestLiveCapture captures with AF_PACKET inside a fresh namespace: a veth
// pair is created there, scapy sends SRv6 and other frames on one end and
// dump reads the other with a kernel BPF filter and a user-space filter.
func TestLiveCapture(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tcpdump")
	ns := testutil.NewNetns(t, "dump")
	testutil.Exec(t, ns, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb")
	testutil.Exec(t, ns, "ip", "link", "set", "va", "up")
	testutil.Exec(t, ns, "ip", "link", "set", "vb", "up")

	link, err := LiveLinkType(ns, "vb")
	if err != nil {
		t.Fatal(err)
	}
	if link != LinkEthernet {
		t.Fatalf("veth link type %d, want ethernet", link)
	}
	prog, err := CompileFilter("ip6 dst net fc00::/16", link)
	if err != nil {
		t.Fatal(err)
	}
	src, err := OpenLive(ns, "vb", prog)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	f := NewFilter()
	f.SegLeft = 1
	var out, pcap bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound, not an assertion
	defer cancel()
	type result struct {
		st  Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := Run(ctx, Config{Source: src, Printer: Printer{Format: FormatLine}, Filter: f, Out: &out, PcapOut: &pcap, Count: 2})
		done <- result{st, err}
	}()

	testutil.RunScapyIn(t, ns, `
S, P0, P1, P2 = "fd00::1", "fc00:1::100", "fc00:2::200", "fc00:3::300"
E = Ether(src="02:00:00:00:00:aa", dst="ff:ff:ff:ff:ff:ff")
inner = IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=1234, dport=53)/b"live"
pk = [
  E/ARP(),                                                   # dropped by the kernel filter
  E/IPv6(src=S, dst="2001:db8::9")/UDP(),                    # dropped by the kernel filter
  E/IPv6(src=S, dst=P1)/IPv6ExtHdrSegmentRouting(nh=41, addresses=[P2, P1, P0], segleft=1, tag=11)/inner,
  E/IPv6(src=S, dst=P0)/IPv6ExtHdrSegmentRouting(nh=41, addresses=[P1, P0], segleft=0)/inner,  # user filter: segleft 0
  E/IPv6(src=S, dst=P0)/IPv6ExtHdrSegmentRouting(nh=41, addresses=[P1, P0], segleft=1, tag=12)/inner,
]
sendp(pk, iface="va", verbose=False)
`)
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("capture did not see 2 matching packets")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || res.st.Matched != 2 {
		t.Fatalf("matched %d, printed:\n%s", res.st.Matched, out.String())
	}
	for i, want := range []string{
		"fd00::1 > fc00:2::200 srh sl 1 le 2 tag 11 [fc00:1::100, fc00:2::200*, fc00:3::300] | ipv6 2001:db8::1.1234 > 2001:db8::2.53 udp len 4 cksum ok",
		"fd00::1 > fc00:1::100 srh sl 1 le 1 tag 12 [fc00:1::100*, fc00:2::200] | ipv6 2001:db8::1.1234 > 2001:db8::2.53 udp len 4 cksum ok",
	} {
		if _, rest, _ := strings.Cut(lines[i], " "); rest != want {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, rest, want)
		}
	}
	if res.st.Seen != 3 {
		t.Errorf("saw %d frames after the kernel filter, want 3 (ARP and non-fc00 IPv6 dropped)", res.st.Seen)
	}
	// The -w output is a readable pcap holding exactly the matches.
	file := filepath.Join(t.TempDir(), "live.pcap")
	if err := os.WriteFile(file, pcap.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	again := runFile(t, file, Printer{Format: FormatLine}, NewFilter())
	if strings.Count(again, "\n") != 2 || !strings.Contains(again, "tag 12") {
		t.Errorf("re-read of the written pcap:\n%s", again)
	}
}
