package native

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/testutil"
)

// segchainBin is the binary under test, built once by TestMain (or taken
// from $SEGCHAIN_BIN).
var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

// requireNative gates every test of this package.
func requireNative(t *testing.T) {
	t.Helper()
	testutil.RequirePrivileged(t)
	testutil.RequireTool(t, "tcpdump")
	testutil.RequireTool(t, "tshark")
	testutil.RequireScapy(t)
	if segchainBin == "" {
		t.Skip("segchain binary not built")
	}
}

// sid runs `segchain sid ARGS...`, inside ns with `ip netns exec` when
// viaExec, else with --netns, and returns its combined output and error.
func sid(ns string, viaExec bool, args ...string) (string, error) {
	var cmd *exec.Cmd
	if viaExec {
		cmd = exec.Command("ip", append([]string{"netns", "exec", ns, segchainBin, "sid"}, args...)...)
	} else {
		cmd = exec.Command(segchainBin, append([]string{"sid", "--netns", ns}, args...)...)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustSid(t *testing.T, ns string, viaExec bool, args ...string) string {
	t.Helper()
	out, err := sid(ns, viaExec, args...)
	if err != nil {
		t.Fatalf("segchain sid %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// showJSON returns `segchain sid show [SID] -o json`.
func showJSON(t *testing.T, ns string, sidArg ...string) []localsid.Entry {
	t.Helper()
	out := mustSid(t, ns, false, append(append([]string{"show"}, sidArg...), "-o", "json")...)
	var es []localsid.Entry
	if err := json.Unmarshal([]byte(out), &es); err != nil {
		t.Fatalf("sid show -o json: %v\n%s", err, out)
	}
	return es
}

var ipCounters = regexp.MustCompile(`packets (\d+) bytes (\d+) errors (\d+)`)

// ipRouteCounters reads a SID's counters with iproute2 (`ip -s -6 route
// show`), the oracle for what segchain's own decoder reports.
func ipRouteCounters(t *testing.T, ns, sidPrefix string) (pkts, bytes, errs uint64) {
	t.Helper()
	out := testutil.Exec(t, "", "ip", "-n", ns, "-s", "-6", "route", "show", "table", "all", sidPrefix) // a SID without dev is a local route
	m := ipCounters.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no counters in `ip -s -6 route show %s`: %q", sidPrefix, out)
	}
	p, _ := strconv.ParseUint(m[1], 10, 64)
	b, _ := strconv.ParseUint(m[2], 10, 64)
	e, _ := strconv.ParseUint(m[3], 10, 64)
	return p, b, e
}

// scapyServer is a python3+scapy process living in one namespace: scapy is
// imported once, then each request line (JSON: pkt expression, count, MACs,
// interface) is evaluated, sent with sendp and answered with the L3 length
// of one packet.
const scapyServer = `
import json, sys
` + testutil.ScapyImport + `
conf.verb = 0
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    try:
        p = eval(req["pkt"])
        sendp([Ether(src=req["src"], dst=req["dst"])/p] * req["n"], iface=req["iface"])
        print(len(raw(p)), flush=True)
    except Exception as e:
        print("error " + repr(e).replace("\n", " "), flush=True)
`

type scapySender struct {
	ns   string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	errb *strings.Builder
}

func startScapy(t *testing.T, ns string) *scapySender {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, testutil.Python(), "-u", "-c", scapyServer)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &scapySender{ns: ns, cmd: cmd, in: in, out: bufio.NewScanner(outp), errb: &strings.Builder{}}
	cmd.Stderr = s.errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start scapy in %s: %v", ns, err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	if !s.out.Scan() || s.out.Text() != "ready" {
		t.Fatalf("scapy in %s did not start: %q %s", ns, s.out.Text(), s.errb.String())
	}
	return s
}

// send sends n copies of the scapy expression pkt (an L3 packet) from iface
// framed with the given MACs and returns the L3 length of one packet.
func (s *scapySender) send(t *testing.T, iface, srcMAC, dstMAC, pkt string, n int) int {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"pkt": pkt, "n": n, "src": srcMAC, "dst": dstMAC, "iface": iface})
	if _, err := fmt.Fprintf(s.in, "%s\n", req); err != nil {
		t.Fatalf("scapy: %v", err)
	}
	if !s.out.Scan() {
		t.Fatalf("scapy in %s died: %s", s.ns, s.errb.String())
	}
	l, err := strconv.Atoi(s.out.Text())
	if err != nil {
		t.Fatalf("scapy send %s: %s", pkt, s.out.Text())
	}
	return l
}

func linkMAC(t *testing.T, ns, dev string) string {
	t.Helper()
	out := testutil.Exec(t, "", "ip", "-n", ns, "-j", "link", "show", dev)
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link show %s: %v %q", dev, err, out)
	}
	return links[0].Address
}

