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
	"syscall"
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

// liveIDS is a running live-mode IDS.
type liveIDS struct {
	lines <-chan string // its standard error, line by line
	eve   *bytes.Buffer // read only after stop
	stop  func()
}

// startLive runs the IDS with args in the testbed's NFV namespace and
// waits until it serves.
func startLive(t *testing.T, tp *svctest.Topo, args ...string) *liveIDS {
	t.Helper()
	args = append(args, "-netns", tp.NFV, "-dev", tp.NIn)
	l := &liveIDS{eve: &bytes.Buffer{}}
	pr, pw := io.Pipe()
	lines := make(chan string, 64)
	l.lines = lines
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			t.Logf("ids: %s", sc.Text())
			lines <- sc.Text()
		}
		close(lines)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, l.eve, pw); pw.Close() }()
	stopped := false
	l.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("run: exit %d", code)
			}
			_ = srv6svc.Unbind(tp.NFV, "ids")
		}
	}
	t.Cleanup(l.stop)
	l.waitLine(t, "queue(s)")
	return l
}

// waitLine waits for a standard-error line containing s.
func (l *liveIDS) waitLine(t *testing.T, s string) string {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				t.Fatalf("ids ended before printing %q", s)
			}
			if strings.Contains(line, s) {
				return line
			}
		case <-timeout:
			t.Fatalf("no line with %q", s)
		}
	}
}

// alerts returns "inner-sport sid action args" per EVE line (after stop).
func (l *liveIDS) alerts(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(l.eve.String()), "\n") {
		if line == "" {
			continue
		}
		var a alert
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("EVE %q: %v", line, err)
		}
		args := uint64(0)
		if a.SRv6 != nil {
			args = a.SRv6.Args
		}
		out = append(out, fmt.Sprintf("%d %d %s %#x", a.SrcPort, a.Alert.SignatureID, a.Alert.Action, args))
	}
	return out
}

// forwarded returns the inner source ports of the packets a capture got.
func forwarded(t *testing.T, c *testutil.Capture) []string {
	t.Helper()
	var got []string
	for _, p := range testutil.Tshark(t, c.Wait(5*time.Second), "tcp.srcport", "udp.srcport") {
		got = append(got, p.First("tcp.srcport")+p.First("udp.srcport"))
	}
	return got
}

const liveSetup = `
S = lambda sid: [FINAL, NEXT, sid]
def web(sport, path): return IPv6(src="2001:db8::1", dst="2001:db8::2")/TCP(sport=sport, dport=80, flags="PA")/Raw(b"GET " + path + b" HTTP/1.1\r\n\r\n")
def dns(sport, name): return IP(src="192.0.2.1", dst="198.51.100.53")/UDP(sport=sport, dport=53)/Raw(b"\x12\x34" + name)
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
			args := []string{"-rules", rules, "-ips", "-sid", "fc00:5::f1:0/112"}
			if batch {
				args = append(args, "-batch")
			}
			l := startLive(t, tp, args...)
			c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 5)
			tp.Send(t, liveSetup, `[srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, web(1001, b"/index.html")),
  srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, web(1002, b"/etc/passwd")),
  srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, dns(1003, b"EVIL.example")),
  srv6("fc00:5::f1:bad", S("fc00:5::f1:bad"), 2, dns(1004, b"fine.example")),
  srv6("fc00:5::f1:7", S("fc00:5::f1:7"), 2, web(1005, b"/etc/passwd")),
  srv6("fc00:5::f1:7", S("fc00:5::f1:7"), 2, dns(1006, b"ok.example")),
  srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, web(1007, b"/")),
  srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, dns(1008, b"x"))]`)
			// 1002 and 1005 (/etc/passwd) and 1004 (ARGS 0x0bad) are dropped.
			if diff := cmp.Diff([]string{"1001", "1003", "1006", "1007", "1008"}, forwarded(t, c)); diff != "" {
				t.Errorf("forwarded packets (-want +got):\n%s", diff)
			}
			l.stop()
			want := []string{"1002 1 blocked 0x0", "1003 2 allowed 0x0", "1004 3 blocked 0xbad", "1005 1 blocked 0x7"}
			if diff := cmp.Diff(want, l.alerts(t)); diff != "" {
				t.Errorf("alerts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPrivilegedIDSReload: SIGHUP reloads the rule file; a file with
// errors is refused, every error printed with its line, and the running
// rules stay.
func TestPrivilegedIDSReload(t *testing.T) {
	tp := svctest.New(t, "h17i")
	rules := filepath.Join(t.TempDir(), "live.rules")
	write := func(s string) {
		if err := os.WriteFile(rules, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(liveRules)
	l := startLive(t, tp, "-rules", rules, "-ips", "-sid", "fc00:5::f1:0/112")
	c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 2)
	send := func(sport int) {
		tp.Send(t, liveSetup, fmt.Sprintf(`[srv6("fc00:5::f1:0", S("fc00:5::f1:0"), 2, web(%d, b"/etc/passwd"))]`, sport))
	}
	hup := func() {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	send(2001) // dropped by sid 1
	write(strings.Replace(liveRules, "drop tcp", "alert tcp", 1))
	hup()
	l.waitLine(t, "reloaded 3 rules")
	send(2002) // now only an alert
	write("alert tcp any any -> any 80 (msg:\"ok\"; sid:1;)\nalert tcp any any -> any any (flow:established; sid:2;)\n")
	hup()
	l.waitLine(t, "reload refused, the running 3 rules stay")
	if line := l.waitLine(t, "live.rules:2:"); !strings.Contains(line, `unsupported keyword "flow"`) {
		t.Errorf("reload error = %q", line)
	}
	send(2003) // the running rules: an alert again
	if diff := cmp.Diff([]string{"2002", "2003"}, forwarded(t, c)); diff != "" {
		t.Errorf("forwarded packets (-want +got):\n%s", diff)
	}
	l.stop()
	want := []string{"2001 1 blocked 0x0", "2002 1 allowed 0x0", "2003 1 allowed 0x0"}
	if diff := cmp.Diff(want, l.alerts(t)); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	l.waitLine(t, "3 packets inspected, 1 dropped, 3 alerts")
}
