package dump

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

// scapyPackets writes, with scapy, one Ethernet pcap (and the same frames as
// pcapng) covering every kind of packet dump must handle. Frame order is the
// order of names (frame i+1 is names[i]).
const scapyPackets = `
import os
S, P0, P1, P2 = "fd00::1", "fc00:1::100", "fc00:2::200", "fc00:3::300"
H1, H2 = "2001:db8::1", "2001:db8::2"
SRH = IPv6ExtHdrSegmentRouting
E = lambda: Ether(src="02:00:00:00:00:aa", dst="02:00:00:00:00:bb")
inner6 = IPv6(src=H1, dst=H2, hlim=63)/UDP(sport=1234, dport=53)/b"hello"
pkts, names = [], []
def add(name, p):
    names.append(name); pkts.append(p)

add("encap-v6-udp", E()/IPv6(src=S, dst=P1)/SRH(nh=41, addresses=[P2, P1, P0], segleft=1, tag=4660)/inner6)
add("encap-v4-tcp-hmac", E()/IPv6(src=S, dst=P0)/SRH(nh=4, addresses=[P1, P0],
    tlv_objects=[SRHHMAC(D=1, keyid=0x01020304, hmac=bytes(range(32)))])/
    IP(src="10.0.0.1", dst="10.0.0.2", ttl=9)/TCP(sport=80, dport=4321, flags="SA", seq=1000, ack=2000, window=512)/b"data")
add("insert-icmp6-tlvs", E()/IPv6(src=H1, dst=P0)/SRH(nh=58, addresses=[H2, P1, P0],
    tlv_objects=[SRHTLV(type=99, value=b"\x01\x02\x03")])/ICMPv6EchoRequest(id=7, seq=9, data=b"ping"))
add("l2-encap", E()/IPv6(src=S, dst=P0)/SRH(nh=143, addresses=[P1, P0])/
    Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")/IPv6(src=H1, dst=H2)/UDP(sport=7, dport=9)/b"l2")
add("encap-red", E()/IPv6(src=S, dst=P0)/SRH(nh=41, addresses=[P2, P1], segleft=2, lastentry=1)/inner6)
add("insert-bad-cksum", E()/IPv6(src=H1, dst=P0)/SRH(nh=17, addresses=[H2, P0])/UDP(sport=5000, dport=6000, chksum=0x1234)/b"x")
add("malformed-segleft", E()/IPv6(src=S, dst=P0)/SRH(nh=41, addresses=[P1, P0], segleft=5)/inner6)
add("malformed-tlv-overflow", E()/IPv6(src=S, dst=P0)/IPv6ExtHdrSegmentRouting(nh=59, len=3, addresses=[P0],
    tlv_objects=[Raw(b"\x05\x20" + b"\x00"*6)]))
add("malformed-routing-type", E()/IPv6(src=S, dst=P0, nh=43)/Raw(bytes([59, 2, 3, 0, 0, 0, 0, 0]) + b"\x00"*16))
add("arp", E()/ARP(psrc="10.0.0.1", pdst="10.0.0.2"))
add("plain-icmp6", E()/IPv6(src=H1, dst=H2)/ICMPv6EchoReply(id=1, seq=2))
add("flags-pad1", E()/IPv6(src=S, dst=P0)/SRH(nh=41, addresses=[P0], protected=1, oam=1,
    tlv_objects=[SRHTLV(type=200, value=b"abcde")])/inner6)
add("malformed-hmac-len", E()/IPv6(src=S, dst=P0)/IPv6ExtHdrSegmentRouting(nh=59, len=3, addresses=[P0],
    tlv_objects=[Raw(b"\x05\x04" + b"\x00"*4 + b"\x04\x00")]))
add("ipv4-plain", E()/IP(src="192.0.2.1", dst="192.0.2.2")/UDP(sport=1, dport=2)/b"v4")
add("encap-v6-tcp-bad-inner", E()/IPv6(src=S, dst=P0)/SRH(nh=41, addresses=[P0])/
    IPv6(src=H1, dst=H2)/TCP(sport=443, dport=55555, flags="PA", chksum=0xbeef)/b"payload")
add("truncated-ipv6", (E()/IPv6(src=S, dst=P0, plen=200)/SRH(nh=59, addresses=[P0])))
add("hbh-insert-udp", E()/IPv6(src=H1, dst=P0)/IPv6ExtHdrHopByHop()/SRH(nh=17, addresses=[H2, P0], tag=1)/UDP(sport=1, dport=2)/b"z")
for i, p in enumerate(pkts):
    p.time = 1700000000 + i + 0.000123
wrpcap(os.path.join(OUT, "golden.pcap"), pkts)
wrpcapng(os.path.join(OUT, "golden.pcapng"), pkts)
print("\n".join(names))
`

type scapyCapture struct {
	dir   string
	names []string
}

var (
	capOnce sync.Once
	capData scapyCapture
	capDir  string
)

// goldenCapture generates the scapy pcaps once per test binary.
func goldenCapture(t *testing.T) scapyCapture {
	t.Helper()
	testutil.RequireScapy(t)
	capOnce.Do(func() {
		dir, err := os.MkdirTemp("", "segchain-dump-")
		if err != nil {
			t.Fatal(err)
		}
		capDir = dir
		out := testutil.RunScapy(t, "OUT = "+pyQuote(dir)+"\n"+scapyPackets)
		capData = scapyCapture{dir: dir, names: strings.Fields(string(out))}
	})
	if capData.dir == "" {
		t.Fatal("scapy capture generation failed earlier")
	}
	return capData
}

func pyQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

func (c scapyCapture) pcap() string   { return filepath.Join(c.dir, "golden.pcap") }
func (c scapyCapture) pcapng() string { return filepath.Join(c.dir, "golden.pcapng") }

func TestMain(m *testing.M) {
	code := m.Run()
	if capDir != "" {
		os.RemoveAll(capDir)
	}
	os.Exit(code)
}
