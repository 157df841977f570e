package usid

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/agent/local"
	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/plan"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/internal/testutil/labenv"
)

// withFormat writes example file with sid.format set into a temporary
// directory (secrets are copied along) and returns its path.
func withFormat(t *testing.T, file, format string, edits ...func(string) string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range edits {
		b = []byte(e(string(b)))
	}
	f := formatOf(t, format)
	b = regexp.MustCompile(`(?m)^name: (.*)$`).ReplaceAll(b, []byte("name: $1\nsid: "+f.sid))
	// An SRH match on a node's SIDs names its locator; compressed, the
	// previous segment is a container in nfv1's uN locator (docs/usid.md).
	b = []byte(strings.Replace(string(b), `- "-m srh --srh-psid fc00:2::/64 --inner-src fc00:1a::/64 -j ACCEPT"`,
		`- "-m srh --srh-psid fc00:2::/64 --inner-src fc00:1a::/64 -j ACCEPT"
        - "-m srh --srh-psid `+f.nodeLocator(2).String()+` --inner-src fc00:1a::/64 -j ACCEPT"`, 1))
	dir := t.TempDir()
	out := filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// What the domain names relative to itself: secrets, rule sets.
	for _, f := range []string{"secrets", "netfilter.nft"} {
		if err := os.Symlink(filepath.Join(must(filepath.Abs(filepath.Dir(file))), f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// lab is one example domain applied in one format.
type lab struct {
	*labenv.Env
	p *plan.Plan
	f usidFormat
}

func up(t *testing.T, file, format string, edits ...func(string) string) *lab {
	t.Helper()
	e := labenv.New(t, labenv.Options{File: withFormat(t, file, format, edits...), Prefix: "us"})
	if _, err := e.Session(e.Domain).Apply(context.Background()); err != nil {
		t.Fatalf("apply %s: %v", format, err)
	}
	// What apply installed reads back as planned (the uSID lengths of the
	// proxies and End.AN.NF included): a second apply changes nothing.
	res, err := e.Session(e.Domain).Apply(context.Background())
	if err != nil {
		t.Fatalf("second apply %s: %v", format, err)
	}
	if res.Changes() != 0 {
		t.Fatalf("second apply %s: %d changes: %+v", format, res.Changes(), res.Diffs)
	}
	p, err := plan.Build(e.Domain)
	if err != nil {
		t.Fatal(err)
	}
	return &lab{Env: e, p: p, f: formatOf(t, format)}
}

// hopCounters returns the packet counter of every chain hop's SID entry,
// keyed "chain[i] service".
func (l *lab) hopCounters(t *testing.T) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	byNode := map[string][]netip.Prefix{}
	cnt := map[string]map[netip.Prefix]uint64{}
	for _, c := range l.p.Chains {
		for i, h := range c.Hops {
			if _, ok := cnt[h.Node]; !ok {
				cs, err := local.NewLocal(h.Node, l.NS(h.Node)).Counters(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				cnt[h.Node] = map[netip.Prefix]uint64{}
				for _, x := range cs {
					cnt[h.Node][x.SID] = x.Packets
					byNode[h.Node] = append(byNode[h.Node], x.SID)
				}
			}
			key := fmt.Sprintf("%s[%d] %s", c.Name, i, h.Service)
			for _, p := range byNode[h.Node] {
				if p.Contains(h.SID) {
					out[key] = cnt[h.Node][p]
				}
			}
		}
	}
	return out
}

// defaultTraffic is three packets of every chain of the default domain,
// sent from s by scapy.
const defaultTraffic = `
for i in range(3):
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d")/ICMPv6EchoRequest(id=7, seq=i)/b"web", verbose=0)
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=4000+i, dport=6001)/b"filtered", verbose=0)
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=4000+i, dport=5001)/b"insert6", verbose=0)
    send(IPv6(src="fc00:1a::a", dst="fc00:4d::d")/TCP(sport=4000+i, dport=8080, flags="S"), verbose=0)
    send(IP(src="198.18.1.10", dst="198.18.4.13")/ICMP(id=7, seq=i)/b"legacy4", verbose=0)
`

// innerAtD is what d receives, as tshark dissects it (sorted): the
// original packets, whatever the format carried them in.
func (l *lab) run(t *testing.T) (deltas map[string]uint64, inner []string) {
	t.Helper()
	// One round first: neighbour discovery and the SF path settle.
	if err := testutil.Ping(l.NS("s"), netip.MustParseAddr("fc00:4d::d"), 5*time.Second); err != nil {
		t.Fatalf("warm-up ping through web: %v", err)
	}
	before := l.hopCounters(t)
	c := testutil.StartInboundCapture(t, l.NS("d"), "eth-egress", "ip6 or ip", 15)
	// The SR-unaware SF behind nfv1's End.AD (chain firewalled): it must
	// see the plain inner packet in both formats.
	sf := testutil.StartInboundCapture(t, l.NS("sf1"), "eth-nfv1", "tcp port 8080", 3)
	testutil.RunScapyIn(t, l.NS("s"), defaultTraffic)
	for _, p := range testutil.Tshark(t, sf.Wait(10*time.Second), "ipv6.src", "ipv6.dst", "ipv6.nxt", "tcp.dstport") {
		inner = append(inner, fmt.Sprintf("sf1 sees %v %v nxt %v tcp %v", p["ipv6.src"], p["ipv6.dst"], p["ipv6.nxt"], p["tcp.dstport"]))
	}
	pkts := testutil.Tshark(t, c.Wait(10*time.Second), "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "ipv6.hlim",
		"ip.ttl", "udp.dstport", "tcp.dstport", "icmpv6.type", "icmp.type", "data.data", "ipv6.routing.segleft")
	for _, p := range pkts {
		var f []string
		for _, k := range []string{"ip.src", "ip.dst", "ipv6.src", "ipv6.hlim", "ip.ttl", "udp.dstport", "tcp.dstport", "icmpv6.type", "icmp.type", "data.data"} {
			f = append(f, k+"="+strings.Join(p[k], "|"))
		}
		// The last destination: the SRH of insert6 differs by format
		// (containers vs full SIDs); the destination it reached does not.
		if d := p["ipv6.dst"]; len(d) > 0 {
			f = append(f, "dst="+d[len(d)-1])
		}
		inner = append(inner, strings.Join(f, " "))
	}
	sort.Strings(inner)
	after := l.hopCounters(t)
	deltas = map[string]uint64{}
	for k, v := range after {
		deltas[k] = v - before[k]
	}
	return deltas, inner
}

// TestDefaultDomainF3216SameAsFull applies the default domain in full and
// in f3216 format, one after the other, sends the same packets and wants
// the same per-hop counters and the same packets at d.
func TestDefaultDomainF3216SameAsFull(t *testing.T) { defaultSameAsFull(t, config.SIDFormatF3216) }

// TestDefaultDomainF4816SameAsFull is the same in f4816 (a /48 block,
// five uSIDs a container; issue 31): every next-csid route carries lblen
// 48 (iproute2), the wire, the boundary and malformed containers as in
// f3216.
func TestDefaultDomainF4816SameAsFull(t *testing.T) { defaultSameAsFull(t, config.SIDFormatF4816) }

func defaultSameAsFull(t *testing.T, compressed string) {
	file := "../../examples/default.yaml"
	var deltas [2]map[string]uint64
	var inner [2][]string
	for i, format := range []string{config.SIDFormatFull, compressed} {
		t.Run(format, func(t *testing.T) {
			l := up(t, file, format)
			deltas[i], inner[i] = l.run(t)
			if len(inner[i]) != 18 {
				t.Errorf("d received / sf1 saw %d packets, want 15 + 3:\n%s", len(inner[i]), strings.Join(inner[i], "\n"))
			}
			for _, p := range inner[i] {
				if strings.HasPrefix(p, "sf1 ") && p != "sf1 sees [fc00:1a::a] [fc00:4d::d] nxt [6] tcp [8080]" {
					t.Errorf("the SF's view: %s, want the plain inner packet", p)
				}
			}
			// Services shared by several chains count every chain's
			// packets; each hop counts some.
			for k, v := range deltas[i] {
				if v < 3 {
					t.Errorf("%s: hop %s counted %d packets, want at least 3", format, k, v)
				}
			}
			if format != config.SIDFormatFull {
				l.checkRouteLengths(t)
				l.checkWire(t)
				l.checkBoundary(t)
				l.checkMalformed(t)
			}
		})
	}
	if t.Failed() || deltas[0] == nil || deltas[1] == nil {
		return // a subtest failed or was not run (-run .../f3216)
	}
	if diff := cmp.Diff(deltas[0], deltas[1]); diff != "" {
		t.Errorf("per-hop counters differ (-full +%s):\n%s", compressed, diff)
	}
	if diff := cmp.Diff(inner[0], inner[1]); diff != "" {
		t.Errorf("packets at d differ (-full +%s):\n%s", compressed, diff)
	}
}

// checkWire looks at chain web's packets on the wire at nfv1 with tshark:
// no SRH (the whole chain in the destination address), and the DA read by
// rfcDecode gives exactly the chain's hops.
func (l *lab) checkWire(t *testing.T) {
	t.Helper()
	var web plan.Chain
	for _, c := range l.p.Chains {
		if c.Name == "web" {
			web = c
		}
	}
	c := testutil.StartCapture(t, l.NS("nfv1"), "eth-r1", "ip6 and ip6[6] == 41", 1)
	if err := testutil.Ping(l.NS("s"), netip.MustParseAddr("fc00:4d::d"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	pkts := testutil.Tshark(t, c.Wait(5*time.Second), "ipv6.dst", "ipv6.nxt", "ipv6.routing.type", "frame.len")
	if len(pkts) == 0 {
		t.Fatal("no encapsulated packet at nfv1")
	}
	p := pkts[0]
	if got := p["ipv6.nxt"]; len(got) == 0 || got[0] != "41" || len(p["ipv6.routing.type"]) != 0 {
		t.Errorf("outer next header %v, routing types %v: want IPv6-in-IPv6 without an SRH", got, p["ipv6.routing.type"])
	}
	da := netip.MustParseAddr(p.First("ipv6.dst"))
	block, seq, err := rfcDecode(da, l.f.lbl())
	if err != nil {
		t.Fatal(err)
	}
	if block != l.f.block {
		t.Errorf("block of %s: %s, want %s", da, block, l.f.block)
	}
	var want []netip.Addr
	for _, h := range web.Hops {
		want = append(want, h.SID)
	}
	if diff := cmp.Diff(want, seq, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("C-SIDs of %s (-hops +decoded):\n%s", da, diff)
	}
}

// checkBoundary: a uSID chain sent from outside (host s, through the
// ingress' boundary interface) is dropped there and counted: the block is
// in the domain's SID space.
func (l *lab) checkBoundary(t *testing.T) {
	t.Helper()
	drops := func() uint64 {
		cs, err := local.NewLocal("ingress", l.NS("ingress")).BoundaryCounters(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, c := range cs {
			if c.Iface == "eth-s" && strings.HasPrefix(c.Reason, "sid-space") {
				n += c.Packets
			}
		}
		return n
	}
	before := drops()
	c := testutil.StartInboundCapture(t, l.NS("d"), "eth-egress", "udp port 7777", 0)
	testutil.RunScapyIn(t, l.NS("s"), fmt.Sprintf(`
for i in range(5):
    send(IPv6(src="fc00:1a::a", dst=%q)/IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(dport=7777)/b"outside", verbose=0)
`, l.f.container(0x2d0, 0x3c7, 0x4b6)))
	if got := waitAtLeast(drops, before+5); got != before+5 {
		t.Errorf("boundary sid-space drops at ingress eth-s: +%d, want +5", got-before)
	}
	if n := c.Count(); n != 0 {
		t.Errorf("%d uSID packets from outside reached d", n)
	}
}

// checkMalformed: containers sent from inside the domain (the ingress)
// with invalid padding (a uSID after the end-of-container zero) or an
// unknown uSID in a node's space are dropped, counted by the kernel
// (Ip6InNoRoutes of the node that shifted or received them), and never
// reach d.
func (l *lab) checkMalformed(t *testing.T) {
	t.Helper()
	noRoutes := func(node string) func() uint64 {
		return func() uint64 {
			out := testutil.Exec(t, l.NS(node), "cat", "/proc/net/snmp6")
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "Ip6InNoRoutes" {
					var v uint64
					fmt.Sscan(f[1], &v)
					return v
				}
			}
			t.Fatalf("no Ip6InNoRoutes in %s's /proc/net/snmp6", node)
			return 0
		}
	}
	n1 := noRoutes("nfv1")
	before := n1()
	c := testutil.StartInboundCapture(t, l.NS("d"), "eth-egress", "udp port 7778", 0)
	testutil.RunScapyIn(t, l.NS("ingress"), fmt.Sprintf(`
inner = IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(dport=7778)/b"bad"
for i in range(3):
    send(IPv6(src="fc00:1::1", dst=%q, nh=41)/inner, verbose=0)  # padding
    send(IPv6(src="fc00:1::1", dst=%q, nh=41)/inner, verbose=0)  # unknown uSID 02ff on nfv1
`, l.f.container(0x2d0, 0, 0x3c7, 0x4b6), l.f.container(0x2ff, 0x4b6)))
	if got := waitAtLeast(n1, before+6); got < before+6 {
		t.Errorf("nfv1 Ip6InNoRoutes +%d, want +6 (3 bad padding, 3 unknown uSID)", got-before)
	}
	if n := c.Count(); n != 0 {
		t.Errorf("%d malformed-container packets reached d", n)
	}
}

// waitAtLeast polls f until it reaches want (a condition, not a timed
// assertion: the deadline only bounds a failing test).
func waitAtLeast(f func() uint64, want uint64) uint64 {
	deadline := time.Now().Add(5 * time.Second)
	v := f()
	for v < want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		v = f()
	}
	return v
}
