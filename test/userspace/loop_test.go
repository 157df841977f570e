package userspace_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/dataplane/userspace"
	"github.com/segchain/segchain/internal/localsid"
	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// serveIn binds cfg on tp's NFV node (its tester-facing interface) and
// serves h until the test ends.
func serveIn(t *testing.T, tp *svctest.Topo, cfg srv6svc.Config, h srv6svc.Handler) *srv6svc.Service {
	t.Helper()
	cfg.Netns, cfg.Interfaces, cfg.Queues = tp.NFV, []string{tp.NIn}, 1
	s, err := srv6svc.Listen(cfg)
	if err != nil {
		t.Fatalf("Listen %s: %v", cfg.Name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve %s: %v", cfg.Name, err)
		}
		if err := s.Release(); err != nil {
			t.Errorf("Release %s: %v", cfg.Name, err)
		}
	})
	return s
}

// loopWatchdog: more passes than any hop limit allows. A frame seen this
// often circulates without end; the handler drops it itself so that the
// test ends (and fails) instead of spinning.
const loopWatchdog = 300

// TestPrivilegedOwnSIDLoopDies: a handler whose Forward leaves the
// destination on its own SID (it moves Segments Left back by one first, so
// End lands on the same SID again) hands every frame it sends straight
// back to itself through the loop side's TCX. Each hand-over is a hop: the
// frame dies when its hop limit runs out, after exactly as many passes as
// it arrived with, dropped and counted (drop-hop-limit in sid show and the
// binding's counters), nothing sent on. Without the decrement the frame
// circulates until the watchdog in the handler stops it, and the test
// fails on the pass count.
func TestPrivilegedOwnSIDLoopDies(t *testing.T) {
	testutil.RequireScapy(t)
	tp := svctest.New(t, "h12o")
	const own, hlim = "fc00:5::100", 64
	var passes atomic.Int64
	var mu sync.Mutex
	var seen []uint8 // the hop limit of each pass
	tripped := make(chan struct{})
	h := func(p *srv6svc.Packet) srv6svc.Verdict {
		n := passes.Add(1)
		mu.Lock()
		seen = append(seen, p.Outer().HopLimit)
		mu.Unlock()
		if n == loopWatchdog {
			close(tripped)
		}
		if n >= loopWatchdog {
			return srv6svc.Drop
		}
		if err := p.SetSegmentsLeft(p.SRH().SegmentsLeft + 1); err != nil {
			t.Errorf("SetSegmentsLeft: %v", err)
			return srv6svc.Drop
		}
		return srv6svc.Forward // destination ← Segment List[SL]: own again
	}
	s := serveIn(t, tp, srv6svc.Config{Name: "selfloop", SIDs: []netip.Prefix{netip.MustParsePrefix(own + "/128")}}, h)
	// Segment List [FINAL, own, TIN], SL 1: own is active, TIN visited.
	tp.Send(t, "", fmt.Sprintf(`[srv6(%q, [FINAL, %q, TIN], 1, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=7, dport=7), hlim=%d)]`, own, own, hlim))
	deadline := time.After(20 * time.Second)
	for s.Counters().DropHopLimit == 0 {
		select {
		case <-tripped:
			t.Fatalf("the frame circulated %d+ times between the service and the loop side: the hand-over does not bound it (counters %+v)", loopWatchdog, s.Counters())
		case <-deadline:
			t.Fatalf("neither dropped nor tripped the watchdog: passes %d, counters %+v", passes.Load(), s.Counters())
		case <-time.After(10 * time.Millisecond):
		}
	}
	c := s.Counters()
	mu.Lock()
	defer mu.Unlock()
	if passes.Load() != hlim || c.DropHopLimit != 1 || c.RX != hlim || c.TX != hlim {
		t.Errorf("passes %d, counters %+v: want %d passes (one per hop the frame had), rx = tx = %d, drop-hop-limit 1", passes.Load(), c, hlim, hlim)
	}
	for i, hl := range seen {
		if int(hl) != hlim-i {
			t.Errorf("pass %d saw hop limit %d, want %d (one less per hand-over)", i, hl, hlim-i)
			break
		}
	}
	// What `segchain sid show` and status print.
	bs, err := srv6svc.Status(tp.NFV)
	if err != nil || len(bs) != 1 {
		t.Fatalf("Status: %v %+v", err, bs)
	}
	line := localsid.FormatEntry(userspace.Entry(bs[0], bs[0].SIDs[0]))
	if !strings.Contains(line, "drop-hop-limit 1") {
		t.Errorf("sid show line lacks drop-hop-limit 1: %s", line)
	}
}

