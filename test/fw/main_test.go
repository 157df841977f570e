package fw_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/testutil"
)

// segchainBin is the binary under test, built once by TestMain (or taken
// from $SEGCHAIN_BIN).
var segchainBin string

func TestMain(m *testing.M) {
	os.Exit(testutil.MainWithBinary(m, &segchainBin))
}

// requireFW gates every test of this package: root, tools, the binary.
func requireFW(t *testing.T) {
	t.Helper()
	testutil.RequirePrivileged(t)
	testutil.RequireTool(t, "tcpdump")
	testutil.RequireTool(t, "tshark")
	testutil.RequireScapy(t)
	if segchainBin == "" {
		t.Skip("segchain binary not built")
	}
}

// Addresses of the test network.
const (
	sender  = "fc00:10::2"
	fwSID   = "fc00:2::f1:0/112" // 16 ARGS bits
	idsSID  = "fc00:3::1"
	egSID   = "fc00:4::d6"
	finalDA = "fc00:d1::1"
)

// topo is the firewall test network, one namespace per role:
//
//	in ── fw ── ids
//	       \     │
//	        ──── eg
//
// in fc00:10::2 sends; fw fc00:10::1, fc00:13::1 (to ids), fc00:14::1 (to
// eg) runs the firewall SID fc00:2::f1:0/112; ids fc00:13::2, fc00:34::3
// has the native End SID fc00:3::1 and forwards to eg; eg fc00:14::2 (dev
// f0, from fw) and fc00:34::4 (dev d0, from ids) only receives: the
// egress SID fc00:4::d6 and the final destination fc00:d1::/64 are routed
// there and captured.
type topo struct {
	in, fw, ids, eg string
}

func newTopo(t *testing.T) *topo {
	t.Helper()
	requireFW(t)
	return newNetwork(t)
}

// newNetwork builds the namespaces, links and routes of topo.
func newNetwork(t *testing.T) *topo {
	t.Helper()
	tp := &topo{in: testutil.NewNetns(t, "in"), fw: testutil.NewNetns(t, "fw"), ids: testutil.NewNetns(t, "ids"), eg: testutil.NewNetns(t, "eg")}
	link := func(a, an, b, bn string) {
		testutil.Exec(t, "", "ip", "-n", a, "link", "add", an, "type", "veth", "peer", bn, "netns", b)
		testutil.Exec(t, "", "ip", "-n", a, "link", "set", an, "up")
		testutil.Exec(t, "", "ip", "-n", b, "link", "set", bn, "up")
	}
	link(tp.in, "f0", tp.fw, "i0")
	link(tp.fw, "d0", tp.ids, "f0")
	link(tp.fw, "g0", tp.eg, "f0")
	link(tp.ids, "g0", tp.eg, "d0")
	x := func(ns string, cmds ...string) {
		for _, c := range cmds {
			testutil.Exec(t, ns, strings.Fields(c)...)
		}
	}
	for _, ns := range []string{tp.fw, tp.ids} {
		x(ns, "sysctl -qw net.ipv6.conf.all.forwarding=1", "sysctl -qw net.ipv6.conf.all.seg6_enabled=1")
	}
	x(tp.fw, "sysctl -qw net.ipv6.conf.i0.seg6_enabled=1")
	x(tp.ids, "sysctl -qw net.ipv6.conf.f0.seg6_enabled=1")
	x(tp.in, "ip addr add fc00:10::2/64 dev f0 nodad", "ip -6 route add default via fc00:10::1")
	x(tp.fw, "ip addr add fc00:10::1/64 dev i0 nodad", "ip addr add fc00:13::1/64 dev d0 nodad", "ip addr add fc00:14::1/64 dev g0 nodad",
		"ip -6 route add fc00:3::/64 via fc00:13::2", "ip -6 route add fc00:4::/64 via fc00:14::2", "ip -6 route add fc00:d1::/64 via fc00:14::2")
	x(tp.ids, "ip addr add fc00:13::2/64 dev f0 nodad", "ip addr add fc00:34::3/64 dev g0 nodad",
		"ip -6 route add fc00:4::/64 via fc00:34::4", "ip -6 route add fc00:d1::/64 via fc00:34::4", "ip -6 route add default via fc00:13::1",
		"ip -6 route add "+idsSID+"/128 encap seg6local action End dev f0")
	x(tp.eg, "ip addr add fc00:14::2/64 dev f0 nodad", "ip addr add fc00:34::4/64 dev d0 nodad", "ip -6 route add default via fc00:14::1")
	t.Cleanup(func() {
		if t.Failed() {
			for _, ns := range []string{tp.in, tp.fw, tp.ids, tp.eg} {
				out, _ := testutil.ExecErr(ns, "sh", "-c", "ip -s -br link; ip -6 route; nstat -az | grep -Ei 'discard|drop|err|noroute|seg6' | grep -v ' 0 '")
				t.Logf("--- %s\n%s", ns, out)
			}
			out, _ := segchain(tp.fw, "fw", "list", fwSID)
			t.Logf("--- fw list\n%s", out)
		}
		// The firewall's pinned state goes with the SID.
		_, _ = segchain(tp.fw, "sid", "del", fwSID)
	})
	return tp
}

