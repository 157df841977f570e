package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// TestPrivilegedCounter sends three inner flows through the counter and
// scrapes /metrics: every flow has its exact packet and byte counts, and
// every packet went on to its next segment.
func TestPrivilegedCounter(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "sync", true: "batch"}[batch], func(t *testing.T) {
			tp := svctest.New(t, "h17c")
			args := []string{"--netns", tp.NFV, "--dev", tp.NIn, "--sid", "fc00:5::100", "--metrics", "127.0.0.1:0"}
			if batch {
				args = append(args, "--batch")
			}
			pr, pw := io.Pipe()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- run(ctx, args, pw); pw.Close() }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("run: %v", err)
				}
				_ = srv6svc.Unbind(tp.NFV, "counter")
			})
			line, err := bufio.NewReader(pr).ReadString('\n')
			if err != nil {
				t.Fatalf("counter did not start: %v", err)
			}
			go io.Copy(io.Discard, pr)
			addr := strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])

			c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 10)
			tp.Send(t, `
def a(): return IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=1111, dport=53)/Raw(b"a"*10)
def b(): return IP(src="192.0.2.1", dst="198.51.100.7")/TCP(sport=2222, dport=80, flags="S")
def c(): return IPv6(src="2001:db8::3", dst="2001:db8::2")/ICMPv6EchoRequest()
S = [FINAL, NEXT, "fc00:5::100"]
`, `[srv6("fc00:5::100", S, 2, a()) for _ in range(5)] + [srv6("fc00:5::100", S, 2, b()) for _ in range(3)] + [srv6("fc00:5::100", S, 2, c()) for _ in range(2)]`)
			if n := len(testutil.Tshark(t, c.Wait(5*time.Second), "ipv6.dst")); n != 10 {
				t.Errorf("sink got %d packets, want 10", n)
			}
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := string(body)
			for _, want := range []string{
				`segchain_service_flow_packets_total{dport="53",dst="2001:db8::2",proto="17",sid="fc00:5::100",sport="1111",src="2001:db8::1"} 5`,
				`segchain_service_flow_bytes_total{dport="53",dst="2001:db8::2",proto="17",sid="fc00:5::100",sport="1111",src="2001:db8::1"} 290`,
				`segchain_service_flow_packets_total{dport="80",dst="198.51.100.7",proto="6",sid="fc00:5::100",sport="2222",src="192.0.2.1"} 3`,
				`segchain_service_flow_packets_total{dport="0",dst="2001:db8::2",proto="58",sid="fc00:5::100",sport="0",src="2001:db8::3"} 2`,
				`segchain_service_flows 3`,
				`segchain_service_packets_total{event="tx"} 10`,
			} {
				if !strings.Contains(m, want+"\n") {
					t.Errorf("metrics lack %s\n%s", want, m)
				}
			}
		})
	}
}
