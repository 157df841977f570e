package svctest

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// Addresses of the testbed.
const (
	TesterIn  = "fc00:a::1" // tester side of the link into the NFV node
	NFVIn     = "fc00:a::2"
	TesterOut = "fc00:b::1" // tester side of the link out of the NFV node (the sink)
	NFVOut    = "fc00:b::2"
	SIDPrefix = "fc00:5::"   // the NFV node's locator (/48)
	Next      = "fc00:9::1"  // a next segment, routed to the sink
	Final     = "fc00:9::99" // another one, also routed to the sink
)

// Topo is the testbed: Tester sends on TIn (to the NFV's NIn) and receives
// on TOut; the NFV node (NFV) serves on NIn and routes fc00:9::/64 to TOut.
type Topo struct {
	Tester, NFV string
	TIn, TOut   string // interfaces in Tester
	NIn, NOut   string // interfaces in NFV
	NInMAC      string
}

// New creates the namespaces (tag names the test's helper, e.g. "h17").
func New(t testing.TB, tag string) *Topo {
	t.Helper()
	testutil.RequireRoot(t)
	tp := &Topo{Tester: testutil.NewNetns(t, tag+"t"), NFV: testutil.NewNetns(t, tag+"n"),
		TIn: "tin", TOut: "tout", NIn: "nin", NOut: "nout"}
	for _, ns := range []string{tp.Tester, tp.NFV} {
		testutil.Exec(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
			"net.ipv6.conf.default.router_solicitations=0", "net.ipv6.conf.all.router_solicitations=0")
	}
	testutil.Exec(t, tp.NFV, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", "net.ipv6.conf.all.seg6_enabled=1",
		"net.ipv6.conf.default.seg6_enabled=1")
	testutil.Exec(t, "", "ip", "link", "add", tp.TIn, "netns", tp.Tester, "type", "veth", "peer", "name", tp.NIn, "netns", tp.NFV)
	testutil.Exec(t, "", "ip", "link", "add", tp.TOut, "netns", tp.Tester, "type", "veth", "peer", "name", tp.NOut, "netns", tp.NFV)
	for _, c := range [][]string{
		{tp.Tester, tp.TIn, TesterIn}, {tp.Tester, tp.TOut, TesterOut},
		{tp.NFV, tp.NIn, NFVIn}, {tp.NFV, tp.NOut, NFVOut},
	} {
		testutil.Exec(t, c[0], "ip", "addr", "add", c[2]+"/64", "dev", c[1], "nodad")
		testutil.Exec(t, c[0], "ip", "link", "set", c[1], "up")
		testutil.Exec(t, c[0], "sysctl", "-qw", "net.ipv6.conf."+c[1]+".seg6_enabled=1")
	}
	tp.NInMAC = MAC(t, tp.NFV, tp.NIn)
	testutil.Exec(t, tp.NFV, "ip", "-6", "neigh", "replace", TesterOut, "lladdr", MAC(t, tp.Tester, tp.TOut), "dev", tp.NOut, "nud", "permanent")
	testutil.Exec(t, tp.NFV, "ip", "-6", "neigh", "replace", TesterIn, "lladdr", MAC(t, tp.Tester, tp.TIn), "dev", tp.NIn, "nud", "permanent")
	testutil.Exec(t, tp.NFV, "ip", "-6", "route", "add", "fc00:9::/64", "via", TesterOut)
	return tp
}

// MAC returns the hardware address of iface in ns.
func MAC(t testing.TB, ns, iface string) string {
	t.Helper()
	out := testutil.Exec(t, ns, "cat", "/sys/class/net/"+iface+"/address")
	mac := strings.TrimSpace(out)
	if _, err := net.ParseMAC(mac); err != nil {
		t.Fatalf("mac of %s: %q", iface, out)
	}
	return mac
}

// Send runs a scapy script in the tester that sends the packets the Python
// expression pkts (a list) builds, as Ethernet frames to the NFV node. The
// script may use SID (a string), NEXT, FINAL, TIN (tester address) and
// srv6(sid, segs_wire_order, sl, inner) which builds one packet.
func (tp *Topo) Send(t testing.TB, setup, pkts string) {
	t.Helper()
	tp.SendPaced(t, setup, pkts, 0)
}

// SendPaced is Send with inter seconds between packets.
func (tp *Topo) SendPaced(t testing.TB, setup, pkts string, inter float64) {
	t.Helper()
	script := fmt.Sprintf(`
from scapy.all import *
conf.verb = 0
NEXT, FINAL, TIN = %q, %q, %q
def srv6(sid, segs, sl, inner, hlim=64):
    nh = 41 if inner.haslayer(IPv6) and isinstance(inner, IPv6) else 4
    return Ether(dst=%q)/IPv6(src=TIN, dst=sid, hlim=hlim)/IPv6ExtHdrSegmentRouting(addresses=segs, segleft=sl, nh=nh)/inner
%s
pkts = %s
sendp(pkts, iface=%q, inter=%g, verbose=False)
`, Next, Final, TesterIn, tp.NInMAC, setup, pkts, tp.TIn, inter)
	testutil.RunScapyIn(t, tp.Tester, script)
}

// TsharkChecked dissects pcap with tshark, IPv4/UDP checksum validation on
// (a *.checksum.status of 1 is good, 0 bad), and returns fields per packet
// (several occurrences joined with ",").
func TsharkChecked(t testing.TB, pcap string, fields ...string) []map[string]string {
	t.Helper()
	testutil.RequireTool(t, "tshark")
	args := []string{"-r", pcap, "-n", "-o", "udp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
		"-o", "tcp.check_checksum:TRUE", "-T", "fields", "-E", "separator=/t"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark -r %s: %v", pcap, err)
	}
	var rows []map[string]string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		cols := strings.Split(line, "\t")
		r := map[string]string{}
		for i, f := range fields {
			if i < len(cols) {
				r[f] = cols[i]
			}
		}
		rows = append(rows, r)
	}
	return rows
}
