package proxy_test

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/testutil"
)

// topo is the proxy test network, one namespace per role:
//
//	cl ── edge ── nfv ── eg ── srv
//	               │
//	               sf      (the SR-unaware service function)
//
// cl fc00:c::2 / 10.1.0.2; edge fc00:c::1, fc00:e1::1 (SIDs fc00:1::/64);
// nfv fc00:e1::2, fc00:e2::1, sf0 fc00:5f::1 / 10.95.0.1 (SIDs fc00:2::/64);
// eg fc00:e2::2, fc00:5::1 / 10.5.0.1 (SIDs fc00:4::/64); srv fc00:5::2 /
// 10.5.0.2; sf fc00:5f::2 / 10.95.0.2, default routes via nfv.
type topo struct {
	cl, edge, nfv, eg, srv, sf string
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireTool(t, "tcpdump")
	testutil.RequireTool(t, "tshark")
	tp := &topo{
		cl: testutil.NewNetns(t, "cl"), edge: testutil.NewNetns(t, "ed"), nfv: testutil.NewNetns(t, "nfv"),
		eg: testutil.NewNetns(t, "eg"), srv: testutil.NewNetns(t, "srv"), sf: testutil.NewNetns(t, "sf"),
	}
	// Remove the proxies' pinned state before the namespace goes away.
	t.Cleanup(func() {
		if err := srunaware.Remove(tp.nfv); err != nil {
			t.Errorf("cleanup proxies: %v", err)
		}
	})
	link := func(a, an, b, bn string) {
		testutil.Exec(t, "", "ip", "-n", a, "link", "add", an, "type", "veth", "peer", bn, "netns", b)
		testutil.Exec(t, "", "ip", "-n", a, "link", "set", an, "up")
		testutil.Exec(t, "", "ip", "-n", b, "link", "set", bn, "up")
	}
	link(tp.cl, "e0", tp.edge, "c0")
	link(tp.edge, "n0", tp.nfv, "e0")
	link(tp.nfv, "sf0", tp.sf, "p0")
	link(tp.nfv, "g0", tp.eg, "n0")
	link(tp.eg, "s0", tp.srv, "e0")
	x := func(ns string, cmds ...string) {
		for _, c := range cmds {
			testutil.Exec(t, ns, strings.Fields(c)...)
		}
	}
	for _, ns := range []string{tp.edge, tp.nfv, tp.eg, tp.sf} {
		x(ns, "sysctl -qw net.ipv6.conf.all.forwarding=1", "sysctl -qw net.ipv4.ip_forward=1",
			"sysctl -qw net.ipv6.conf.all.seg6_enabled=1", "sysctl -qw net.ipv4.conf.all.rp_filter=0")
	}
	x(tp.cl, "ip addr add fc00:c::2/64 dev e0 nodad", "ip addr add 10.1.0.2/24 dev e0",
		"ip -6 route add default via fc00:c::1", "ip route add default via 10.1.0.1")
	x(tp.edge, "ip addr add fc00:c::1/64 dev c0 nodad", "ip addr add 10.1.0.1/24 dev c0",
		"ip addr add fc00:e1::1/64 dev n0 nodad", "ip -6 route add default via fc00:e1::2",
		"sysctl -qw net.ipv6.conf.n0.seg6_enabled=1", "ip sr tunsrc set fc00:1::1",
		// The way back: End.DX6/DX4 towards the client.
		"ip -6 route add fc00:1::d6/128 encap seg6local action End.DX6 nh6 fc00:c::2 dev c0",
		"ip -6 route add fc00:1::d4/128 encap seg6local action End.DX4 nh4 10.1.0.2 dev c0")
	x(tp.nfv, "ip addr add fc00:e1::2/64 dev e0 nodad", "ip addr add fc00:e2::1/64 dev g0 nodad",
		"ip addr add fc00:5f::1/64 dev sf0 nodad", "ip addr add 10.95.0.1/24 dev sf0",
		"ip -6 route add fc00:1::/64 via fc00:e1::1", "ip -6 route add fc00:c::/64 via fc00:e1::1",
		"ip -6 route add fc00:4::/64 via fc00:e2::2", "ip -6 route add fc00:5::/64 via fc00:e2::2",
		"ip -6 route add fc00:80::/64 via fc00:5f::2")
	x(tp.eg, "ip addr add fc00:e2::2/64 dev n0 nodad", "ip addr add fc00:5::1/64 dev s0 nodad",
		"ip addr add 10.5.0.1/24 dev s0", "ip -6 route add default via fc00:e2::1",
		"sysctl -qw net.ipv6.conf.n0.seg6_enabled=1",
		"ip -6 route add fc00:4::d6/128 encap seg6local action End.DX6 nh6 fc00:5::2 dev s0",
		"ip -6 route add fc00:4::d4/128 encap seg6local action End.DX4 nh4 10.5.0.2 dev s0")
	x(tp.srv, "ip addr add fc00:5::2/64 dev e0 nodad", "ip addr add 10.5.0.2/24 dev e0",
		"ip -6 route add default via fc00:5::1", "ip route add default via 10.5.0.1")
	x(tp.sf, "ip addr add fc00:5f::2/64 dev p0 nodad", "ip addr add 10.95.0.2/24 dev p0",
		"ip -6 route add default via fc00:5f::1", "ip route add default via 10.95.0.1",
		// veth offloads would hand the proxy 64 KB TSO frames; an SF on a
		// real NIC segments before the wire.
		"ethtool -K p0 tso off gso off gro off")
	tp.diag(t)
	return tp
}

