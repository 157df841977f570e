package usid

import (
	"context"
	"encoding/hex"
	"fmt"
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
// process bound to the planned SID. In f3216 acct has a uSID in the middle
// of the chain's only container (acct, ids, the egress: encap.red, no
// SRH); the process binds it as a uSID (Config.CSID) and its Forward
// shifts the container: the packets it sends on are, byte for byte, the
// ones it received with the destination shifted as RFC 9800 says
// (rfcShift, the test's own reading) and the hop limit less one. d gets
// the same packets in both formats, and the process sees each of them. A
// container with invalid padding to acct is dropped and counted.
func TestUserspaceF3216SameAsFull(t *testing.T) { userspaceSameAsFull(t, config.SIDFormatF3216) }

// TestUserspaceF4816SameAsFull is the same in f4816 (issue 31): the
// process binds acct's /64 as a uSID of format 48/16 (srv6svc.F4816), its
// steering program and Forward work on 16-bit uSIDs after a 48-bit block.
func TestUserspaceF4816SameAsFull(t *testing.T) { userspaceSameAsFull(t, config.SIDFormatF4816) }

func userspaceSameAsFull(t *testing.T, compressed string) {
	testutil.RequireScapy(t)
	uf := formatOf(t, compressed)
	var atD [2][]string
	for i, format := range []string{config.SIDFormatFull, compressed} {
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
			if format != config.SIDFormatFull {
				if acct.Bits() != uf.lbl()+16 || !uf.block.Contains(acct.Addr()) {
					t.Fatalf("acct's SID %s: want a uSID /%d in %s", acct, uf.lbl()+16, uf.block)
				}
				// acct, ids and the egress in one container, no SRH.
				if ch.Encap != "encap.red" || len(ch.Segments) != 1 || uf.usid(ch.Segments[0]) != uf.usid(acct.Addr()) {
					t.Fatalf("chain pushed as %s %v, want encap.red with one container starting with acct's uSID", ch.Encap, ch.Segments)
				}
			}
			var csid srv6svc.CSIDFormat
			if format != config.SIDFormatFull {
				csid = srv6svc.CSIDFormat{LBLen: uf.lbl(), NFLen: 16}
			}
			var seen atomic.Int64
			svc, err := srv6svc.Listen(srv6svc.Config{Name: "acct", Netns: e.NS("nfv1"), Interfaces: []string{"eth-ingress"},
				SIDs: []netip.Prefix{acct}, OnFailure: srv6svc.OnFailureBypass, Queues: 1, CSID: csid})
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
			// Into acct: as the ingress sends them (nfv1's XDP takes them
			// before a capture there would see them).
			in := testutil.StartCapture(t, e.NS("ingress"), "eth-nfv1", "ip6 and ip6[6] == 41", 5)
			out := testutil.StartInboundCapture(t, e.NS("nfv2"), "eth-nfv1", "ip6 and ip6[6] == 41", 5)
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
			if format != config.SIDFormatFull {
				checkShifted(t, uf.lbl(), testutil.PcapFrames(t, in.Wait(10*time.Second)), testutil.PcapFrames(t, out.Wait(10*time.Second)))
				checkUserspacePadding(t, e, uf, acct, svc)
			}
		})
	}
	if t.Failed() || atD[0] == nil || atD[1] == nil {
		return
	}
	if diff := cmp.Diff(atD[0], atD[1]); diff != "" {
		t.Errorf("packets at d differ (-full +%s):\n%s", compressed, diff)
	}
}

// checkShifted: each frame the service sent (out, at nfv2) is the frame it
// received (in, as the ingress sent them to nfv1) from the IPv6 header on, with the destination
// shifted by RFC 9800's End with NEXT-C-SID and the hop limit less one.
func checkShifted(t *testing.T, lbl int, in, out [][]byte) {
	t.Helper()
	if len(in) != 5 || len(out) != 5 {
		t.Fatalf("captured %d packets into acct and %d out of it, want 5 and 5", len(in), len(out))
	}
	for i := range in {
		want := append([]byte(nil), in[i][14:]...)
		if want[6] != 41 {
			t.Errorf("packet %d into acct: next header %d, want 41 (no SRH)", i, want[6])
		}
		da, err := rfcShift(netip.AddrFrom16([16]byte(want[24:40])), lbl)
		if err != nil {
			t.Fatal(err)
		}
		a := da.As16()
		copy(want[24:40], a[:])
		want[7]--
		if got := out[i][14:]; hex.EncodeToString(got) != hex.EncodeToString(want) {
			t.Errorf("packet %d out of acct:\n%x\nwant (RFC 9800 shift, hop limit − 1):\n%x", i, got, want)
		}
	}
}

// checkUserspacePadding: containers to acct with invalid padding (a uSID
// after the end-of-container zero), sent inside the domain, are dropped
// by the steering program and counted (CSIDPadding); none reaches d.
func checkUserspacePadding(t *testing.T, e *labenv.Env, uf usidFormat, acct netip.Prefix, svc *srv6svc.Service) {
	t.Helper()
	before := svc.Counters().CSIDPadding
	c := testutil.StartInboundCapture(t, e.NS("d"), "eth-egress", "udp port 7781", 0)
	da := uf.container(uf.usid(acct.Addr()), 0, 0x4b6).String()
	testutil.RunScapyIn(t, e.NS("ingress"), fmt.Sprintf(`
for i in range(4):
    send(IPv6(src="fc00:1::1", dst=%q, nh=41)/IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(dport=7781)/b"pad", verbose=0)
`, da))
	if got := waitAtLeast(func() uint64 { return svc.Counters().CSIDPadding }, before+4); got != before+4 {
		t.Errorf("acct's csid padding drops +%d, want +4 (sent to %s)", got-before, da)
	}
	if n := c.Count(); n != 0 {
		t.Errorf("%d packets with invalid padding reached d", n)
	}
}
