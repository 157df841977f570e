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
	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/testutil"
)

// proxyTraffic is chain firewalled's traffic (IPv6 TCP to d:8080, through
// nfv1-fw's SF), sent from s.
const proxyTraffic = `
for i in range(3):
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/TCP(sport=4000+i, dport=8080, flags="S", seq=1000+i)/b"proxy", verbose=0)
`

// innerOf is the packet behind the outer IPv6 header and its SRH (if
// any) of a frame, or the frame's IPv6 packet when it carries no SRv6:
// what an SF behind the proxy handles.
func innerOf(frame []byte) []byte {
	p := frame[14:]
	if len(p) >= 40+8 && p[6] == 43 {
		return p[40+(int(p[41])+1)*8:]
	}
	return p
}

// proxyRun sends proxyTraffic and returns, hex-encoded, the packets the SF
// (sf1) received with their outer headers removed, the packets d
// received, and the per-hop counter deltas.
func (l *lab) proxyRun(t *testing.T) (sf, atD []string, deltas map[string]uint64) {
	t.Helper()
	before := l.hopCounters(t)
	cs := testutil.StartInboundCapture(t, l.NS("sf1"), "eth-nfv1", "ip6 and not icmp6", 3)
	cd := testutil.StartInboundCapture(t, l.NS("d"), "eth-egress", "tcp port 8080", 3)
	testutil.RunScapyIn(t, l.NS("s"), proxyTraffic)
	for _, f := range testutil.PcapFrames(t, cs.Wait(10*time.Second)) {
		sf = append(sf, hex.EncodeToString(innerOf(f)))
	}
	for _, f := range testutil.PcapFrames(t, cd.Wait(10*time.Second)) {
		atD = append(atD, hex.EncodeToString(f[14:]))
	}
	after := l.hopCounters(t)
	deltas = map[string]uint64{}
	for k, v := range after {
		if strings.HasPrefix(k, "firewalled[") {
			deltas[k] = v - before[k]
		}
	}
	return sf, atD, deltas
}

// proxies is the state of nfv1's SR proxies.
func (l *lab) proxies(t *testing.T) []srunaware.Status {
	t.Helper()
	n, err := srunaware.Open(l.NS("nfv1"))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	sts, err := n.Show()
	if err != nil {
		t.Fatal(err)
	}
	return sts
}

// proxyDrops is nfv1-fw's drop counter for reason.
func (l *lab) proxyDrops(t *testing.T, reason string) func() uint64 {
	return func() uint64 {
		var v uint64
		for _, s := range l.proxies(t) {
			v += s.Counters.Drops[reason]
		}
		return v
	}
}

// TestProxyTypesF3216SameAsFull runs the default domain with nfv1-fw as a
// static (End.AS) and a masquerading (End.AM) proxy (End.AD is
// TestDefaultDomainF3216SameAsFull's) in full and in f3216 format: the
// SF's packets with their outer headers removed and d's packets are byte
// for byte the same, and so are the per-hop counters. In f3216 the proxy
// has a uSID (End.AS in the middle of the chain's only container; End.AM
// ending its container), and a container with invalid padding sent to it
// from inside the domain is dropped and counted by the proxy
// (csid-padding), never reaching d.
func TestProxyTypesF3216SameAsFull(t *testing.T) { proxyTypesSameAsFull(t, config.SIDFormatF3216) }

// TestProxyTypesF4816SameAsFull is the same in f4816 (issue 31): the
// proxies shift 16-bit uSIDs after a 48-bit block (usid 48/16).
func TestProxyTypesF4816SameAsFull(t *testing.T) { proxyTypesSameAsFull(t, config.SIDFormatF4816) }

func proxyTypesSameAsFull(t *testing.T, compressed string) {
	const dynamic = "proxy: dynamic\n    inner: ipv6\n"
	for _, tc := range []struct{ name, yaml, behavior string }{
		{"static", "proxy: static\n    inner: ipv6\n", srunaware.EndAS},
		{"masquerading", "proxy: masquerading\n", srunaware.EndAM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sf, atD [2][]string
			var deltas [2]map[string]uint64
			for i, format := range []string{config.SIDFormatFull, compressed} {
				t.Run(format, func(t *testing.T) {
					l := up(t, "../../examples/default.yaml", format, func(s string) string {
						if !strings.Contains(s, dynamic) {
							t.Fatalf("default.yaml: nfv1-fw is not %q", dynamic)
						}
						return strings.Replace(s, dynamic, tc.yaml, 1)
					})
					if err := testutil.Ping(l.NS("s"), mustAddr("fc00:4d::d"), 5*time.Second); err != nil {
						t.Fatalf("warm-up ping: %v", err)
					}
					sf[i], atD[i], deltas[i] = l.proxyRun(t)
					if len(sf[i]) != 3 || len(atD[i]) != 3 {
						t.Errorf("sf1 saw %d packets, d received %d; want 3 and 3", len(sf[i]), len(atD[i]))
					}
					fw := l.p.Chains[0]
					for _, c := range l.p.Chains {
						if c.Name == "firewalled" {
							fw = c
						}
					}
					if format != config.SIDFormatFull {
						if !l.isUSID(fw.Hops[0].SID) {
							t.Fatalf("nfv1-fw kept a full SID %s in %s", fw.Hops[0].SID, format)
						}
						l.checkProxyPadding(t, fw.Hops[0].SID)
					}
				})
			}
			if t.Failed() || deltas[0] == nil || deltas[1] == nil {
				return
			}
			if diff := cmp.Diff(sf[0], sf[1]); diff != "" {
				t.Errorf("the SF's packets differ (-full +%s):\n%s", compressed, diff)
			}
			if diff := cmp.Diff(atD[0], atD[1]); diff != "" {
				t.Errorf("packets at d differ (-full +%s):\n%s", compressed, diff)
			}
			if diff := cmp.Diff(deltas[0], deltas[1]); diff != "" {
				t.Errorf("per-hop counters differ (-full +%s):\n%s", compressed, diff)
			}
		})
	}
}

// checkProxyPadding sends, from the ingress, containers whose active uSID
// is the proxy's and that have a uSID after an end-of-container zero.
func (l *lab) checkProxyPadding(t *testing.T, px netip.Addr) {
	t.Helper()
	drops := l.proxyDrops(t, "csid-padding")
	before := drops()
	c := testutil.StartInboundCapture(t, l.NS("d"), "eth-egress", "udp port 7779", 0)
	da := l.f.container(l.f.usid(px), 0, 0x3c7).String()
	testutil.RunScapyIn(t, l.NS("ingress"), fmt.Sprintf(`
for i in range(4):
    send(IPv6(src="fc00:1::1", dst=%q, nh=41)/IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(dport=7779)/b"pad", verbose=0)
`, da))
	if got := waitAtLeast(drops, before+4); got != before+4 {
		t.Errorf("proxy csid-padding drops +%d, want +4 (sent to %s)", got-before, da)
	}
	if n := c.Count(); n != 0 {
		t.Errorf("%d packets with invalid padding reached d", n)
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// isUSID reports whether a is in the domain's uSID block.
func (l *lab) isUSID(a netip.Addr) bool { return l.f.block.Contains(a) }
