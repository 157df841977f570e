package oam_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/testutil"
)

const seqstream = "../../scripts/seqstream.py"

// sampled runs O-flag sampling of chain while send runs, from before its
// first packet to after its last.
func (e *env) sampled(t *testing.T, chain string, rate uint32, send func()) *oam.SampleReport {
	t.Helper()
	return e.sampledWith(t, chain, oam.SampleOptions{Rate: rate}, send)
}

// sampledStream samples chain 1 in rate while count datagrams flow s → d
// (port 7000), captured as they arrive at at's eth-ingress (SRv6 packets
// only): the report, the stream's result and the capture.
func (e *env) sampledStream(t *testing.T, chain string, rate uint32, count int, at string) (*oam.SampleReport, testutil.StreamResult, string) {
	t.Helper()
	atNS, _ := e.lab.Netns(at)
	s, _ := e.lab.Netns("s")
	d, _ := e.lab.Netns("d")
	var res testutil.StreamResult
	var pcap string
	rep := e.sampled(t, chain, rate, func() {
		c := testutil.StartInboundCapture(t, atNS, "eth-ingress", "ip6[6] == 43 and ip6[40+2] == 4", count)
		res = testutil.Stream(t, seqstream, s, d, "fc00:4d::d", 7000, count, 1000, nil)
		pcap = c.Wait(5 * time.Second)
	})
	return rep, res, pcap
}

// sampledWith is sampled with options (Rate, Marker).
func (e *env) sampledWith(t *testing.T, chain string, o oam.SampleOptions, send func()) *oam.SampleReport {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	type result struct {
		r   *oam.SampleReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		o.Duration, o.Started = 10*time.Minute, func() { close(started) }
		r, err := oam.Sample(ctx, e.d, chain, o)
		done <- result{r, err}
	}()
	select {
	case <-started:
	case res := <-done:
		t.Fatalf("sample %s: %v", chain, res.err)
	}
	send()
	cancel()
	res := <-done
	if res.err != nil {
		t.Fatalf("sample %s: %v", chain, res.err)
	}
	return res.r
}

// O-flag sampling at 1:100 of a stream through the web chain: the
// headend counted every packet of the stream and marked exactly 1 in 100
// of them; every segment saw each marked packet (counts equal, none
// incomplete); the stream lost nothing. tshark on r1 (after the headend)
// reads the SRH flags: exactly the marked packets carry the O-flag (0x20).
func TestSampleOFlag(t *testing.T) {
	e := setup(t, "../../examples/default.yaml", nil)
	testutil.RequireTool(t, "tshark")
	const count, rate = 2000, 100
	rep, res, pcap := e.sampledStream(t, "web", rate, count, "r1")
	if res.Lost != 0 || res.Unique != count {
		t.Errorf("stream: %+v, want all %d received", res, count)
	}
	if rep.Packets != count || rep.Marked != count/rate || rep.Incomplete != 0 {
		t.Errorf("headend counted %d packets, marked %d, %d incomplete; want %d, %d, 0", rep.Packets, rep.Marked, rep.Incomplete, count, count/rate)
	}
	if rep.Marker != oam.MarkerBoundary {
		t.Errorf("marked by %q (%s), want the boundary filter", rep.Marker, rep.MarkerNote)
	}
	var kinds []string
	for _, h := range rep.Hops {
		kinds = append(kinds, h.Kind+":"+h.Node)
		if h.Packets != rep.Marked {
			t.Errorf("hop %s %s: %d sampled packets, want %d", h.Kind, h.Node, h.Packets, rep.Marked)
		}
		if h.Kind != oam.KindHeadend && (h.StepUS == nil || h.AtUS == nil || h.StepUS.P50 <= 0 || h.AtUS.P50 < h.StepUS.P50) {
			t.Errorf("hop %s %s: latencies %+v %+v", h.Kind, h.Node, h.StepUS, h.AtUS)
		}
	}
	if got := strings.Join(kinds, " "); got != "headend:ingress sid:nfv1 sid:nfv2 egress:egress" {
		t.Errorf("hops %s", got)
	}
	flags := map[string]int{}
	for _, p := range testutil.Tshark(t, pcap, "ipv6.routing.srh.flags") {
		flags[p.First("ipv6.routing.srh.flags")]++
	}
	if flags["0x20"] != count/rate || flags["0x00"] != count-count/rate {
		t.Errorf("r1 saw SRH flags %v, want 0x20 × %d and 0x00 × %d", flags, count/rate, count-count/rate)
	}
}

// The TCX marker (the fallback where the boundary filter cannot mark)
// counts a chain whose SRH carries an HMAC, never marks it (the HMAC
// covers the flags: a packet marked after the kernel signed it would
// fail verification), and its traffic still arrives.
func TestSampleSkipsHMAC(t *testing.T) {
	e := setup(t, "../../examples/hmac.yaml", nil)
	s, _ := e.lab.Netns("s")
	d, _ := e.lab.Netns("d")
	var res testutil.StreamResult
	rep := e.sampledWith(t, "signed", oam.SampleOptions{Rate: 1, Marker: oam.MarkerTCX}, func() {
		res = testutil.Stream(t, seqstream, s, d, "fc00:4d::d", 7000, 200, 1000, nil)
	})
	if res.Lost != 0 {
		t.Errorf("stream: %+v", res)
	}
	if rep.Marked != 0 || rep.HMAC != 200 || rep.Packets != 0 {
		t.Errorf("marked %d, hmac %d, counted %d: want 0, 200, 0 (%s)", rep.Marked, rep.HMAC, rep.Packets, fmt.Sprint(rep.Hops))
	}
}
