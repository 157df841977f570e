package pools

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/health"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/pool/datapath"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// TestFailoverBench is scripts/failover-bench.sh's measurement, not a
// test: it asserts nothing about time and runs only with
// SEGCHAIN_FAILOVER_BENCH=1. For each health kind and failure (the SF's
// link down; its forwarding dropped by nft), under a steady stream of
// flows through a pool of three End.AD firewalls it reports the failed
// instance's loss in ms per flow, the detection time, the loss of the
// other flows, flows moved on failure and on recovery, and the share of
// probe packets on the failed instance's link.
func TestFailoverBench(t *testing.T) {
	if os.Getenv("SEGCHAIN_FAILOVER_BENCH") == "" {
		t.Skip("a benchmark: run scripts/failover-bench.sh (SEGCHAIN_FAILOVER_BENCH=1)")
	}
	flows, _ := strconv.Atoi(envOr("FLOWS", "30"))
	rate, _ := strconv.Atoi(envOr("RATE", "200")) // datagrams per second per flow
	// HOG=n: the checker's process starved as on a loaded host (hog in
	// load_test.go: one P, n spinners). The stream's senders starve too,
	// so only detection and false transitions mean anything then.
	hogs, _ := strconv.Atoi(envOr("HOG", "0"))
	le := labenv.New(t, labenv.Options{File: "testdata/bench.yaml", Prefix: "s9b"})
	rows := []string{"| health | failure | detection (ms) | before it: SRTT / timeout (ms) / late wake-ups | failed instance's flows | their loss per flow, ms (mean / max) | other flows' loss (datagrams) | flows moved on failure / on recovery | probe share of the instance link's packets | transitions of the healthy instances |",
		"|---|---|---:|---|---:|---|---:|---|---:|---:|"}
	for _, c := range []struct{ kind, failure string }{
		{"carrier", "link"}, {"echo", "link"}, {"srv6", "link"}, {"srv6", "forward"}, {"carrier", "forward"},
	} {
		stop := func() {}
		if hogs > 0 {
			stop = hog(t, hogs)
		}
		rows = append(rows, benchOne(t, le, c.kind, c.failure, flows, rate))
		stop()
	}
	t.Logf("failover (%d flows × %d pps, %d hog goroutines, machine shared):\n%s", flows, rate, hogs, strings.Join(rows, "\n"))
	fmt.Println(strings.Join(rows, "\n"))
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func benchOne(t *testing.T, le *labenv.Env, kind, failure string, flows, rate int) string {
	d := *le.Domain
	svcs := map[string]*config.Service{}
	for k, v := range d.Services {
		c := *v
		svcs[k] = &c
	}
	d.Services = svcs
	d.Services["fw1"].Health = &config.Health{Kind: kind}
	if _, err := le.Session(&d).Apply(context.Background()); err != nil {
		t.Fatalf("apply (%s): %v", kind, err)
	}
	ns := le.NS("ingress")
	specs, err := datapath.Specs(ns)
	if err != nil || len(specs) != 1 {
		t.Fatalf("pools %v %v", specs, err)
	}
	pl := specs[0].Pool
	he, err := datapath.Reopen(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer he.Close()
	if err := he.ForgetMoved(0); err != nil { // the last run's
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		health.RunNode(ctx, ns, func(n string) (string, bool) { return le.NS(n), true }, slog.New(slog.DiscardHandler), nil)
	}()
	defer func() { cancel(); <-done }()
	rep := reportOf(t, ns)
	waitReport(t, rep, "fw2", true, false)

	// Receiver in d: per flow, the sequence numbers seen.
	var mu sync.Mutex
	seen := map[int]map[uint32]bool{}
	var rc *net.UDPConn
	if err := nsutil.Do(le.NS("d"), func() error {
		var err error
		rc, err = net.ListenUDP("udp6", &net.UDPAddr{Port: dport})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	go func() {
		b := make([]byte, 64)
		for {
			n, from, err := rc.ReadFromUDP(b)
			if err != nil {
				return
			}
			if n >= 4 {
				mu.Lock()
				if seen[from.Port] == nil {
					seen[from.Port] = map[uint32]bool{}
				}
				seen[from.Port][binary.BigEndian.Uint32(b)] = true
				mu.Unlock()
			}
		}
	}()
	// Senders in s: one socket per flow, rate datagrams/s each.
	base := 50000
	sent := make([]uint32, flows)
	sctx, stopSend := context.WithCancel(context.Background())
	var swg sync.WaitGroup
	for i := 0; i < flows; i++ {
		var c *net.UDPConn
		if err := nsutil.Do(le.NS("s"), func() error {
			var err error
			c, err = net.DialUDP("udp6", &net.UDPAddr{IP: srcAddr.AsSlice(), Port: base + i}, &net.UDPAddr{IP: dstAddr.AsSlice(), Port: dport})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		swg.Add(1)
		go func() {
			defer swg.Done()
			defer c.Close()
			tk := time.NewTicker(time.Second / time.Duration(rate))
			defer tk.Stop()
			b := make([]byte, 16)
			for seq := uint32(0); ; seq++ {
				binary.BigEndian.PutUint32(b, seq)
				c.Write(b)
				sent[i] = seq + 1
				select {
				case <-sctx.Done():
					return
				case <-tk.C:
				}
			}
		}()
	}
	linkPkts := func() uint64 { // packets ingress sent toward nfv2 (data + probes), read at once
		var n uint64
		if err := nsutil.Do(ns, func() error {
			l, err := netlink.LinkByName("eth-nfv2")
			if err == nil && l.Attrs().Statistics != nil {
				n = l.Attrs().Statistics.TxPackets
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	time.Sleep(200 * time.Millisecond)
	la := linkPkts()
	sa, _ := he.Stats(0, 3)
	time.Sleep(time.Second)
	l0 := linkPkts()
	st0, _ := he.Stats(0, 3)
	// The detector's view of fw2 just before the failure (numbered probes).
	var srtt, timeout time.Duration
	var lateWakes uint64
	for _, s := range rep().Instances {
		if s.Instance == "fw2" {
			srtt, timeout, lateWakes = s.SRTT, s.Timeout, s.LateWakeups
		}
	}
	var failAt time.Time
	var undo []string
	switch failure {
	case "link":
		// In-process (netlink): the failure's instant is known to the µs.
		if err := nsutil.Do(le.NS("sf2"), func() error {
			l, err := netlink.LinkByName("eth-nfv2")
			if err != nil {
				return err
			}
			failAt = time.Now()
			return netlink.LinkSetDown(l)
		}); err != nil {
			t.Fatal(err)
		}
		// Link down took the SF's routes with it: back up, the lab's
		// default route toward its proxy again.
		undo = []string{"sh", "-c", "ip link set eth-nfv2 up && ip -6 route replace ::/0 via fc00:38::3 dev eth-nfv2"}
	case "forward":
		// nft commits just before it exits: detection counts from then
		// (an underestimate by nft's exit).
		testutil.Exec(t, le.NS("sf2"), "nft", "add table inet s9b; add chain inet s9b s9bfwd { type filter hook forward priority 0; policy drop; }")
		failAt = time.Now()
		undo = []string{"nft", "delete", "table", "inet", "s9b"}
	}
	detect := "never"
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		var hit *health.InstanceStatus
		for _, s := range rep().Instances {
			if s.Instance == "fw2" && !s.Up && s.Last != nil {
				hit = &s
			}
		}
		if hit != nil {
			detect = fmt.Sprintf("%.1f", float64(hit.Last.At.Sub(failAt).Microseconds())/1000)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Second)
	st1, _ := he.Stats(0, 3)
	l1 := linkPkts()
	testutil.Exec(t, le.NS("sf2"), undo...)
	if detect != "never" {
		waitReport(t, rep, "fw2", true, true)
	}
	falseTr := uint64(0)
	for _, s := range rep().Instances {
		if s.Instance != "fw2" {
			falseTr += s.Transitions
		}
	}
	st2, _ := he.Stats(0, 3)
	time.Sleep(500 * time.Millisecond)
	st3, _ := he.Stats(0, 3)
	stopSend()
	swg.Wait()
	time.Sleep(300 * time.Millisecond)

	// Per flow: the instance by the model, the datagrams missing.
	var failedLoss []float64
	otherLost := 0
	movedFail, movedBack := 0, 0
	for i := 0; i < flows; i++ {
		h := flowOf(base + i).Hash(pl.Symmetric)
		first := pl.Decide(pl.AllLive(), h).Instance
		if pl.Decide(pl.AllLive()&^2, h).Instance != first {
			movedFail++
		}
		mu.Lock()
		got := len(seen[base+i])
		mu.Unlock()
		lost := int(sent[i]) - got
		if first == 1 {
			failedLoss = append(failedLoss, float64(lost)*1000/float64(rate))
		} else {
			otherLost += lost
		}
	}
	// After recovery the moved flows stay (the headend remembers them):
	// flows back on fw2 = its packets in the 500 ms after, per flow's rate.
	movedBack = int((st3.Instances[1] - st2.Instances[1]) * 2 / uint64(rate))
	sort.Float64s(failedLoss)
	mean, mx := 0.0, 0.0
	for _, v := range failedLoss {
		mean += v
		mx = max(mx, v)
	}
	if len(failedLoss) > 0 {
		mean /= float64(len(failedLoss))
	}
	_, _ = st1, l1
	data := st0.Instances[1] - sa.Instances[1]
	link := l0 - la
	share := "—"
	if link > 0 && link >= data {
		share = fmt.Sprintf("%.2f%% (%d of %d)", 100*float64(link-data)/float64(link), link-data, link)
	}
	det := "—"
	if timeout > 0 {
		det = fmt.Sprintf("%.2f / %.1f / %d", float64(srtt.Microseconds())/1000, float64(timeout.Microseconds())/1000, lateWakes)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %d | %.0f / %.0f | %d | %d / %d | %s | %d |", kind, failure, detect, det, len(failedLoss), mean, mx, otherLost, movedFail, movedBack, share, falseTr)
}
