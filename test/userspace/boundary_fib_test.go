package userspace

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/boundary"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// TestPrivilegedBoundaryLeakSeesFIBPath: the frames a userspace service
// sends, forwarded by FIB from its loop veth's TCX (issue 32), still pass
// the egress interface's TCX egress, where the SR domain boundary's leak
// check judges them as it judges routed ones: with the next segment's
// prefix as a locator of the domain and the service node's output as a
// boundary interface, nothing reaches the sink and every frame is counted
// leak-sid, on both paths.
func TestPrivilegedBoundaryLeakSeesFIBPath(t *testing.T) {
	testutil.RequirePrivileged(t)
	tp := svctest.New(t, "h32b")
	t.Cleanup(func() { _ = boundary.Remove(tp.NFV) })
	const frames = 4
	for _, stack := range []bool{false, true} {
		svc, err := srv6svc.Listen(srv6svc.Config{Name: "leak", Netns: tp.NFV, Interfaces: []string{tp.NIn},
			SIDs: []netip.Prefix{netip.MustParsePrefix("fc00:5::100/128")}, Queues: 1, StackForward: stack})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- svc.Serve(ctx, func(*srv6svc.Packet) srv6svc.Verdict { return srv6svc.Forward }) }()
		// Every interface but the output trusted (the binding's pair
		// included): the filter sits on tp.NOut only.
		b := nodestate.Boundary{Locators: []netip.Prefix{netip.MustParsePrefix("fc00:9::/64")},
			Trusted: []string{tp.NIn, "lo", "s6svc*"}}
		if err := boundary.Apply(tp.NFV, b); err != nil {
			t.Fatal(err)
		}
		if err := boundary.ClearCounters(tp.NFV); err != nil {
			t.Fatal(err)
		}
		c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", frames)
		tp.Send(t, "", `[srv6("fc00:5::100", [FINAL, NEXT, "fc00:5::100"], 2, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=1000+i, dport=53)) for i in range(4)]`)
		var leaked uint64
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && leaked < frames; time.Sleep(50 * time.Millisecond) {
			cs, err := boundary.Counters(tp.NFV)
			if err != nil {
				t.Fatal(err)
			}
			leaked = 0
			for _, bc := range cs {
				if bc.Iface == tp.NOut && bc.Direction == "out" && bc.Reason == "leak-sid" {
					leaked += bc.Packets
				}
			}
		}
		got := testutil.Tshark(t, c.Wait(time.Second), "ipv6.dst")
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		cn := svc.Counters()
		if err := svc.Release(); err != nil {
			t.Errorf("release: %v", err)
		}
		if cn.TX != frames || leaked != frames || len(got) != 0 {
			t.Errorf("stack=%v: service sent %d, boundary counted %d leak-sid on %s, sink got %d; want %d, %d, 0",
				stack, cn.TX, leaked, tp.NOut, len(got), frames, frames)
		}
	}
}
