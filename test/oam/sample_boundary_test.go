package oam_test

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// The HMAC chain sampled 1:100 in the boundary filter: the kernel
// encapsulates the marked packets with the O-flagged copy of the route
// and signs them, so exactly 20 of 2000 arrive at nfv1 (which requires a
// valid HMAC) with flags 0x28 (tshark), the other 1980 with 0x08, every
// segment sees the 20, and nothing is lost.
func TestSampleHMAC(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	e := setupOF(t, "../../examples/hmac.yaml", nil)
	const count, rate = 2000, 100
	rep, res, pcap := e.sampledStream(t, "signed", rate, count, "nfv1")
	if res.Lost != 0 || res.Unique != count {
		t.Errorf("stream: %+v, want all %d received through the HMAC-checking SIDs", res, count)
	}
	if rep.Marker != oam.MarkerBoundary {
		t.Errorf("marked by %q (%s), want the boundary filter", rep.Marker, rep.MarkerNote)
	}
	if rep.Packets != count || rep.Marked != count/rate || rep.HMAC != 0 || rep.Incomplete != 0 {
		t.Errorf("counted %d, marked %d, hmac %d, incomplete %d; want %d, %d, 0, 0", rep.Packets, rep.Marked, rep.HMAC, rep.Incomplete, count, count/rate)
	}
	for _, h := range rep.Hops {
		if h.Packets != count/rate {
			t.Errorf("hop %s %s: %d sampled packets, want %d", h.Kind, h.Node, h.Packets, count/rate)
		}
	}
	flags := map[string]int{}
	for _, p := range testutil.Tshark(t, pcap, "ipv6.routing.srh.flags") {
		flags[p.First("ipv6.routing.srh.flags")]++
	}
	if flags["0x28"] != count/rate || flags["0x08"] != count-count/rate {
		t.Errorf("nfv1 saw SRH flags %v, want 0x28 × %d and 0x08 × %d", flags, count/rate, count-count/rate)
	}
	noSampleState(t, e, "ingress")
}

// Without a boundary filter on the headend (taken off here), sampling
// falls back to the TCX egress marker and says so; the counts stay exact.
func TestSampleFallbackTCX(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	e := setupOF(t, "../../examples/default.yaml", nil)
	ing, _ := e.lab.Netns("ingress")
	if err := boundary.Remove(ing); err != nil {
		t.Fatal(err)
	}
	const count, rate = 500, 50
	rep, res, pcap := e.sampledStream(t, "web", rate, count, "r1")
	if res.Lost != 0 {
		t.Errorf("stream: %+v", res)
	}
	if rep.Marker != oam.MarkerTCX || rep.MarkerNote == "" {
		t.Errorf("marker %q (note %q), want the TCX marker and why", rep.Marker, rep.MarkerNote)
	}
	if rep.Packets != count || rep.Marked != count/rate || rep.Incomplete != 0 {
		t.Errorf("counted %d, marked %d, incomplete %d; want %d, %d, 0", rep.Packets, rep.Marked, rep.Incomplete, count, count/rate)
	}
	flags := map[string]int{}
	for _, p := range testutil.Tshark(t, pcap, "ipv6.routing.srh.flags") {
		flags[p.First("ipv6.routing.srh.flags")]++
	}
	if flags["0x20"] != count/rate || flags["0x00"] != count-count/rate {
		t.Errorf("r1 saw SRH flags %v, want 0x20 × %d and 0x00 × %d", flags, count/rate, count-count/rate)
	}
}

// noSampleState checks that node holds no O-flagged table or rule
// (protocol 205, a fwmark rule) once sampling ended, as iproute2 lists
// them (this iproute2 lists every rule for "ip rule show proto").
func noSampleState(t *testing.T, e *env, node string) {
	t.Helper()
	ns, _ := e.lab.Netns(node)
	noSampleStateNS(t, ns)
}

// noSampleStateNS is noSampleState for namespace ns.
func noSampleStateNS(t *testing.T, ns string) {
	t.Helper()
	node := ns
	for _, args := range [][]string{
		{"-6", "rule", "show"}, {"-4", "rule", "show"},
		{"-6", "route", "show", "table", "all", "proto", "205"}, {"-4", "route", "show", "table", "all", "proto", "205"},
	} {
		out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		if strings.Contains(string(out), "proto 205") || strings.Contains(string(out), "fwmark") {
			t.Errorf("%s after sampling: ip %v:\n%s", node, args, out)
		}
	}
}

