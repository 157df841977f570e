package srv6svc

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
)

// serve binds cfg in tp's NFV namespace and serves h until the test ends.
func serve(t *testing.T, tp *svctest.Topo, cfg Config, h Handler, bh BatchHandler) *Service {
	t.Helper()
	cfg.Netns = tp.NFV
	if cfg.Interfaces == nil {
		cfg.Interfaces = []string{tp.NIn}
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Logf("mode %s, %d queue(s)", s.Mode(), s.Queues())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		if bh != nil {
			done <- s.ServeBatch(ctx, bh)
		} else {
			done <- s.Serve(ctx, h)
		}
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := s.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
		// The last binding gone, nothing of the namespace's steering
		// state stays pinned (bpffs outlives the namespace).
		if bs, err := Status(tp.NFV); err != nil || len(bs) > 0 {
			return // another service of the test still serves there
		}
		if dir, err := pinDir(tp.NFV); err == nil {
			if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
				t.Errorf("pinned after the last Release: %v", left)
			}
		}
	})
	return s
}

func sid(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestPrivilegedForward(t *testing.T) {
	for _, tc := range []struct {
		name            string
		batch, realtime bool
	}{{"sync", false, false}, {"batch", true, false}, {"sync-realtime", false, true}, {"batch-realtime", true, true}} {
		batch := tc.batch
		t.Run(tc.name, func(t *testing.T) {
			tp := svctest.New(t, "h17s")
			var got []string
			h := func(p *Packet) Verdict {
				got = append(got, p.Outer().Dst.String()+"/"+p.Segment(0).String())
				return Forward
			}
			var bh BatchHandler
			if batch {
				bh = func(ps []*Packet, vs []Verdict) {
					for i, p := range ps {
						vs[i] = h(p)
					}
				}
			}
			policy := make(chan uint32, MaxQueues)
			start := func(int) { // on the worker's thread
				if a, err := unix.SchedGetAttr(0, 0); err == nil {
					policy <- a.Policy
				}
			}
			s := serve(t, tp, Config{Name: "fwd", SIDs: []netip.Prefix{sid("fc00:5::100/128")}, Realtime: tc.realtime, WorkerStart: start}, h, bh)
			// As root (CAP_SYS_NICE) the workers get SCHED_FIFO; the mode
			// says so, and only when it was asked for.
			if want := " sched=fifo"; tc.realtime != strings.HasSuffix(s.Mode(), want) {
				t.Errorf("mode %q: realtime %v, want suffix %q only with realtime", s.Mode(), tc.realtime, want)
			}
			for q := 0; q < s.Queues(); q++ {
				want := uint32(unix.SCHED_NORMAL)
				if tc.realtime {
					want = unix.SCHED_FIFO
				}
				select {
				case p := <-policy:
					if p != want {
						t.Errorf("worker scheduling policy %d, want %d", p, want)
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("worker %d did not start", q)
				}
			}
			c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 5)
			tp.Send(t, "", `[srv6("fc00:5::100", [FINAL, NEXT, "fc00:5::100"], 2, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=1000+i, dport=53)/Raw(b"x"*20)) for i in range(5)]`)
			pkts := testutil.Tshark(t, c.Wait(5*time.Second), "ipv6.dst", "ipv6.hlim", "ipv6.routing.segleft", "udp.srcport")
			if len(pkts) != 5 {
				t.Fatalf("sink got %d packets, want 5; counters %+v", len(pkts), s.Counters())
			}
			for _, p := range pkts {
				if p.First("ipv6.dst") != svctest.Next || p.First("ipv6.routing.segleft") != "1" || p.First("ipv6.hlim") != "63" {
					t.Errorf("packet %v: want dst %s, SL 1, hop limit 63", p, svctest.Next)
				}
			}
			if cn := s.Counters(); cn.RX != 5 || cn.TX != 5 || cn.Steered != 5 {
				t.Errorf("counters %+v: want 5 steered, rx, tx", cn)
			}
			if len(got) != 5 || got[0] != "fc00:5::100/"+svctest.Final {
				t.Errorf("handler saw %v", got)
			}
		})
	}
}

// TestPrivilegedConflictTyped: a SID overlapping another binding's is
// refused with ErrConflict, and nothing of the refused binding stays.
func TestPrivilegedConflictTyped(t *testing.T) {
	tp := svctest.New(t, "h7cf")
	serve(t, tp, Config{Name: "wide", SIDs: []netip.Prefix{netip.MustParsePrefix("fc00:5::/112")}, Queues: 1},
		func(*Packet) Verdict { return Forward }, nil)
	s, err := Listen(Config{Name: "narrow", Netns: tp.NFV, Interfaces: []string{tp.NIn}, Queues: 1,
		SIDs: []netip.Prefix{netip.MustParsePrefix("fc00:5::100/128")}})
	if err == nil {
		s.Release()
		t.Fatal("an overlapping SID was bound")
	}
	if !errors.Is(err, ErrConflict) || errors.Is(err, ErrConfig) {
		t.Errorf("overlap: %v, want ErrConflict", err)
	}
	if bs, _ := Status(tp.NFV); len(bs) != 1 {
		t.Errorf("bindings after the refusal: %+v", bs)
	}
}
