package srv6svc

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
)

// fibFwdFrames: what TestPrivilegedFIBForwardSameBytes sends, and how many
// of them reach the sink (a hop limit of 1 runs out at the service's node:
// neither path forwards it).
const (
	fibFwdFrames = `[srv6("fc00:5::100", [FINAL, NEXT, "fc00:5::100"], 2, IPv6(src="2001:db8::1", dst="2001:db8::2", fl=0x12345+i)/UDP(sport=1000+i, dport=53)/Raw(b"x"*(20+40*i))) for i in range(4)] + ` +
		`[srv6("fc00:5::100", [NEXT, "fc00:5::100"], 1, IP(src="10.0.0.1", dst="10.0.0.2", tos=0x28)/TCP(sport=4000, dport=80, flags="S")),` +
		` srv6("fc00:5::100", [FINAL, "fc00:5::100"], 1, IPv6(src="2001:db8::1", dst="2001:db8::3")/ICMPv6EchoRequest(id=7, seq=1), hlim=2),` +
		` srv6("fc00:5::100", [FINAL, NEXT, "fc00:5::100"], 2, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=9, dport=9), hlim=1),` +
		` hbh(srv6("fc00:5::100", [FINAL, NEXT, "fc00:5::100"], 2, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=7, dport=7)))]`
	// fibFwdSetup: hbh puts a hop-by-hop options header before the SRH
	// (the FIB path leaves such a frame to the stack).
	fibFwdSetup = `
def hbh(p):
    ip = p[IPv6]
    rest = ip.payload
    ip.remove_payload()
    ip.nh = 0
    return p/IPv6ExtHdrHopByHop(nh=43)/rest
`
	fibFwdDelivered = 7
	fibFwdStacked   = 1 // delivered through the stack on the FIB path too: the hop-by-hop one
)

// TestPrivilegedFIBForwardSameBytes: the frames a service sends, forwarded
// by FIB from the loop side's TCX (the default), arrive byte for byte as
// the stack routed them before (Config.StackForward): same MACs, hop limit
// decremented once, same headers and payload; a hop limit that runs out
// and hop-by-hop options are left to the stack on both paths. An nft counter on the node's FORWARD
// hook shows which path each took: the FIB path does not cross it.
func TestPrivilegedFIBForwardSameBytes(t *testing.T) {
	testutil.RequireTool(t, "nft")
	tp := svctest.New(t, "h32f")
	rules := "table ip6 s9fwd {\n chain fw {\n  type filter hook forward priority 0;\n  ip6 daddr fc00:9::/64 counter\n }\n}\n"
	path := t.TempDir() + "/rules.nft"
	if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	got := map[bool][][]byte{}
	for _, stack := range []bool{true, false} {
		cfg := Config{Name: "fibfwd", SIDs: []netip.Prefix{sid("fc00:5::100/128")}, Queues: 1, StackForward: stack,
			Netns: tp.NFV, Interfaces: []string{tp.NIn}}
		s, err := Listen(cfg)
		if err != nil {
			t.Fatalf("Listen: %v", err)
		}
		want := " fwd=fib"
		if stack {
			want = " fwd=stack"
		}
		if !strings.Contains(s.Mode(), want) {
			t.Errorf("mode %q, want %q", s.Mode(), want)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, func(*Packet) Verdict { return Forward }) }()
		// A fresh table: its rule's counter starts at 0.
		testutil.Exec(t, tp.NFV, "sh", "-c", "nft delete table ip6 s9fwd 2>/dev/null; nft -f "+path)
		c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", fibFwdDelivered)
		tp.Send(t, fibFwdSetup, fibFwdFrames)
		got[stack] = testutil.PcapFrames(t, c.Wait(5*time.Second))
		counted := testutil.Exec(t, tp.NFV, "nft", "list", "table", "ip6", "s9fwd")
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		cn := s.Counters()
		if err := s.Release(); err != nil {
			t.Errorf("Release: %v", err)
		}
		if len(got[stack]) != fibFwdDelivered || cn.TX != fibFwdDelivered+1 {
			t.Fatalf("stack=%v: sink got %d frames, want %d; counters %+v", stack, len(got[stack]), fibFwdDelivered, cn)
		}
		// The stack path crosses FORWARD with every frame it delivers; the
		// FIB path only with the one it leaves to the stack (hop-by-hop
		// options; the one whose hop limit ran out is dropped by the stack
		// before FORWARD on both).
		wantCount := fmt.Sprintf("packets %d ", fibFwdStacked)
		if stack {
			wantCount = fmt.Sprintf("packets %d ", fibFwdDelivered)
		}
		if !strings.Contains(counted, wantCount) {
			t.Errorf("stack=%v: FORWARD counter: %s, want %q", stack, counted, wantCount)
		}
	}
	for i := range got[true] {
		if !bytes.Equal(got[true][i], got[false][i]) {
			t.Errorf("frame %d differs:\nstack %x\nfib   %x", i, got[true][i], got[false][i])
		}
	}
}
