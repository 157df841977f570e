package dump

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/csid"
	"github.com/segchain/segchain/internal/testutil"
)

// TestContainers: dump decodes uSID containers in the DA of a packet
// without SRH (H.Encaps.Red) and in the SRH, names the owners of the next
// uSIDs, and says when a container's padding is invalid.
func TestContainers(t *testing.T) {
	pcap := filepath.Join(t.TempDir(), "usid.pcap")
	testutil.RunScapy(t, `
inner = IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=1, dport=2)
p1 = Ether()/IPv6(src="fc00:1::1", dst="fcbb:bb00:2d0:3c7:4b6::", nh=41)/inner
p2 = Ether()/IPv6(src="fc00:1::1", dst="fcbb:bb00:2d0::")/IPv6ExtHdrSegmentRouting(addresses=["fcbb:bb00:4b6::", "fc00:3::f1:0", "fcbb:bb00:2d0::"], segleft=2, nh=41)/inner
p3 = Ether()/IPv6(src="fc00:1::1", dst="fcbb:bb00:2d0:0:3c7::", nh=41)/inner
wrpcap("`+pcap+`", [p1, p2, p3])
`)
	f := csid.F3216(mustPrefix("fcbb:bb00::/32"))
	res := NewTable([]SIDInfo{
		{SID: mustPrefix("fcbb:bb00:2d0::/48"), Node: "nfv1", Service: "nfv1-end", Behavior: "End", CSID: f},
		{SID: mustPrefix("fcbb:bb00:3c7::/48"), Node: "nfv2", Service: "nfv2-end", Behavior: "End", CSID: f},
		{SID: mustPrefix("fcbb:bb00:4b6::/48"), Node: "egress", Service: "web egress", Behavior: "End.DX6", CSID: f},
		{SID: mustPrefix("fc00:3::f1:0/112"), Node: "nfv2", Service: "nfv2-fw", Behavior: "End.AN.FW", LocatorBits: 64, FunctionBits: 48, ArgsBits: 16},
	})
	out := runFile(t, pcap, Printer{Format: FormatLine, Resolver: res}, NewFilter())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%q", len(lines), out)
	}
	for i, want := range []string{
		"no-srh da fcbb:bb00:2d0:3c7:4b6:: (nfv1/nfv1-end usid fcbb:bb00::/32 active 02d0 next 03c7(nfv2/nfv2-end) 04b6(egress/web egress))",
		"fcbb:bb00:2d0::*(nfv1/nfv1-end End usid fcbb:bb00::/32 active 02d0 last), fc00:3::f1:0(nfv2/nfv2-fw End.AN.FW args 0), fcbb:bb00:4b6::(egress/web egress End.DX6 usid fcbb:bb00::/32 active 04b6 last)",
		"usid fcbb:bb00::/32 invalid (fcbb:bb00:2d0:0:3c7::: C-SID 2: invalid padding",
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("packet %d:\n%s\nwant it to contain\n%s", i+1, lines[i], want)
		}
	}
	tree := runFile(t, pcap, Printer{Format: FormatTree, Resolver: res}, NewFilter())
	if !strings.Contains(tree, "usid fcbb:bb00::/32 active 02d0 last") {
		t.Errorf("tree output lacks the container:\n%s", tree)
	}
	js := runFile(t, pcap, Printer{Format: FormatJSON, Resolver: res}, NewFilter())
	if !strings.Contains(js, `"usid":{"block":"fcbb:bb00::/32","active":720,"next":[]}`) {
		t.Errorf("JSON output lacks the container:\n%s", js)
	}
}

// TestContainersF4816: the same decoding with a 48-bit block (issue 31):
// five 16-bit uSIDs a container, the block printed as the /48.
func TestContainersF4816(t *testing.T) {
	pcap := filepath.Join(t.TempDir(), "usid48.pcap")
	testutil.RunScapy(t, `
inner = IPv6(src="fc00:1a::a", dst="fc00:4d::d")/UDP(sport=1, dport=2)
p1 = Ether()/IPv6(src="fc00:1::1", dst="2001:db8:aa:2d0:3c7:4b6::", nh=41)/inner
p2 = Ether()/IPv6(src="fc00:1::1", dst="2001:db8:aa:2d0:0:3c7::", nh=41)/inner
wrpcap("`+pcap+`", [p1, p2])
`)
	f := csid.Format{Block: mustPrefix("2001:db8:aa::/48"), NFLen: 16}
	res := NewTable([]SIDInfo{
		{SID: mustPrefix("2001:db8:aa:2d0::/64"), Node: "nfv1", Service: "nfv1-end", Behavior: "End", CSID: f},
		{SID: mustPrefix("2001:db8:aa:3c7::/64"), Node: "nfv2", Service: "nfv2-end", Behavior: "End", CSID: f},
		{SID: mustPrefix("2001:db8:aa:4b6::/64"), Node: "egress", Service: "web egress", Behavior: "End.DX6", CSID: f},
	})
	out := runFile(t, pcap, Printer{Format: FormatLine, Resolver: res}, NewFilter())
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%q", len(lines), out)
	}
	for i, want := range []string{
		"no-srh da 2001:db8:aa:2d0:3c7:4b6:: (nfv1/nfv1-end usid 2001:db8:aa::/48 active 02d0 next 03c7(nfv2/nfv2-end) 04b6(egress/web egress))",
		"usid 2001:db8:aa::/48 invalid (2001:db8:aa:2d0:0:3c7::: C-SID 2: invalid padding",
	} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("packet %d:\n%s\nwant it to contain\n%s", i+1, lines[i], want)
		}
	}
}
