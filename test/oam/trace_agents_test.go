package oam_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/oam/oamsvc"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// traceCLI runs `segchain trace -o json` and decodes its report (exit
// status 2, a broken chain, is a report too).
func traceCLI(t *testing.T, e *labenv.Env, args ...string) *oam.Report {
	t.Helper()
	out, err := e.Run(append([]string{"trace", "-o", "json"}, args...)...)
	var r oam.Report
	if jerr := json.Unmarshal([]byte(out[:strings.LastIndexByte(out, '}')+1]), &r); jerr != nil {
		t.Fatalf("trace %v: %v (%v)\n%s", args, jerr, err, out)
	}
	return &r
}

// Trace through real agents (lab up --agents: a `segchain agent` per node,
// gRPC with mutual TLS over the lab's management network): every node's
// agent taps its node, the headend's agent injects the probe, the
// controller puts the sightings on one time line. The same hops as in
// process, the same break named the same way; tshark on d confirms the
// delivery.
func TestTraceThroughAgents(t *testing.T) {
	e := labenv.New(t, labenv.Options{File: "../../examples/default.yaml", Prefix: "oama-", CLI: true, Binary: segchainBin, Agents: true})
	// The CLI keeps each chain's last trace for segchain graph.
	t.Cleanup(func() { os.RemoveAll(oam.TraceDir(e.Name)) })
	e.Must("apply", "--lab", e.Name)

	t.Run("firewalled", func(t *testing.T) {
		r := traceCLI(t, e, "--lab", e.Name, "firewalled")
		if r.Clock != oam.ClockAgents || !strings.Contains(r.From, "injected by its agent") || !strings.HasPrefix(r.From, "ingress:eth-s") {
			t.Fatalf("clock %q, from %q: want the agents' clock and the headend's agent injecting on eth-s", r.Clock, r.From)
		}
		want := []struct{ kind, node string }{
			{oam.KindHeadend, "ingress"}, {oam.KindSID, "nfv1"}, {oam.KindSF, "sf1"},
			{oam.KindSID, "nfv2"}, {oam.KindEgress, "egress"}, {oam.KindDelivery, "d"}}
		if len(r.Hops) != len(want) {
			t.Fatalf("hops %+v, want %v", r.Hops, want)
		}
		var last float64 = -1
		for i, w := range want {
			h := r.Hops[i]
			if h.Kind != w.kind || h.Node != w.node || !h.Reached || h.Inferred || h.AtUS == nil {
				t.Errorf("hop %d: %+v, want %s on %s reached (seen)", i, h, w.kind, w.node)
				continue
			}
			// One kernel: the agents' wall-clock line keeps the order.
			if *h.AtUS <= last && i > 0 {
				t.Errorf("hop %d at %.1f µs, not after hop %d (%.1f µs)", i, *h.AtUS, i-1, last)
			}
			last = *h.AtUS
			if h.SID != "" && (h.SIDPackets == nil || *h.SIDPackets == 0) {
				t.Errorf("hop %d %s: its SID's packet counter did not go up", i, h.Name())
			}
		}
		if !r.Delivered || r.Broken != nil {
			t.Errorf("delivered %v, broken %+v", r.Delivered, r.Broken)
		}
	})

	// More traces in a row than an agent runs taps at once: each agent
	// keeps its tap loaded between traces and must release it as soon as
	// the trace's stream ends, not when the stream's time is up.
	t.Run("back-to-back", func(t *testing.T) {
		for i := 0; i <= oamsvc.MaxTaps+1; i++ {
			if r := traceCLI(t, e, "--lab", e.Name, "web"); !r.Delivered || r.Broken != nil {
				t.Fatalf("trace %d: delivered %v, broken %+v", i, r.Delivered, r.Broken)
			}
		}
	})

	t.Run("delivery-tshark", func(t *testing.T) {
		testutil.RequireTool(t, "tshark")
		c := testutil.StartInboundCapture(t, e.NS("d"), "eth-egress", "udp dst port 33434", 1)
		r := traceCLI(t, e, "--lab", e.Name, "web")
		pcap := c.Wait(2 * time.Second)
		pk := testutil.Tshark(t, pcap, "ipv6.src", "ipv6.dst", "udp.dstport", "ipv6.routing.type")
		if len(pk) != 1 || pk[0].First("ipv6.src") != "fc00:1a::a" || pk[0].First("ipv6.dst") != "fc00:4d::d" || pk[0].First("ipv6.routing.type") != "" {
			t.Fatalf("d received %v; trace said delivered=%v", pk, r.Delivered)
		}
		if !r.Delivered {
			t.Errorf("d received the probe, the trace says not delivered: %+v", r.Hops)
		}
	})

	t.Run("break-route", func(t *testing.T) {
		ip := func(args ...string) {
			if out, err := exec.Command("ip", append([]string{"-n", e.NS("r2")}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("ip %v: %v\n%s", args, err, out)
			}
		}
		ip("-6", "route", "del", "fc00:3::/64")
		defer ip("-6", "route", "replace", "fc00:3::/64", "via", "fc00:36::3", "dev", "eth-nfv2", "proto", "202")
		r := traceCLI(t, e, "--lab", e.Name, "web")
		b := r.Broken
		if b == nil || b.Hop != 2 || b.Reason != "not reached" || !strings.HasPrefix(b.LastSeen, "r2:") {
			t.Fatalf("broken %+v, want hop 2 (nfv2-end) not reached, last seen on r2; hops %+v", b, r.Hops)
		}
		// Both from r2's agent: its kernel's drop (the tap's stream) and
		// its IP statistics (the Stats RPC).
		if !hasDrop(b, "r2", "Ip6InNoRoutes") && !hasDrop(b, "r2", "Ip6OutNoRoutes") {
			t.Errorf("no r2 no-route drop counted: %+v", b.Drops)
		}
		if !kernelDrop(b, "r2", "IP_INNOROUTES", "IP_OUTNOROUTES") {
			t.Errorf("the kernel's drop on r2 (no route) not reported: %+v", b.KernelDrops)
		}
	})

	// O-flag sampling through the agents: the headend's agent marks,
	// every agent sees, the controller correlates, while a stream runs
	// through web from before the run to after it.
	t.Run("sample", func(t *testing.T) {
		var rep oam.SampleReport
		udp := func() (in, rcvbuf uint64) {
			m, err := oam.NodeStats(e.NS("d"))
			if err != nil {
				t.Fatal(err)
			}
			return m["Udp6InDatagrams"], m["Udp6RcvbufErrors"]
		}
		in0, rb0 := udp()
		res := testutil.Stream(t, seqstream, e.NS("s"), e.NS("d"), "fc00:4d::d", 7000, 1500, 500, func() {
			out, err := e.Run("trace", "--lab", e.Name, "--sample", "10", "--duration", "2s", "-o", "json", "web")
			if err != nil {
				t.Errorf("trace --sample: %v\n%s", err, out)
				return
			}
			if err := json.Unmarshal([]byte(out[:strings.LastIndexByte(out, '}')+1]), &rep); err != nil {
				t.Errorf("%v\n%s", err, out)
			}
		})
		// Every datagram reached d's UDP: received, or dropped by the
		// receiver's full socket buffer (a starved receiver on a loaded
		// machine is not the chain losing packets).
		in1, rb1 := udp()
		if res.Lost != 0 && (in1-in0)+(rb1-rb0) < uint64(res.Sent) {
			t.Errorf("stream lost %d, d's UDP saw %d + %d dropped for a full socket buffer of %d sent: %+v", res.Lost, in1-in0, rb1-rb0, res.Sent, res)
		} else if res.Lost != 0 {
			t.Logf("stream lost %d at the receiver's socket (Udp6RcvbufErrors +%d); the chain delivered all %d", res.Lost, rb1-rb0, res.Sent)
		}
		if rep.Packets == 0 || rep.Marked != (rep.Packets+9)/10 || rep.Incomplete != 0 {
			t.Fatalf("counted %d, marked %d, %d incomplete: want some, 1 in 10 of them, 0", rep.Packets, rep.Marked, rep.Incomplete)
		}
		var kinds []string
		for _, h := range rep.Hops {
			kinds = append(kinds, h.Kind+":"+h.Node)
			if h.Packets != rep.Marked {
				t.Errorf("hop %s %s: %d sampled packets, want %d", h.Kind, h.Node, h.Packets, rep.Marked)
			}
		}
		if got := strings.Join(kinds, " "); got != "headend:ingress sid:nfv1 sid:nfv2 egress:egress" {
			t.Errorf("hops %s", got)
		}
	})
}
