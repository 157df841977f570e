package usid

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/testutil"
)

// exampleRun is how an example domain is exercised: scapy traffic from a
// host, and what arrives at the far host.
type exampleRun struct {
	file           string
	edits          []func(string) string
	from, to, toIf string
	filter         string // what to capture at to (inbound)
	want           int    // packets expected there
	traffic        string // scapy, run in from
	warm           string // address pinged from `from` first
}

// examples are the example domains that run in this lab in both formats.
// Left out, and why:
//   - default.yaml: TestDefaultDomainF3216SameAsFull (and its proxy types:
//     TestProxyTypesF3216SameAsFull);
//   - netfilter.yaml: TestNetfilterF3216SameAsFull (unpinned, so that
//     End.AN.NF takes a uSID);
//   - redundant.yaml: routing: bgp, which f3216 refuses: Debian 12's FRR
//     8.4 cannot express uSID locators (docs/usid.md "Interop");
//   - crypt.yaml, userspace.yaml: their userspace services bind from
//     processes the domain does not start, and keep full SIDs in f3216
//     (the library does not take uSID bindings yet: docs/usid.md).
var examples = []exampleRun{
	{file: "firewall.yaml", from: "s", to: "d", toIf: "eth-egress", filter: "udp or tcp", want: 6, warm: "fc00:4d::d", traffic: `
for i in range(3):
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/UDP(sport=4000+i, dport=53)/b"dns", verbose=0)
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/TCP(sport=4000+i, dport=80, flags="S"), verbose=0)
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/TCP(sport=4000+i, dport=23, flags="S"), verbose=0)
`},
	// xt's, l2's and bsid's packets (the example's End.B6 steers no chain:
	// docs/behaviors.md).
	{file: "behaviors.yaml", from: "s", to: "d", toIf: "eth-egress", filter: "udp or tcp or (ip6 and ip6[6] == 43)", want: 9, warm: "fc00:4d::d", traffic: `
for i in range(3):
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/TCP(sport=4000+i, dport=80, flags="S"), verbose=0)
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/UDP(sport=4000+i, dport=7001)/b"l2", verbose=0)
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/UDP(sport=4000+i, dport=6001)/b"bsid", verbose=0)
`},
	{file: "bidirectional.yaml", from: "a", to: "b", toIf: "eth-edge2", filter: "udp", want: 3, warm: "fc00:3b::b", traffic: `
for i in range(3):
    send(IPv6(src="fc00:1a::a", dst="fc00:3b::b", hlim=64)/UDP(sport=4000+i, dport=9000)/b"ab", verbose=0)
`},
	{file: "hmac.yaml", from: "s", to: "d", toIf: "eth-egress", filter: "udp", want: 3, warm: "fc00:4d::d", traffic: `
for i in range(3):
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d", hlim=64)/UDP(sport=4000+i, dport=9000)/b"signed", verbose=0)
`},
}

// TestExamplesF3216SameAsFull applies each example domain in full format,
// sends its traffic, then re-applies the same lab in f3216 (apply moves
// it from one format to the other) and sends it again: the far host gets
// the same packets (compared without the SRH of an insert-mode chain,
// whose segments are containers in f3216) and every hop counts the same.
// One lab per example, both formats on it.
func TestExamplesF3216SameAsFull(t *testing.T) { examplesSameAsFull(t, config.SIDFormatF3216) }

// TestExamplesF4816SameAsFull is the same in f4816 (issue 31): End.AN.FW
// (firewall.yaml), End.X, End.DX2 and End.B6 (behaviors.yaml), both
// directions (bidirectional.yaml) and HMAC in a /48 block.
func TestExamplesF4816SameAsFull(t *testing.T) { examplesSameAsFull(t, config.SIDFormatF4816) }

func examplesSameAsFull(t *testing.T, compressed string) {
	for _, ex := range examples {
		t.Run(strings.TrimSuffix(ex.file, ".yaml"), func(t *testing.T) {
			file := filepath.Join("../../examples", ex.file)
			l := up(t, file, config.SIDFormatFull, ex.edits...)
			var got [2][]string
			var deltas [2]map[string]uint64
			for i, format := range []string{config.SIDFormatFull, compressed} {
				if i > 0 {
					l.switchTo(t, file, format, ex.edits...)
				}
				if err := testutil.Ping(l.NS(ex.from), mustAddr(ex.warm), 10*time.Second); err != nil {
					t.Fatalf("%s: warm-up ping: %v", format, err)
				}
				before := l.hopCounters(t)
				c := testutil.StartInboundCapture(t, l.NS(ex.to), ex.toIf, ex.filter, ex.want)
				testutil.RunScapyIn(t, l.NS(ex.from), ex.traffic)
				pcap := c.Wait(10 * time.Second)
				for _, f := range testutil.PcapFrames(t, pcap) {
					got[i] = append(got[i], withoutSRH(f[14:]))
				}
				sort.Strings(got[i])
				if len(got[i]) != ex.want {
					var ports []string
					for _, p := range testutil.Tshark(t, pcap, "udp.dstport", "tcp.dstport") {
						ports = append(ports, strings.Join(append(p["udp.dstport"], p["tcp.dstport"]...), "/"))
					}
					t.Errorf("%s: %s received %d packets (ports %v), want %d", format, ex.to, len(got[i]), ports, ex.want)
				}
				after := l.hopCounters(t)
				deltas[i] = map[string]uint64{}
				for k, v := range after {
					deltas[i][k] = v - before[k]
				}
			}
			if diff := cmp.Diff(got[0], got[1]); diff != "" {
				t.Errorf("packets at %s differ (-full +%s):\n%s", ex.to, compressed, diff)
			}
			if diff := cmp.Diff(deltas[0], deltas[1]); diff != "" {
				t.Errorf("per-hop counters differ (-full +%s):\n%s", compressed, diff)
			}
			l.checkRouteLengths(t)
		})
	}
}

// switchTo re-applies l's lab with file in format.
func (l *lab) switchTo(t *testing.T, file, format string, edits ...func(string) string) {
	t.Helper()
	d, err := config.Load(withFormat(t, file, format, edits...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Session(d).Apply(context.Background()); err != nil {
		t.Fatalf("apply %s: %v", format, err)
	}
	if l.p, err = plan.Build(d); err != nil {
		t.Fatal(err)
	}
	l.f = formatOf(t, format)
}

// withoutSRH is an IPv6 packet in hex, with an SRH right after the IPv6
// header taken out (Next Header and Payload Length fixed): an insert-mode
// chain's SRH carries containers in f3216, full SIDs in full format; the
// rest of the packet must be the same.
func withoutSRH(p []byte) string {
	if len(p) < 48 || p[0]>>4 != 6 || p[6] != 43 {
		return hex.EncodeToString(p)
	}
	n := (int(p[41]) + 1) * 8
	if 40+n > len(p) {
		return hex.EncodeToString(p)
	}
	q := append(append([]byte(nil), p[:40]...), p[40+n:]...)
	q[6] = p[40]
	pl := len(q) - 40
	q[4], q[5] = byte(pl>>8), byte(pl)
	return fmt.Sprintf("%s (srh removed)", hex.EncodeToString(q))
}