// diag logs the interface counters and routes of every namespace when the
// test failed.
func (tp *topo) diag(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, ns := range []string{tp.cl, tp.edge, tp.nfv, tp.sf, tp.eg, tp.srv} {
			out, _ := testutil.ExecErr(ns, "sh", "-c", "ip -s -br link; ip -6 route; ip -6 neigh; nstat -az | grep -Ei 'discard|drop|err|noroute|seg6' | grep -v ' 0 '")
			t.Logf("--- %s\n%s", ns, out)
		}
	})
}

// capture is a testutil.Capture (ready when started, drained when
// stopped) read back with tshark's fields.
type capture struct {
	t *testing.T
	*testutil.Capture
}

// startCapture captures packets received on dev (tcpdump -Q in).
func startCapture(t *testing.T, ns, dev, filter string) *capture {
	t.Helper()
	return &capture{t, testutil.StartInboundCapture(t, ns, dev, filter, 0)}
}

// startCaptureAll captures both directions on dev.
func startCaptureAll(t *testing.T, ns, dev, filter string) *capture {
	t.Helper()
	return &capture{t, testutil.StartCapture(t, ns, dev, filter, 0)}
}

// fields stops the capture and returns tshark's fields of every packet
// matching the display filter, one line per packet.
func (c *capture) fields(filter string, fields ...string) []string {
	c.t.Helper()
	// Let in-flight packets land: wait until the capture has packets and
	// has not grown for 1 s, for at most 5 s (the first packets of a fresh
	// path may wait for neighbour resolution, and ND/MLD chatter also
	// counts; this is a settle time, not an assertion). Stopping drains
	// what the kernel delivered, so a reader that got no CPU loses nothing.
	last, still := -1, 0
	for i := 0; i < 50 && still < 10; i++ {
		time.Sleep(100 * time.Millisecond)
		if n := c.Count(); n == last && n > 0 {
			still++
		} else {
			still = 0
			last = n
		}
	}
	file := c.Wait(0)
	args := []string{"-r", file, "-T", "fields", "-E", "separator=|"}
	if filter != "" {
		args = append(args, "-Y", filter)
	}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command("tshark", args...).Output() // stderr: root warning
	if err != nil {
		c.t.Fatalf("tshark %v: %v\n%s", args, err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// scapy runs a scapy snippet in a namespace.
func scapy(t *testing.T, ns, code string) {
	t.Helper()
	testutil.Exec(t, ns, testutil.Python(), "-c", testutil.ScapyImport+"conf.verb=0\n"+code)
}

// bg starts a long-running process in a namespace, stopped at cleanup.
func bg(t *testing.T, ns string, args ...string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := os.CreateTemp(t.TempDir(), "bg-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	})
}
