package oam_test

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/metrics"
	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/testutil"
)

// Continuous O-flag sampling exported to Prometheus: 1:100 of a 3000-
// datagram stream through web, a real Prometheus scraping the exporter.
// The headend's counts are the stream's (3000 packets, 30 marked), every
// hop's latency histogram counts each marked packet (within 1 % of the
// stream's 1 in 100: here exactly), none is incomplete, the stream lost
// nothing, and promtool accepts the exposition.
func TestSampleContinuousPrometheus(t *testing.T) {
	testutil.RequireTool(t, "prometheus")
	testutil.RequireTool(t, "promtool")
	e := setup(t, "../../examples/default.yaml", nil)
	const count, rate = 3000, 100
	s, _ := e.lab.Netns("s")
	d, _ := e.lab.Netns("d")

	m := metrics.NewSampling()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	target := l.Addr().String()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- oam.SampleContinuous(ctx, e.d, "web", oam.ContinuousOptions{Rate: rate, Every: 200 * time.Millisecond,
			Window: func(w oam.SampleWindow) { w.Export(m) }, Started: func() { close(started) }})
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("sample: %v", err)
	}
	prom := testutil.StartPrometheus(t, "segchain-sample", target)

	res := testutil.Stream(t, seqstream, s, d, "fc00:4d::d", 7000, count, 1000, nil)
	if res.Lost != 0 || res.Unique != count {
		t.Errorf("stream: %+v, want all %d received", res, count)
	}
	want := float64(count / rate)
	var last string
	for deadline := time.Now().Add(90 * time.Second); ; {
		hops, raw, err := prom.Query(`sum by (hop, node) (segchain_sample_hop_step_seconds_count{chain="web"})`, "chain")
		last = raw
		pk, _, _ := prom.Query(`segchain_sample_packets_total{chain="web"}`, "chain")
		mk, _, _ := prom.Query(`segchain_sample_marked_total{chain="web"}`, "chain")
		ok := err == nil && len(hops) == 3 && pk[""] == count && mk[""] == want
		for _, v := range hops {
			ok = ok && math.Abs(v-want) <= 0.01*want
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus: hops %v, packets %v, marked %v; want 3 hops × %v of %d packets\nlast answer %s", hops, pk, mk, want, count, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if inc, _, err := prom.Query(`segchain_sample_incomplete_total{chain="web"}`, "chain"); err != nil || inc[""] != 0 {
		t.Errorf("incomplete %v (%v), want 0", inc, err)
	}
	// The exposition itself, by Prometheus' own checker.
	resp, err := http.Get("http://" + target + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	chk := exec.Command("promtool", "check", "metrics")
	chk.Stdin = strings.NewReader(string(body))
	if out, err := chk.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	if !strings.Contains(string(body), `segchain_sample_hop_step_seconds_bucket{chain="web",hop="1",kind="sid",node="nfv1"`) {
		t.Errorf("no step histogram of hop 1 (nfv1) in the exposition:\n%s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