// segchain runs the binary with --netns ns and returns its combined
// output. --netns is a persistent flag of sid (`sid --netns NS add ...`)
// and a flag of each fw subcommand that goes before the SID (`fw add
// --netns NS SID RULE...`).
func segchain(ns, verb string, args ...string) (string, error) {
	full := append([]string{verb, "--netns", ns}, args...)
	if verb == "fw" && len(args) > 0 {
		full = append([]string{verb, args[0], "--netns", ns}, args[1:]...)
	}
	out, err := exec.Command(segchainBin, full...).CombinedOutput()
	return string(out), err
}

// segchainStdin is segchain with stdin.
func segchainStdin(stdin, ns, verb string, args ...string) (string, error) {
	full := append([]string{verb, args[0], "--netns", ns}, args[1:]...)
	cmd := exec.Command(segchainBin, full...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must is segchain failing the test on error.
func must(t *testing.T, ns, verb string, args ...string) string {
	t.Helper()
	out, err := segchain(ns, verb, args...)
	if err != nil {
		t.Fatalf("segchain %s --netns %s %s: %v\n%s", verb, ns, strings.Join(args, " "), err, out)
	}
	return out
}

// installFW adds the firewall SID on the fw node with a policy and rules
// (each rule a line of ip6tables syntax, passed as separate words).
func (tp *topo) installFW(t *testing.T, policy string, rules ...string) {
	t.Helper()
	must(t, tp.fw, "sid", "add", fwSID, "End.AN.FW", "args", "16")
	must(t, tp.fw, "fw", "policy", fwSID, policy)
	for _, r := range rules {
		tp.addRule(t, r)
	}
}

func (tp *topo) addRule(t *testing.T, rule string) {
	t.Helper()
	must(t, tp.fw, "fw", append([]string{"add", fwSID}, words(t, rule)...)...)
}

func words(t *testing.T, rule string) []string {
	t.Helper()
	w, err := splitWords(rule)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// arrival is one captured packet carrying a test marker.
type arrival struct {
	Where  string `json:"where"` // ids, eg-direct (from fw), eg-via-ids, in (back at the sender)
	Marker string `json:"marker"`
	DA     string `json:"da"`
	SL     int    `json:"sl"` // -1: no SRH
	ICMP   int    `json:"icmp,omitempty"`
}

// captures are the inbound captures of one exchange: at ids (from fw), at
// eg from fw (f0) and from ids (d0), and back at the sender.
type captures struct {
	t                        *testing.T
	ids, egDirect, egVia, in *testutil.Capture
	files                    map[string]string // pcap by place, once collected
}

func (tp *topo) capture(t *testing.T) *captures {
	t.Helper()
	// Only SRv6 packets and ICMPv6 errors (types 1-4): no ND/MLD chatter.
	const srv6 = "ip6 proto 43"
	return &captures{t: t,
		ids:      testutil.StartInboundCapture(t, tp.ids, "f0", srv6, 0),
		egDirect: testutil.StartInboundCapture(t, tp.eg, "f0", srv6, 0),
		egVia:    testutil.StartInboundCapture(t, tp.eg, "d0", srv6, 0),
		in:       testutil.StartInboundCapture(t, tp.in, "f0", "icmp6 and ip6[40] < 5", 0),
	}
}

// collect waits for in-flight packets, stops the captures and returns the
// marked packets by marker.
func (c *captures) collect() map[string][]arrival {
	c.t.Helper()
	// The captures run unbounded (count 0), written packet by packet (-U
	// --immediate-mode): settle, then stop them all at once.
	time.Sleep(1500 * time.Millisecond)
	const now = time.Millisecond
	files := map[string]string{
		"ids": c.ids.Wait(now), "eg-direct": c.egDirect.Wait(now),
		"eg-via-ids": c.egVia.Wait(now), "in": c.in.Wait(now),
	}
	c.files = files
	var b strings.Builder
	b.WriteString("out = []\n")
	names := make([]string, 0, len(files))
	for k := range files {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "for p in rdpcap(%q):\n    out += describe(%q, p)\n", files[k], k)
	}
	b.WriteString("print(json.dumps(out))\n")
	raw := testutil.RunScapy(c.t, describePy+b.String())
	var as []arrival
	if err := json.Unmarshal(raw, &as); err != nil {
		c.t.Fatalf("decode captures: %v\n%s", err, raw)
	}
	res := map[string][]arrival{}
	for _, a := range as {
		res[a.Marker] = append(res[a.Marker], a)
	}
	return res
}

// describePy finds the fwt- marker in a captured packet and reports the
// outer DA and SL (scapy's dissection is the oracle).
const describePy = `
import re
def describe(where, p):
    raw = bytes(p)
    m = re.search(rb'fwt-[A-Za-z0-9_.+-]+', raw)
    if not m or IPv6 not in p:
        return []
    ip = p[IPv6]
    sl = -1
    if IPv6ExtHdrSegmentRouting in ip and ip.nh == 43:
        sl = ip[IPv6ExtHdrSegmentRouting].segleft
    icmp = 0
    if ip.nh == 58:
        icmp = raw[len(raw) - len(bytes(ip.payload))]
    return [{"where": where, "marker": m.group(0).decode(), "da": ip.dst, "sl": sl, "icmp": icmp}]
`

// send runs a scapy script in the sender namespace; the script defines
// pkts (a list of packets) with the helpers of sendPy.
func (tp *topo) send(t *testing.T, script string) {
	t.Helper()
	testutil.RunScapyIn(t, tp.in, sendPy+script+"\nconf.verb = 0\nfor p in pkts:\n    send(p)\n")
}

// sendPy defines packet builders. Segment lists are written in SRH order
// (Segment List[0] = the last segment); SL defaults to the last entry.
const sendPy = `
SID = 'fc00:2::f1:0'
IDS = 'fc00:3::1'
EG = 'fc00:4::d6'
FINAL = 'fc00:d1::1'
SRC = 'fc00:10::2'
CHAIN = [FINAL, EG, IDS, SID]   # fw -> ids -> eg -> final
def mark(m):
    # The padding after '|' keeps the marker whole in an ICMPv6 error that
    # quotes the packet rounded down to 4 bytes.
    return Raw(b'fwt-' + m.encode() + b'|pad.')
def encap(inner, segs=None, sl=None, tag=0, src=SRC, da=None):
    segs = list(segs or CHAIN)
    sl = len(segs) - 1 if sl is None else sl
    return IPv6(src=src, dst=da or segs[sl])/IPv6ExtHdrSegmentRouting(addresses=segs, segleft=sl, tag=tag)/inner
def insert(l4, segs=None, sl=None, tag=0, src=SRC, da=None):
    segs = list(segs or CHAIN)
    sl = len(segs) - 1 if sl is None else sl
    return IPv6(src=src, dst=da or segs[sl])/IPv6ExtHdrSegmentRouting(addresses=segs, segleft=sl, tag=tag)/l4
pkts = []
`

// splitWords is the shell-like split the CLI's users rely on.
func splitWords(s string) ([]string, error) {
	var w []string
	var cur strings.Builder
	in, q := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			q, in = c, true
		case c == ' ':
			if in {
				w = append(w, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if q != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if in {
		w = append(w, cur.String())
	}
	return w, nil
}
