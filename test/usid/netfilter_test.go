package usid

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/dataplane/netfilter"
	"github.com/segchain/segchain/internal/testutil"
)

// nfTraffic crosses examples/netfilter.yaml's chain: UDP 5000 is
// accepted by nfv2's rule set, UDP 9999 dropped by it, TCP 23 dropped by
// the firewall on nfv1.
const nfTraffic = `
for i in range(3):
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/UDP(sport=4000+i, dport=5000)/b"nf-accept", verbose=0)
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/UDP(sport=4000+i, dport=9999)/b"nf-drop", verbose=0)
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/TCP(sport=4000+i, dport=23, flags="S"), verbose=0)
`

// unpinned lets every service of examples/netfilter.yaml take a uSID:
// the firewall's and End.AN.NF's pinned FUNCTs and End.AN.NF's ARGS go
// (a uSID has no ARGS: docs/usid.md).
func unpinned(t *testing.T) func(string) string {
	return func(s string) string {
		for _, cut := range []string{"    function: \"0xf1\"\n", "    function: \"0xe0\"\n", "      args: 16\n"} {
			if !strings.Contains(s, cut) {
				t.Fatalf("netfilter.yaml: no %q", cut)
			}
			s = strings.Replace(s, cut, "", 1)
		}
		return s
	}
}

// TestNetfilterF3216SameAsFull applies examples/netfilter.yaml (without
// its pins) in full and in f3216 format: in f3216 the whole chain (End.AN.FW,
// End.AN.NF, End.DX6) is one container in the DA, no SRH, and End.AN.NF
// shifts it after netfilter accepted the inner packet. d receives the same
// packets byte for byte, and the per-hop counters are the same. A container
// with invalid padding for End.AN.NF is dropped and counted by it
// (csid-padding).
func TestNetfilterF3216SameAsFull(t *testing.T) { netfilterSameAsFull(t, config.SIDFormatF3216) }

// TestNetfilterF4816SameAsFull is the same in f4816 (issue 31): End.AN.FW
// and End.AN.NF shift 16-bit uSIDs after a 48-bit block.
func TestNetfilterF4816SameAsFull(t *testing.T) { netfilterSameAsFull(t, config.SIDFormatF4816) }

func netfilterSameAsFull(t *testing.T, compressed string) {
	testutil.RequireTool(t, "nft")
	var atD [2][]string
	var deltas [2]map[string]uint64
	for i, format := range []string{config.SIDFormatFull, compressed} {
		t.Run(format, func(t *testing.T) {
			l := up(t, "../../examples/netfilter.yaml", format, unpinned(t))
			if err := testutil.Ping(l.NS("s"), mustAddr("fc00:4d::d"), 5*time.Second); err != nil {
				t.Fatalf("warm-up ping: %v", err)
			}
			before := l.hopCounters(t)
			c := testutil.StartInboundCapture(t, l.NS("d"), "eth-egress", "udp or tcp", 3)
			testutil.RunScapyIn(t, l.NS("s"), nfTraffic)
			for _, f := range testutil.PcapFrames(t, c.Wait(10*time.Second)) {
				atD[i] = append(atD[i], hex.EncodeToString(f[14:]))
			}
			if len(atD[i]) != 3 {
				t.Errorf("d received %d packets, want the 3 UDP 5000", len(atD[i]))
			}
			after := l.hopCounters(t)
			deltas[i] = map[string]uint64{}
			for k, v := range after {
				deltas[i][k] = v - before[k]
			}
			if format == config.SIDFormatFull {
				return
			}
			var nf netip.Addr
			for _, ch := range l.p.Chains {
				for _, h := range ch.Hops {
					if !l.isUSID(h.SID) {
						t.Errorf("chain %s: %s kept a full SID %s", ch.Name, h.Service, h.SID)
					}
					if h.Service == "nf" {
						nf = h.SID
					}
				}
			}
			l.checkNFPadding(t, nf)
		})
	}
	if t.Failed() || deltas[0] == nil || deltas[1] == nil {
		return
	}
	if diff := cmp.Diff(atD[0], atD[1]); diff != "" {
		t.Errorf("packets at d differ (-full +%s):\n%s", compressed, diff)
	}
	if diff := cmp.Diff(deltas[0], deltas[1]); diff != "" {
		t.Errorf("per-hop counters differ (-full +%s):\n%s", compressed, diff)
	}
}

func (l *lab) checkNFPadding(t *testing.T, nf netip.Addr) {
	t.Helper()
	drops := func() uint64 {
		sts, err := netfilter.List(l.NS("nfv2"))
		if err != nil {
			t.Fatal(err)
		}
		var v uint64
		for _, s := range sts {
			v += s.Counters.Drops["csid-padding"]
		}
		return v
	}
	before := drops()
	c := testutil.StartInboundCapture(t, l.NS("d"), "eth-egress", "udp port 7780", 0)
	da := l.f.container(l.f.usid(nf), 0, 0x4b6).String()
	testutil.RunScapyIn(t, l.NS("nfv1"), fmt.Sprintf(`
for i in range(4):
    send(IPv6(src="fc00:2::1", dst=%q, nh=41)/IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(dport=7780)/b"pad", verbose=0)
`, da))
	if got := waitAtLeast(drops, before+4); got != before+4 {
		t.Errorf("End.AN.NF csid-padding drops +%d, want +4 (sent to %s)", got-before, da)
	}
	if n := c.Count(); n != 0 {
		t.Errorf("%d packets with invalid padding reached d", n)
	}
}
