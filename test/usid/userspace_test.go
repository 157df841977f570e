package usid

import (
	"context"
	"encoding/hex"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
	"github.com/segchain/segchain/pkg/srv6svc"
)

// unpinnedUserspace lets acct and ids of examples/userspace.yaml take
// uSIDs, and makes apply give up on a missing process quickly.
func unpinnedUserspace(t *testing.T) func(string) string {
	return func(s string) string {
		for _, cut := range []string{"    function: \"0x5c\"\n", ", function: \"0x1d5\""} {
			if !strings.Contains(s, cut) {
				t.Fatalf("userspace.yaml: no %q", cut)
			}
			s = strings.Replace(s, cut, "", 1)
		}
		return strings.Replace(s, "wait: 10s", "wait: 1s", 1)
	}
}

// TestUserspaceF3216SameAsFull: examples/userspace.yaml (unpinned) in full
// and in f3216 format, its userspace service served by a pkg/srv6svc
// process bound to the planned SID. In f3216 acct has a uSID that ends its
// container (block:uSID::/48) and the chain keeps a full SRH of two
// containers: the library's End (Segments Left − 1) moves to the next
// container unchanged. d gets the same packets byte for byte, and the
// process sees each of them.
func TestUserspaceF3216SameAsFull(t *testing.T) {
	testutil.RequireScapy(t)
	var atD [2][]string
	for i, format := range []string{config.SIDFormatFull, config.SIDFormatF3216} {
		t.Run(format, func(t *testing.T) {
			file := withFormat(t, "../../examples/userspace.yaml", format, unpinnedUserspace(t))
			e := labenv.New(t, labenv.Options{File: file, Prefix: "us"})
			p, err := plan.Build(e.Domain)
			if err != nil {
				t.Fatal(err)
			}
			var acct netip.Prefix
			for _, s := range p.Nodes["nfv1"].Services {
				if s.Kind == "userspace" {
					acct = s.SID
				}
			}
			var ch plan.Chain
			for _, c := range p.Chains {
				ch = c
			}
			if format == config.SIDFormatF3216 {
				if acct.Bits() != 48 || !netip.MustParsePrefix(config.DefaultUSIDBlock).Contains(acct.Addr()) {
					t.Fatalf("acct's SID %s: want a uSID /48", acct)
				}
				// acct ends its container: block:acct::, then ids and the egress.
				if ch.Encap != "encap" || len(ch.Segments) != 2 || ch.Segments[0] != acct.Addr() {
					t.Fatalf("chain pushed as %s %v, want encap with acct's container first and one more", ch.Encap, ch.Segments)
				}
			}
			var seen atomic.Int64
			svc, err := srv6svc.Listen(srv6svc.Config{Name: "acct", Netns: e.NS("nfv1"), Interfaces: []string{"eth-ingress"},
				SIDs: []netip.Prefix{acct}, OnFailure: srv6svc.OnFailureBypass, Queues: 1})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- svc.Serve(ctx, func(*srv6svc.Packet) srv6svc.Verdict { seen.Add(1); return srv6svc.Forward })
			}()
			t.Cleanup(func() { cancel(); <-done; _ = svc.Release() })
			if _, err := e.Session(e.Domain).Apply(context.Background()); err != nil {
				t.Fatalf("apply: %v", err)
			}
			c := testutil.StartInboundCapture(t, e.NS("d"), "eth-egress", "udp port 9999", 5)
			testutil.RunScapyIn(t, e.NS("s"), `
for i in range(5):
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/UDP(sport=4000+i, dport=9999)/b"acct", verbose=0)
`)
			for _, f := range testutil.PcapFrames(t, c.Wait(10*time.Second)) {
				atD[i] = append(atD[i], hex.EncodeToString(f[14:]))
			}
			if len(atD[i]) != 5 || seen.Load() != 5 {
				t.Errorf("d received %d packets, the service saw %d; want 5 and 5", len(atD[i]), seen.Load())
			}
		})
	}
	if t.Failed() || atD[0] == nil || atD[1] == nil {
		return
	}
	if diff := cmp.Diff(atD[0], atD[1]); diff != "" {
		t.Errorf("packets at d differ (-full +f3216):\n%s", diff)
	}
}