// An HMAC chain's sampling kept by apply through the agents: the
// headend's agent marks in its boundary filter (an O-flagged table and
// its fwmark rule while it keeps it), the kernel signs the O-flag, nfv1
// (which requires HMAC) and the egress forward every packet: status
// pairs exactly 1 in 100 at every hop, none incomplete, none counted as
// "not marked (HMAC)"; destroy leaves no O-flagged table or rule.
func TestKeptOAMHMAC(t *testing.T) {
	const count, rate = 2000, 100
	b, err := os.ReadFile("../../examples/hmac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const signed = "    hmac: k1\n"
	src := string(b)
	if strings.Count(src, signed) != 1 {
		t.Fatal("examples/hmac.yaml: the signed chain's hmac line not found once")
	}
	src = strings.Replace(src, signed, signed+fmt.Sprintf("    oam: {sample: %d}\n", rate), 1)
	file := filepath.Join(t.TempDir(), "hmac-kept.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// hmac.yaml names its key file relative to itself.
	if err := os.Symlink(mustAbs(t, "../../examples/secrets"), filepath.Join(filepath.Dir(file), "secrets")); err != nil {
		t.Fatal(err)
	}
	e := labenv.New(t, labenv.Options{File: file, Prefix: "s15ofk-", CLI: true, Binary: segchainBin, Agents: true})
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(e.Lab.Agents["ingress"].Log)
			t.Logf("ingress agent log:\n%s", b)
		}
	})
	e.Must("apply", "--lab", e.Name)
	rules, err := exec.Command("ip", "-n", e.NS("ingress"), "-6", "rule", "show").CombinedOutput()
	if err != nil || !strings.Contains(string(rules), "fwmark") || !strings.Contains(string(rules), "proto 205") {
		t.Fatalf("ingress keeps no O-flagged rule (boundary marking) while its agent samples: %v\n%s", err, rules)
	}
	chainStream(t, e, 7000, count, 1000, nil)
	var kc oam.KeptChain
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		kc = keptStatusOf(t, e, "signed")
		if kc.Window >= count/rate || time.Now().After(deadline) {
			break
		}
	}
	if kc.Packets != count || kc.Marked != count/rate || kc.HMAC != 0 || kc.Incomplete != 0 || len(kc.Problems) != 0 {
		t.Errorf("status: counted %d, marked %d, hmac %d, incomplete %d, problems %v; want %d, %d, 0, 0, none", kc.Packets, kc.Marked, kc.HMAC, kc.Incomplete, kc.Problems, count, count/rate)
	}
	var hops []string
	for _, h := range kc.Hops {
		hops = append(hops, fmt.Sprintf("%s:%s:%d", h.Kind, h.Node, h.Packets))
	}
	if got, want := strings.Join(hops, " "), fmt.Sprintf("headend:ingress:%d sid:nfv1:%d egress:egress:%d", count/rate, count/rate, count/rate); got != want {
		t.Errorf("hops %s, want %s", got, want)
	}
	e.Must("destroy", "--lab", e.Name)
	noSampleStateNS(t, e.NS("ingress"))
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// scapySend sends count UDP datagrams from s to d (fixed ports, the
// sequence number as payload) with scapy, one flow, so two runs send the
// same packets.
func scapySend(t *testing.T, ns string, count int) {
	t.Helper()
	script := fmt.Sprintf(`
from scapy.all import IPv6, UDP, Raw, send
import struct
pkts = [IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=40000, dport=7000)/Raw(struct.pack(">Q", i) + b"s15of" * 8) for i in range(%d)]
send(pkts, inter=0.001, verbose=False)
`, count)
	if out, err := exec.Command("ip", "netns", "exec", ns, "python3", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("scapy send: %v\n%s", err, out)
	}
}

// The packets the boundary filter does not mark leave the headend byte
// for byte as without sampling: the same 300 datagrams (scapy, one flow)
// captured on r1 without sampling and while web is sampled 1:100; scapy
// reads both captures: the 297 not O-flagged are identical to their
// counterparts, the 3 O-flagged differ in the SRH's flags byte only.
func TestSampleUnsampledUnchanged(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	e := setupOF(t, "../../examples/default.yaml", nil)
	const count, rate = 300, 100
	r1, _ := e.lab.Netns("r1")
	s, _ := e.lab.Netns("s")
	capture := func() string {
		c := testutil.StartInboundCapture(t, r1, "eth-ingress", "ip6[6] == 43 and ip6[40+2] == 4", count)
		scapySend(t, s, count)
		return c.Wait(5 * time.Second)
	}
	plain := capture()
	var sampled string
	rep := e.sampled(t, "web", rate, func() { sampled = capture() })
	if rep.Marker != oam.MarkerBoundary || rep.Marked != count/rate {
		t.Fatalf("marker %q marked %d, want the boundary filter, %d", rep.Marker, rep.Marked, count/rate)
	}
	cmp := `
import sys
from scapy.all import rdpcap, raw
def bySeq(p):
    out = {}
    for f in rdpcap(p):
        b = raw(f)
        out[b[-48:-40]] = b
    return out
a, b = bySeq(sys.argv[1]), bySeq(sys.argv[2])
same = flagged = 0
for k, x in b.items():
    y = a.get(k)
    if y is None or len(x) != len(y):
        print("no counterpart", k.hex()); continue
    diff = [i for i in range(len(x)) if x[i] != y[i]]
    if not diff:
        same += 1
    elif diff == [14 + 40 + 5] and x[diff[0]] == y[diff[0]] | 0x20:
        flagged += 1
    else:
        print("differs at", diff)
print(len(a), len(b), same, flagged)
`
	out, err := exec.Command("python3", "-c", cmp, plain, sampled).CombinedOutput()
	if err != nil {
		t.Fatalf("scapy compare: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), fmt.Sprintf("%d %d %d %d", count, count, count-count/rate, count/rate); got != want {
		t.Errorf("captures (without, with sampling; identical, O-flag only): %s, want %s", got, want)
	}
}

// The O-flagged table follows the chain's: web's headend route replaced
// while it is sampled (what an apply that drops nfv2-end would do, the
// key — first and last SID — unchanged) is copied, O-flagged, within a
// few seconds (iproute2 reads the protocol-205 route).
func TestSampleFollowsRoute(t *testing.T) {
	e := setupOF(t, "../../examples/default.yaml", nil)
	pc := e.chain(t, "web")
	ns, _ := e.lab.Netns(pc.Ingress)
	e.sampled(t, "web", 100, func() {
		r := headendRoute(t, ns, pc.Table, netip.MustParseAddr("fc00:4d::d"))
		if len(r.Seg6.Segs) != 3 {
			t.Fatalf("web's route %s: want 3 SIDs", r)
		}
		r.Seg6.Segs = []netip.Addr{r.Seg6.Segs[0], r.Seg6.Segs[2]}
		h, err := dataplane.Open(ns)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if err := h.ReplaceRoute(r); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("segs 2 [ %s %s ]", r.Seg6.Segs[0], r.Seg6.Segs[1])
		var out []byte
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			out, err = exec.Command("ip", "-n", ns, "-6", "route", "show", "table", "all", "proto", "205").CombinedOutput()
			if err == nil && strings.Contains(string(out), want) {
				return
			}
		}
		t.Errorf("the O-flagged table did not follow web's route (want %q):\n%s", want, out)
	})
	noSampleState(t, e, pc.Ingress)
}

