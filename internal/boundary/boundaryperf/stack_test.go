package boundaryperf

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/perf"
	"github.com/segchain/segchain/internal/testutil"
)

// TestBoundaryStackPath measures the filter on the path lab traffic takes
// (segchain perf's testbed injects XDP frames instead): a host namespace
// sends through a router namespace whose host-facing veth carries the
// boundary (nothing, TCX, or XDP ingress + TCX egress) to a third
// namespace, over the kernel stack: TCP bulk (GSO/GRO) and small UDP
// (the Go sender, one datagram per system call, is the bottleneck there).
// Per round the modes (and an A/A control: nothing again) run in random
// order; each mode's throughput is
// divided by the round's no-filter throughput. It reports figures and
// asserts nothing. Opt-in: SEGCHAIN_BOUNDARY_STACK=ROUNDS.
func TestBoundaryStackPath(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SEGCHAIN_BOUNDARY_STACK"))
	if rounds <= 0 {
		t.Skip("set SEGCHAIN_BOUNDARY_STACK=ROUNDS to measure the filter on the stack path")
	}
	testutil.RequireRoot(t)
	ha, r, hb := testutil.NewNetns(t, "h13b-a"), testutil.NewNetns(t, "h13b-r"), testutil.NewNetns(t, "h13b-b")
	testutil.Exec(t, "", "ip", "link", "add", "h13b-ra", "netns", r, "type", "veth", "peer", "name", "a0", "netns", ha)
	testutil.Exec(t, "", "ip", "link", "add", "h13b-rb", "netns", r, "type", "veth", "peer", "name", "b0", "netns", hb)
	for _, c := range [][]string{
		{ha, "ip", "addr", "add", "fd5a::1/64", "dev", "a0", "nodad"}, {ha, "ip", "link", "set", "a0", "up"},
		{ha, "ip", "-6", "route", "add", "default", "via", "fd5a::2"},
		{hb, "ip", "addr", "add", "fd5b::1/64", "dev", "b0", "nodad"}, {hb, "ip", "link", "set", "b0", "up"},
		{hb, "ip", "-6", "route", "add", "default", "via", "fd5b::2"},
		{r, "ip", "addr", "add", "fd5a::2/64", "dev", "h13b-ra", "nodad"}, {r, "ip", "link", "set", "h13b-ra", "up"},
		{r, "ip", "addr", "add", "fd5b::2/64", "dev", "h13b-rb", "nodad"}, {r, "ip", "link", "set", "h13b-rb", "up"},
		{r, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"},
	} {
		testutil.Exec(t, c[0], c[1:]...)
	}
	t.Cleanup(func() { _ = boundary.Remove(r) })
	var links []link.Link
	set := func(mode string) {
		for _, l := range links {
			_ = l.Close()
		}
		links = nil
		b := Filter()
		b.Trusted = []string{"h13b-rb"}
		if mode != "tcx" { // none, A/A (none again) and xdp
			b.Trusted = append(b.Trusted, "h13b-ra")
		}
		if err := boundary.Apply(r, b); err != nil {
			t.Fatal(err)
		}
		if mode == "xdp" {
			err := nsutil.Do(r, func() error {
				i, err := net.InterfaceByName("h13b-ra")
				if err != nil {
					return err
				}
				links, err = boundary.AttachXDP(i.Index)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, l := range links {
			_ = l.Close()
		}
	})
	if err := testutil.Ping(ha, netip.MustParseAddr("fd5b::1"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	window := 300 * time.Millisecond
	modes := []string{"none", "A/A", "tcx", "xdp"}
	for _, w := range []struct {
		name string
		run  func(time.Duration) float64
	}{{"TCP bulk", tcpBulk(t, ha, hb)}, {"UDP 18 B payload", udpFlood(t, ha, hb)}} {
		ratios := map[string][]float64{}
		var ref []float64
		rng := rand.New(rand.NewPCG(13, 0))
		for i := 0; i < rounds; i++ {
			got := map[string]float64{}
			order := append([]string(nil), modes...)
			rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
			for _, m := range order {
				set(m)
				w.run(50 * time.Millisecond) // settle
				got[m] = w.run(window)
			}
			if got["none"] == 0 {
				continue
			}
			ref = append(ref, got["none"])
			for _, m := range modes[1:] {
				ratios[m] = append(ratios[m], got[m]/got["none"])
			}
		}
		rs := perf.Summarize(ref)
		t.Logf("%s: no filter %.0f per second (median of %d)", w.name, rs.Median, rs.Runs)
		for _, m := range modes[1:] {
			s := perf.Summarize(ratios[m])
			t.Logf("%s: %s throughput ratio median %.4f CI95 [%.4f, %.4f] (n=%d)", w.name, m, s.Median, s.CI95[0], s.CI95[1], s.Runs)
		}
	}
}

// tcpBulk returns a function that sends TCP from ha to hb for d and
// returns bytes per second received.
func tcpBulk(t *testing.T, ha, hb string) func(time.Duration) float64 {
	var ln net.Listener
	if err := nsutil.Do(hb, func() (err error) { ln, err = net.Listen("tcp", "[fd5b::1]:5201"); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var got atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 256<<10)
				for {
					n, err := c.Read(buf)
					got.Add(int64(n))
					if err != nil {
						c.Close()
						return
					}
				}
			}()
		}
	}()
	var c net.Conn
	if err := nsutil.Do(ha, func() (err error) { c, err = net.Dial("tcp", "[fd5b::1]:5201"); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return sendFor(c, 256<<10, &got)
}

// udpFlood returns a function that sends UDP datagrams of 18 bytes of
// payload (80-byte frames) from ha to hb for d and returns datagrams per second
// received.
func udpFlood(t *testing.T, ha, hb string) func(time.Duration) float64 {
	var rc *net.UDPConn
	if err := nsutil.Do(hb, func() (err error) {
		rc, err = net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("fd5b::1"), Port: 5202})
		return
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	var got atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, err := rc.Read(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	var sc net.Conn
	if err := nsutil.Do(ha, func() (err error) { sc, err = net.Dial("udp", "[fd5b::1]:5202"); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return sendFor(sc, 18, &got)
}

// sendFor returns a function that writes size-byte buffers to c for d and
// returns how much got (what the receiver counts) grew per second.
func sendFor(c net.Conn, size int, got *atomic.Int64) func(time.Duration) float64 {
	return func(d time.Duration) float64 {
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			buf := make([]byte, size)
			for !stop.Load() {
				// A refused datagram (ICMP error) is not the end: go on.
				if _, err := c.Write(buf); err != nil && c.RemoteAddr().Network() == "tcp" {
					break
				}
			}
			close(done)
		}()
		g0 := got.Load()
		time.Sleep(d)
		g1 := got.Load()
		stop.Store(true)
		<-done
		return float64(g1-g0) / d.Seconds()
	}
}
