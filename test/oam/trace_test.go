package oam_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/oam/oamsvc"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
	"github.com/segchain/segchain/pkg/srv6svc"
)

type env struct {
	t   testing.TB
	lab *lab.Lab
	d   oam.Domain
}

// setup brings up a domain file in a lab of its own (labenv: removed,
// and checked for leftovers, when the test ends, even on failure), runs
// before (if any) and applies it through an apply session, as segchain
// apply does.
func setup(t *testing.T, file string, before func(*lab.Lab)) *env {
	t.Helper()
	le := labenv.New(t, labenv.Options{File: file, Prefix: "oam"})
	if before != nil {
		before(le.Lab)
	}
	s := le.Session(nil)
	if _, err := s.Apply(context.Background()); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return &env{t: t, lab: le.Lab, d: oamsvc.Domain(s)}
}

func (e *env) trace(t *testing.T, chain string) *oam.Report {
	t.Helper()
	return e.traceWith(t, chain, oam.TapTracepoint)
}

func (e *env) traceWith(t *testing.T, chain, tap string) *oam.Report {
	t.Helper()
	r, err := oam.Trace(context.Background(), e.d, chain, oam.Options{Timeout: 300 * time.Millisecond, Tap: tap})
	if err != nil {
		t.Fatalf("trace %s: %v", chain, err)
	}
	return r
}

func (e *env) run(t *testing.T, node string, args ...string) {
	t.Helper()
	ns, _ := e.lab.Netns(node)
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %v\n%s", node, args, err, out)
	}
}

// checkDelivered: every hop reached by the tap itself (or, with inferred,
// at least inferred), in order, and the probe delivered.
func checkDelivered(t *testing.T, r *oam.Report, want string, inferred map[int]bool) {
	t.Helper()
	if got := hopKinds(r); got != want {
		t.Fatalf("hops\n got %s\nwant %s", got, want)
	}
	if r.Broken != nil || !r.Delivered {
		t.Fatalf("broken %+v delivered %v; path %v", r.Broken, r.Delivered, r.Path)
	}
	for i, h := range r.Hops {
		if inferred[i] {
			if !h.Reached && !h.Inferred {
				t.Errorf("hop %d %s neither reached nor inferred", i, h.Name())
			}
			continue
		}
		if !h.Reached || h.Inferred || h.AtUS == nil {
			t.Errorf("hop %d %s: reached %v inferred %v at %v", i, h.Name(), h.Reached, h.Inferred, h.AtUS)
		}
	}
}

func hopKinds(r *oam.Report) string {
	var s []string
	for _, h := range r.Hops {
		s = append(s, h.Kind+":"+h.Node)
	}
	return strings.Join(s, " ")
}