// TestPrivilegedLocalChainsHopLimit: what the hop limit must not break.
// Two services on one node chained (A then B), a list that visits the node
// three times (A, B, then A again through another of A's SIDs), and one
// that goes from one of A's SIDs to another: all arrive at the sink (tshark
// reads them), each hand-over between services one hop, the FIB forward
// out of the node one more, and nothing counted as drop-hop-limit.
func TestPrivilegedLocalChainsHopLimit(t *testing.T) {
	testutil.RequireScapy(t)
	tp := svctest.New(t, "h12c")
	var mu sync.Mutex
	visits := map[string][]string{} // UDP source port → "binding:SID" per pass
	handler := func(name string) srv6svc.Handler {
		return func(p *srv6svc.Packet) srv6svc.Verdict {
			port := ""
			if f, ok := p.InnerFlow(); ok {
				port = fmt.Sprint(f.SrcPort)
			}
			mu.Lock()
			visits[port] = append(visits[port], name+":"+p.Outer().Dst.String())
			mu.Unlock()
			return srv6svc.Forward
		}
	}
	a := serveIn(t, tp, srv6svc.Config{Name: "a", SIDs: []netip.Prefix{netip.MustParsePrefix("fc00:5::100/128"),
		netip.MustParsePrefix("fc00:5::101/128")}}, handler("a"))
	b := serveIn(t, tp, srv6svc.Config{Name: "b", SIDs: []netip.Prefix{netip.MustParsePrefix("fc00:5::200/128")}}, handler("b"))
	cases := []struct {
		port  int
		segs  string // wire order, the first SID last
		visit string
	}{
		{1001, `[NEXT, "fc00:5::200", "fc00:5::100"]`, "a:fc00:5::100 b:fc00:5::200"},
		{1002, `[NEXT, "fc00:5::101", "fc00:5::200", "fc00:5::100"]`, "a:fc00:5::100 b:fc00:5::200 a:fc00:5::101"},
		{1003, `[NEXT, "fc00:5::101", "fc00:5::100"]`, "a:fc00:5::100 a:fc00:5::101"},
	}
	var pkts []string
	for _, c := range cases {
		n := len(strings.Split(c.segs, ",")) - 1
		pkts = append(pkts, fmt.Sprintf(`srv6("fc00:5::100", %s, %d, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=%d, dport=9))`, c.segs, n, c.port))
	}
	cp := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", len(cases))
	tp.Send(t, "", "["+strings.Join(pkts, ", ")+"]")
	got := testutil.Tshark(t, cp.Wait(10*time.Second), "ipv6.dst", "ipv6.hlim", "ipv6.routing.segleft", "udp.srcport")
	if len(got) != len(cases) {
		t.Fatalf("sink got %d frames, want %d; a %+v b %+v; visits %v", len(got), len(cases), a.Counters(), b.Counters(), visits)
	}
	byPort := map[string]testutil.Packet{}
	for _, p := range got {
		byPort[p.First("udp.srcport")] = p
	}
	mu.Lock()
	defer mu.Unlock()
	for _, c := range cases {
		port := fmt.Sprint(c.port)
		v := strings.Join(visits[port], " ")
		if v != c.visit {
			t.Errorf("port %d: visited %q, want %q", c.port, v, c.visit)
		}
		hops := len(visits[port]) // hand-overs + the forward out
		p, ok := byPort[port]
		if !ok {
			t.Errorf("port %d: not at the sink", c.port)
			continue
		}
		if p.First("ipv6.dst") != svctest.Next || p.First("ipv6.routing.segleft") != "0" || p.First("ipv6.hlim") != fmt.Sprint(64-hops) {
			t.Errorf("port %d: %v, want dst %s, SL 0, hop limit %d", c.port, p, svctest.Next, 64-hops)
		}
	}
	if ca, cb := a.Counters(), b.Counters(); ca.DropHopLimit+cb.DropHopLimit != 0 {
		t.Errorf("drop-hop-limit: a %d, b %d, want 0", ca.DropHopLimit, cb.DropHopLimit)
	}
}
