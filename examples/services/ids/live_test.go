//go:build srv6svc

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/pkg/srv6svc"
)

const liveRules = `
drop tcp any any -> any 80 (msg:"passwd"; content:"/etc/passwd"; sid:1;)
alert udp any any -> any 53 (msg:"dns"; content:"evil"; nocase; sid:2;)
drop ip any any -> any any (msg:"flagged by ARGS"; srv6.args:0xbad; sid:3;)
`

// TestPrivilegedIDSLive binds the IDS to fc00:5::f1:0/112 (16 ARGS bits)
// in IPS mode, sends scapy-built SRv6 traffic, and checks that the sink
// gets exactly the packets no drop rule matched (tshark reads the
// capture), and the EVE alerts.
func TestPrivilegedIDSLive(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "sync", true: "batch"}[batch], func(t *testing.T) {
			tp := svctest.New(t, "h17i")
			rules := filepath.Join(t.TempDir(), "live.rules")
			if err := os.WriteFile(rules, []byte(liveRules), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"-rules", rules, "-ips", "-netns", tp.NFV, "-dev", tp.NIn, "-sid", "fc00:5::f1:0/112"}
			if batch {
				args = append(args, "-batch")
			}
			var eve bytes.Buffer
			pr, pw := io.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			go func() { done <- run(ctx, args, &eve, pw); pw.Close() }()
			stopped := false
			stop := func() {
				if !stopped {
					stopped = true
					cancel()
					if code := <-done; code != 0 {
						t.Errorf("run: exit %d", code)
					}
					_ = srv6svc.Unbind(tp.NFV, "ids")
				}
			}
			t.Cleanup(stop)
			line, err := bufio.NewReader(pr).ReadString('\n')
			if err != nil || !strings.Contains(line, "queue(s)") {
				t.Fatalf("ids did not start: %q %v", line, err)
			}
			go io.Copy(io.Discard, pr)

			c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 6)
			tp.Send(t, `
S = lambda sid: [FINAL, NEXT, sid]
def web(sport, path): return IPv6(src="2001:db8::1", dst="2001:db8::2")/TCP(sport=sport, dport=80, flags="PA")/Raw(b"GET " + path + b" HTTP/1.1\r\n\r\n")
def dns(sport, name): return IP(src="192.0.2.1", dst="198.51.100.53")/UDP(sport=sport, dport=53)/Raw(b"\x12\x34" + name)
`, `[srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, web(1001, b"/index.html")),
  srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, web(1002, b"/etc/passwd")),
  srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, dns(1003, b"EVIL.example")),
  srv6("fc00:5::f1:bad", S("fc00:5::f1:bad"), 2, dns(1004, b"fine.example")),
  srv6("fc00:5::f1:7", S("fc00:5::f1:7"), 2, web(1005, b"/etc/passwd")),
  srv6("fc00:5::f1:7", S("fc00:5::f1:7"), 2, dns(1006, b"ok.example")),
  srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, web(1007, b"/")),
  srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, dns(1008, b"x"))]`)
			var got []string
			for _, p := range testutil.Tshark(t, c.Wait(5*time.Second), "tcp.srcport", "udp.srcport", "ipv6.dst") {
				got = append(got, p.First("tcp.srcport")+p.First("udp.srcport"))
			}
			// 1002 and 1005 (/etc/passwd) and 1004 (ARGS 0x0bad) are dropped.
			if diff := cmp.Diff([]string{"1001", "1003", "1006", "1007", "1008"}, got); diff != "" {
				t.Errorf("forwarded packets (-want +got):\n%s", diff)
			}
			stop()
			var alerts []string
			for _, l := range strings.Split(strings.TrimSpace(eve.String()), "\n") {
				var a alert
				if err := json.Unmarshal([]byte(l), &a); err != nil {
					t.Fatalf("EVE %q: %v", l, err)
				}
				args := uint64(0)
				if a.SRv6 != nil {
					args = a.SRv6.Args
				}
				alerts = append(alerts, fmt.Sprintf("%d %d %s %#x", a.SrcPort, a.Alert.SignatureID, a.Alert.Action, args))
			}
			want := []string{"1002 1 blocked 0x0", "1003 2 allowed 0x0", "1004 3 blocked 0xbad", "1005 1 blocked 0x7"}
			if diff := cmp.Diff(want, alerts); diff != "" {
				t.Errorf("alerts (-want +got):\n%s", diff)
			}
		})
	}
}