func TestTraceDefaultLab(t *testing.T) {
	e := setup(t, "../../examples/default.yaml", nil)

	// Every chain: every hop reached, seen by the tap itself (not
	// inferred), in order, with increasing times; the SF behind nfv1's
	// proxy and the delivery to d included.
	want := map[string]string{
		"web":        "headend:ingress sid:nfv1 sid:nfv2 egress:egress delivery:d",
		"firewalled": "headend:ingress sid:nfv1 sf:sf1 sid:nfv2 egress:egress delivery:d",
		"filtered":   "headend:ingress sid:nfv1 sid:nfv2 egress:egress delivery:d",
		"insert6":    "headend:ingress sid:nfv1 sid:nfv2 delivery:d",
		"legacy4":    "headend:ingress sid:nfv1 sid:nfv2 egress:egress delivery:d",
	}
	for _, chain := range []string{"web", "firewalled", "filtered", "insert6", "legacy4", "firewalled/tcx"} {
		t.Run(chain, func(t *testing.T) {
			// firewalled/tcx: the same through the other tap.
			chain, tap, _ := strings.Cut(chain, "/")
			if tap == "" {
				tap = oam.TapTracepoint
			}
			r := e.traceWith(t, chain, tap)
			if got := hopKinds(r); got != want[chain] {
				t.Fatalf("hops\n got %s\nwant %s", got, want[chain])
			}
			if r.Broken != nil || !r.Delivered {
				t.Fatalf("broken %+v delivered %v; path %v", r.Broken, r.Delivered, r.Path)
			}
			prev := -1.0
			for i, h := range r.Hops {
				if !h.Reached || h.Inferred || h.AtUS == nil {
					t.Fatalf("hop %d %s: reached %v inferred %v at %v", i, h.Name(), h.Reached, h.Inferred, h.AtUS)
				}
				if *h.AtUS < prev {
					t.Errorf("hop %d %s at %.1f µs, before the previous hop (%.1f)", i, h.Name(), *h.AtUS, prev)
				}
				prev = *h.AtUS
				if h.Kind != oam.KindDelivery && (!h.Left || h.HeldUS == nil) {
					t.Errorf("hop %d %s: left %v held %v", i, h.Name(), h.Left, h.HeldUS)
				}
				// The SID's own counter saw the probe (seg6local count or
				// the eBPF behaviour's): the tap and the data path agree.
				if h.SID != "" && (h.SIDPackets == nil || *h.SIDPackets == 0) {
					t.Errorf("hop %d %s: its SID's packet counter did not go up", i, h.Name())
				}
			}
		})
	}

	// The tracepoint tap is loaded once per process and reused: later
	// traces only attach it, each with its own probe marker (a stale
	// marker, or a sighting left over from the trace before, would leave
	// this probe unseen).
	t.Run("tap-reused", func(t *testing.T) {
		before := oam.RxLoads()
		for i := 0; i < 3; i++ {
			checkDelivered(t, e.trace(t, "web"), want["web"], nil)
		}
		if got := oam.RxLoads(); got != before {
			t.Errorf("the tracepoint tap was loaded %d more times: not reused", got-before)
		}
	})

	// The delivery oracle is not ours: tcpdump on d, tshark decodes the
	// inner packet the trace says arrived there.
	t.Run("delivery-tshark", func(t *testing.T) {
		testutil.RequireTool(t, "tshark")
		ns, _ := e.lab.Netns("d")
		c := testutil.StartInboundCapture(t, ns, "eth-egress", "udp dst port 33434", 1)
		r := e.trace(t, "web")
		pcap := c.Wait(2 * time.Second)
		pk := testutil.Tshark(t, pcap, "ipv6.src", "ipv6.dst", "udp.dstport", "ipv6.routing.type")
		if len(pk) != 1 || pk[0].First("ipv6.src") != "fc00:1a::a" || pk[0].First("ipv6.dst") != "fc00:4d::d" || pk[0].First("ipv6.routing.type") != "" {
			t.Fatalf("d received %v; trace said delivered=%v", pk, r.Delivered)
		}
	})

	e.icmp(t)

	// Break one hop at a time; the trace names exactly it.
	t.Run("break-route", func(t *testing.T) {
		// r2 loses its route to nfv2's locator: nfv2-end is not reached,
		// r2 is where the probe was last seen and counted a drop.
		e.run(t, "r2", "ip", "-6", "route", "del", "fc00:3::/64")
		defer e.run(t, "r2", "ip", "-6", "route", "replace", "fc00:3::/64", "via", "fc00:36::3", "dev", "eth-nfv2", "proto", "202")
		r := e.trace(t, "web")
		b := r.Broken
		if b == nil || b.Hop != 2 || b.Reason != "not reached" || !strings.HasPrefix(b.LastSeen, "r2:") {
			t.Fatalf("broken %+v, want hop 2 (nfv2-end) not reached, last seen on r2; hops %+v", b, r.Hops)
		}
		if !hasDrop(b, "r2", "Ip6OutNoRoutes") && !hasDrop(b, "r2", "Ip6InNoRoutes") {
			t.Errorf("no r2 no-route drop counted: %+v", b.Drops)
		}
		if !kernelDrop(b, "r2", "IP_INNOROUTES", "IP_OUTNOROUTES") {
			t.Errorf("the kernel's drop on r2 (no route) not reported: %+v", b.KernelDrops)
		}
	})
	t.Run("break-nft", func(t *testing.T) {
		// sf1's own nftables drops the probe's flow: the SF got it and
		// never sent it back.
		e.run(t, "sf1", "nft", "add table inet oamtest; add chain inet oamtest oamfw { type filter hook forward priority 0; }; add rule inet oamtest oamfw tcp dport 8080 drop")
		defer e.run(t, "sf1", "nft", "delete table inet oamtest")
		r := e.trace(t, "firewalled")
		b := r.Broken
		if b == nil || b.Hop != 2 || r.Hops[2].Kind != oam.KindSF || b.Reason != "did not leave" {
			t.Fatalf("broken %+v, want hop 2 (SF sf1) did not leave; hops %+v", b, r.Hops)
		}
		if !kernelDrop(b, "sf1", "NETFILTER_DROP") {
			t.Errorf("the kernel's drop on sf1 (netfilter) not reported: %+v", b.KernelDrops)
		}
	})
	t.Run("graph", func(t *testing.T) {
		// The picture of the lab after a healthy trace of web and a broken
		// one of firewalled (sf1's nftables dropping it).
		traces := map[string]*oam.Report{"web": e.trace(t, "web")}
		e.run(t, "sf1", "nft", "add table inet oamgraph; add chain inet oamgraph c { type filter hook forward priority 0; }; add rule inet oamgraph c tcp dport 8080 drop")
		traces["firewalled"] = e.trace(t, "firewalled")
		e.run(t, "sf1", "nft", "delete table inet oamgraph")
		counters, err := e.d.Counters(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		g := oam.BuildGraph(e.d, counters, traces, oam.GraphOptions{})
		checkSVG(t, g.SVG(), e.lab.NodeNames(), traces)
		t.Run("chromium", func(t *testing.T) {
			renderInChromium(t, g.SVG(), e.lab.NodeNames(), []string{"web", "firewalled", "filtered", "insert6", "legacy4"}, 1)
		})
		dot := g.DOT()
		for _, want := range []string{`"nfv1" -- "sf1" [dir=forward color="red"`, `"sf1" [color=red penwidth=3]`, `"egress" -- "d" [dir=forward`} {
			if !strings.Contains(dot, want) {
				t.Errorf("dot lacks %s:\n%s", want, dot)
			}
		}
	})
	t.Run("break-sf-down", func(t *testing.T) {
		// sf1's interface goes down: the proxy got the probe, the SF never.
		e.run(t, "sf1", "ip", "link", "set", "eth-nfv1", "down")
		defer e.run(t, "sf1", "ip", "link", "set", "eth-nfv1", "up")
		r := e.trace(t, "firewalled")
		b := r.Broken
		if b == nil || b.Hop != 2 || r.Hops[2].Kind != oam.KindSF || b.Reason != "not reached" || !strings.HasPrefix(b.LastSeen, "nfv1:") {
			t.Fatalf("broken %+v, want hop 2 (SF sf1) not reached, last seen on nfv1; hops %+v", b, r.Hops)
		}
		// The proxy's own counter says the SF did not return it; the kernel
		// dropped it on nfv1 (its SF-facing interface has no carrier).
		if !hasDrop(b, "nfv1", "SID "+r.Hops[1].SID+" not-returned") || len(b.KernelDrops) == 0 || b.KernelDrops[0].Node != "nfv1" {
			t.Errorf("drops %+v, kernel drops %+v: want nfv1's not-returned and a kernel drop on nfv1", b.Drops, b.KernelDrops)
		}
	})
}

// TestTraceDefaultLab's second half: RFC 9259 ping and traceroute on the
// same lab (icmp below).
func (e *env) icmp(t *testing.T) {
	ingress, _ := e.lab.Netns("ingress")
	sids := func(words ...string) []netip.Addr {
		a, err := e.d.Resolve(words)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	iputils := func(target string) bool {
		return exec.Command("ip", "netns", "exec", ingress, "ping", "-c", "1", "-W", "1", target).Run() == nil
	}
	answered := func(rs []oam.Reply) int {
		n := 0
		for _, r := range rs {
			if r.Type == "echo-reply" {
				n++
			}
		}
		return n
	}
	// A classic ping answers as iputils' does: a node's address answers;
	// a native SID (End, End.DX6) does not (Linux's seg6local drops an
	// upper-layer packet addressed to a SID).
	t.Run("ping-like-iputils", func(t *testing.T) {
		for _, target := range []string{"fc00:25::2", "nfv1-end", "web egress", "fc00:4d::d"} {
			a := sids(target)[0]
			rs, err := oam.Ping(ingress, a, nil, 1, 0, 500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := answered(rs) == 1, iputils(a.String()); got != want {
				t.Errorf("ping %s (%s): segchain answered %v, iputils %v (%+v)", target, a, got, want, rs)
			}
		}
	})
	// Along a segment list: the SRH on the wire (tshark) is the list, and
	// the target answers.
	t.Run("ping-via-segments", func(t *testing.T) {
		testutil.RequireTool(t, "tshark")
		nfv1, _ := e.lab.Netns("nfv1")
		c := testutil.StartInboundCapture(t, nfv1, "eth-r1", "ip6[6] == 43", 1)
		segs := sids("nfv1-end", "nfv2-end")
		rs, err := oam.Ping(ingress, netip.MustParseAddr("fc00:4d::d"), segs, 1, 0, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if answered(rs) != 1 || e.d.NodeOf(rs[0].From) != "d" {
			t.Fatalf("replies %+v", rs)
		}
		pk := testutil.Tshark(t, c.Wait(2*time.Second), "ipv6.routing.type", "ipv6.routing.segleft", "ipv6.routing.srh.addr", "icmpv6.type")
		want := "fc00:4d::d|" + segs[1].String() + "|" + segs[0].String()
		if len(pk) != 1 || pk[0].First("ipv6.routing.type") != "4" || pk[0].First("ipv6.routing.segleft") != "2" ||
			strings.Join(pk[0]["ipv6.routing.srh.addr"], "|") != want || pk[0].First("icmpv6.type") != "128" {
			t.Fatalf("on the wire at nfv1: %v, want an echo request with SRH [%s], SL 2", pk, want)
		}
	})
	// traceroute along the list: every node, SR endpoints told apart by the
	// SID they quote (End applied: the next SID, Segments Left one less).
	t.Run("traceroute", func(t *testing.T) {
		segs := sids("nfv1-end", "nfv2-end")
		rs, err := oam.Traceroute(ingress, netip.MustParseAddr("fc00:4d::d"), segs, 16, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			sl := "-"
			if r.SL != nil {
				sl = fmt.Sprint(*r.SL)
			}
			got = append(got, e.d.NodeOf(r.From)+" "+r.Type+" "+r.ActiveSID+" "+sl)
		}
		want := []string{
			"r1 time-exceeded " + segs[0].String() + " 2",
			"nfv1 time-exceeded " + segs[1].String() + " 1",
			"r2 time-exceeded " + segs[1].String() + " 1",
			"nfv2 time-exceeded fc00:4d::d 0",
			"egress time-exceeded fc00:4d::d 0",
			"d echo-reply  -",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("traceroute\n got %q\nwant %q", got, want)
		}
	})
}

// checkSVG parses the picture as XML (encoding/xml, strict) and checks
// its elements: a node group per lab node, a chain group per chain drawn
// from the trace where there was one, the broken hop's line in red.
func checkSVG(t *testing.T, svg string, nodes []string, traces map[string]*oam.Report) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	dec.Strict = true
	gotNodes := map[string]bool{}
	from := map[string]string{}
	broken := map[string]int{}
	chain := ""
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = se.Name.Space + " " + se.Name.Local
		}
		attr := map[string]string{}
		for _, a := range se.Attr {
			attr[a.Name.Local] = a.Value
		}
		switch {
		case se.Name.Local == "g" && attr["class"] == "node":
			gotNodes[strings.TrimPrefix(attr["id"], "node-")] = true
		case se.Name.Local == "g" && attr["class"] == "chain":
			chain = strings.TrimPrefix(attr["id"], "chain-")
			from[chain] = attr["data-from"]
		case se.Name.Local == "line" && attr["class"] == "hop broken":
			if attr["stroke"] != "red" {
				t.Errorf("broken hop of %s drawn %s", chain, attr["stroke"])
			}
			broken[chain]++
		}
	}
	if root != "http://www.w3.org/2000/svg svg" {
		t.Errorf("root element %q", root)
	}
	for _, n := range nodes {
		if !gotNodes[n] {
			t.Errorf("node %s not drawn (drawn: %v)", n, gotNodes)
		}
	}
	for _, c := range []string{"web", "firewalled", "filtered", "insert6", "legacy4"} {
		want := "plan"
		if traces[c] != nil {
			want = "trace"
		}
		if from[c] != want {
			t.Errorf("chain %s drawn from %q, want %q", c, from[c], want)
		}
	}
	if broken["firewalled"] != 1 || broken["web"] != 0 {
		t.Errorf("broken hops drawn: %v, want firewalled's one", broken)
	}
}

func kernelDrop(b *oam.Broken, node string, reasons ...string) bool {
	for _, k := range b.KernelDrops {
		for _, r := range reasons {
			if k.Node == node && k.Reason == r {
				return true
			}
		}
	}
	return false
}

func hasDrop(b *oam.Broken, node, counter string) bool {
	for _, d := range b.Drops {
		if d.Node == node && d.Counter == counter {
			return true
		}
	}
	return false
}

// End.AN.FW and End.AN.NF (the netfilter example: the node's own nftables
// rule set on the chain's inner packets).
func TestTraceNetfilterExample(t *testing.T) {
	e := setup(t, "../../examples/netfilter.yaml", nil)
	r := e.trace(t, "filtered")
	checkDelivered(t, r, "headend:ingress sid:nfv1 sid:nfv2 egress:egress delivery:d", nil)
	if r.Hops[1].Behavior != "End.AN.FW" || r.Hops[2].Behavior != "End.AN.NF" {
		t.Errorf("behaviours %s %s", r.Hops[1].Behavior, r.Hops[2].Behavior)
	}
}

// A userspace SID (AF_XDP, the userspace example): the service takes the
// packet in XDP, before the tap where XDP is native; the hop is then
// inferred from the next one, and the chain still traced to its delivery.
func TestTraceUserspaceExample(t *testing.T) {
	raw, err := os.ReadFile("../../examples/userspace.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "userspace.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(string(raw), "wait: 10s", "wait: 3s", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int64
	e := setup(t, file, func(l *lab.Lab) {
		ns, _ := l.Netns("nfv1")
		svc, err := srv6svc.Listen(srv6svc.Config{Name: "acct", Netns: ns, Interfaces: []string{"eth-ingress"},
			SIDs: []netip.Prefix{netip.MustParsePrefix("fc00:2::5c:0/112")}, OnFailure: srv6svc.OnFailureBypass, Queues: 1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- svc.Serve(ctx, func(*srv6svc.Packet) srv6svc.Verdict { seen.Add(1); return srv6svc.Forward })
		}()
		t.Cleanup(func() { cancel(); <-done; _ = svc.Release() })
	})
	r := e.trace(t, "accounted")
	checkDelivered(t, r, "headend:ingress sid:nfv1 sid:nfv2 egress:egress delivery:d", map[int]bool{1: true})
	if seen.Load() != 1 {
		t.Errorf("the userspace service saw %d packets, want the probe", seen.Load())
	}
	t.Logf("userspace hop: reached %v inferred %v", r.Hops[1].Reached, r.Hops[1].Inferred)
}

// A signed chain (the hmac example: nfv1 requires the HMAC TLV): the probe
// gets through only because the headend signed it as it signs the chain's
// traffic.
func TestTraceHMACExample(t *testing.T) {
	e := setup(t, "../../examples/hmac.yaml", nil)
	r := e.trace(t, "signed")
	checkDelivered(t, r, "headend:ingress sid:nfv1 egress:egress delivery:d", nil)
}

// A bidirectional chain both ways: the reverse chain's probe enters at
// the forward egress (edge2) from b, classified on the swapped match, and
// is delivered to a through nfv1 and edge1's return SID.
func TestTraceBidirectional(t *testing.T) {
	e := setup(t, "../../examples/bidirectional.yaml", nil)
	checkDelivered(t, e.trace(t, "ab"), "headend:edge1 sid:nfv1 egress:edge2 delivery:b", nil)
	r := e.trace(t, "ab/reverse")
	checkDelivered(t, r, "headend:edge2 sid:nfv1 egress:edge1 delivery:a", nil)
	if !strings.HasPrefix(r.From, "b:") || !strings.Contains(r.Probe, "fc00:3b::b") {
		t.Errorf("reverse probe %s from %s: want b's flow, sent from b", r.Probe, r.From)
	}
}