// A more specific chain's packets are not web's: 500 datagrams to port
// 6001 (chain filtered: UDP 6000-6999, same destination, its rule before
// web's) and 500 to port 7000 (web) while web is sampled 1:10 — the
// filter counts the 500 of web only and marks 50, all seen at every hop.
func TestSampleSkipsMoreSpecificChain(t *testing.T) {
	e := setupOF(t, "../../examples/default.yaml", nil)
	s, _ := e.lab.Netns("s")
	d, _ := e.lab.Netns("d")
	const count, rate = 500, 10
	var other, web testutil.StreamResult
	rep := e.sampled(t, "web", rate, func() {
		other = testutil.Stream(t, seqstream, s, d, "fc00:4d::d", 6001, count, 1000, nil)
		web = testutil.Stream(t, seqstream, s, d, "fc00:4d::d", 7000, count, 1000, nil)
	})
	if other.Lost != 0 || web.Lost != 0 {
		t.Errorf("streams lost %d (filtered), %d (web)", other.Lost, web.Lost)
	}
	if rep.Marker != oam.MarkerBoundary || rep.Packets != count || rep.Marked != count/rate || rep.Incomplete != 0 {
		t.Errorf("marker %q: counted %d, marked %d, incomplete %d; want the boundary filter, %d, %d, 0", rep.Marker, rep.Packets, rep.Marked, rep.Incomplete, count, count/rate)
	}
}

// Bulk TCP from a host stack through the sampled web chain, with the
// offloads a Linux host has on veth (TSO/GSO at s) and GRO on the
// headend's host-facing interface: boundary_in sees and marks aggregated
// packets up to 64 KB, and the kernel encapsulates the marked ones by the
// O-flagged route as GSO packets. Every byte arrives intact, the filter
// marked 1 in 5 of the packets it counted, and every segment saw each
// marked packet.
func TestSampleBulkTCP(t *testing.T) {
	testutil.RequireTool(t, "ethtool")
	e := setupOF(t, "../../examples/default.yaml", nil)
	s, _ := e.lab.Netns("s")
	d, _ := e.lab.Netns("d")
	ing, _ := e.lab.Netns("ingress")
	testutil.Exec(t, s, "ethtool", "-K", "eth-ingress", "tso", "on", "gso", "on")
	testutil.Exec(t, ing, "ethtool", "-K", "eth-s", "gro", "on")
	const rate = 5
	var err error
	rep := e.sampled(t, "web", rate, func() {
		err = testutil.BulkTCP(t, s, d, "fc00:4d::d", 0, 2<<20, 30*time.Second)
	})
	if err != nil {
		t.Fatalf("bulk TCP through the sampled chain: %v", err)
	}
	if rep.Marker != oam.MarkerBoundary {
		t.Errorf("marked by %q (%s), want the boundary filter", rep.Marker, rep.MarkerNote)
	}
	if rep.Packets == 0 || rep.Marked != (rep.Packets+rate-1)/rate || rep.Incomplete != 0 {
		t.Errorf("counted %d, marked %d, incomplete %d; want some, 1 in %d, 0", rep.Packets, rep.Marked, rep.Incomplete, rate)
	}
	for _, h := range rep.Hops {
		if h.Packets != rep.Marked {
			t.Errorf("hop %s %s: %d sampled packets, want %d", h.Kind, h.Node, h.Packets, rep.Marked)
		}
	}
	noSampleState(t, e, "ingress")
}