// topo is src — sut — dst: src sends crafted packets to the SUT, whose
// behaviours forward them to dst, where they are captured.
//
//	src vs0 fc00:12::1 10.0.12.1 — us0 fc00:12::2 10.0.12.2  SUT  ud0 fc00:23::2 10.0.23.2 — vd0 fc00:23::3 10.0.23.3 dst
type topo struct {
	src, sut, dst                       string
	srcMAC, sutInMAC, sutOutMAC, dstMAC string
	scapy                               *scapySender
}

const (
	srcIf, sutIn, sutOut, dstIf = "vs0", "us0", "ud0", "vd0"
	dstAddr6                    = "fc00:23::3"
	dstAddr4                    = "10.0.23.3"
	sutOutAddr6                 = "fc00:23::2"
	altTable                    = "100" // holds fc00:98::/64 via dst; main does not
)

func newTopo(t *testing.T) *topo {
	t.Helper()
	tp := &topo{
		src: testutil.NewNetns(t, "src"),
		sut: testutil.NewNetns(t, "sut"),
		dst: testutil.NewNetns(t, "dst"),
	}
	ex := func(args ...string) { testutil.Exec(t, "", args...) }
	ex("ip", "link", "add", srcIf, "netns", tp.src, "type", "veth", "peer", "name", sutIn, "netns", tp.sut)
	ex("ip", "link", "add", sutOut, "netns", tp.sut, "type", "veth", "peer", "name", dstIf, "netns", tp.dst)
	for _, l := range []struct{ ns, dev, a6, a4 string }{
		{tp.src, srcIf, "fc00:12::1/64", "10.0.12.1/24"},
		{tp.sut, sutIn, "fc00:12::2/64", "10.0.12.2/24"},
		{tp.sut, sutOut, sutOutAddr6 + "/64", "10.0.23.2/24"},
		{tp.dst, dstIf, dstAddr6 + "/64", dstAddr4 + "/24"},
	} {
		ex("ip", "-n", l.ns, "addr", "add", l.a6, "dev", l.dev, "nodad")
		ex("ip", "-n", l.ns, "addr", "add", l.a4, "dev", l.dev)
		ex("ip", "-n", l.ns, "link", "set", l.dev, "up")
	}
	testutil.Exec(t, tp.sut, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", "net.ipv4.ip_forward=1")
	tp.srcMAC = linkMAC(t, tp.src, srcIf)
	tp.sutInMAC = linkMAC(t, tp.sut, sutIn)
	tp.sutOutMAC = linkMAC(t, tp.sut, sutOut)
	tp.dstMAC = linkMAC(t, tp.dst, dstIf)
	// Permanent neighbours: nothing depends on ND/ARP timing.
	ex("ip", "-n", tp.sut, "neigh", "replace", dstAddr6, "lladdr", tp.dstMAC, "dev", sutOut, "nud", "permanent")
	ex("ip", "-n", tp.sut, "neigh", "replace", dstAddr4, "lladdr", tp.dstMAC, "dev", sutOut, "nud", "permanent")
	ex("ip", "-n", tp.sut, "-6", "route", "add", "fc00:98::/64", "via", dstAddr6, "dev", sutOut, "table", altTable)
	tp.scapy = startScapy(t, tp.src)
	return tp
}

// send sends n packets from src to the SUT's ingress interface.
func (tp *topo) send(t *testing.T, pkt string, n int) int {
	t.Helper()
	return tp.scapy.send(t, srcIf, tp.srcMAC, tp.sutInMAC, pkt, n)
}

// capture starts a capture of n packets received by dst matching filter.
func (tp *topo) capture(t *testing.T, filter string, n int) *testutil.Capture {
	t.Helper()
	return testutil.StartInboundCapture(t, tp.dst, dstIf, filter, n)
}

// captureWait bounds how long a capture may wait for its packets; it is
// not a performance assertion.
const captureWait = 5 * time.Second

// tsharkFields are the fields every check may look at.
var tsharkFields = []string{
	"eth.src", "eth.dst", "ipv6.src", "ipv6.dst", "ipv6.hlim", "ipv6.nxt",
	"ipv6.routing.nxt", "ipv6.routing.type", "ipv6.routing.segleft", "ipv6.routing.srh.last_entry",
	"ipv6.routing.srh.addr", "ip.src", "ip.dst", "ip.ttl", "udp.srcport", "udp.dstport", "data.data",
}

func hexPayload(s string) string {
	return fmt.Sprintf("%x", s)
}

func prefix128(a string) string { return netip.PrefixFrom(netip.MustParseAddr(a), 128).String() }
