package netfilter

import (
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// TestTunLoopSamePackets: the loop's inner end as a tun device (the packet
// enters the stack synchronously, issue #32) must be invisible to the
// rules and to the packets: the same rule set (a rule on iifname, oifname
// and the ARGS mark; SNAT) counts the same packets, and B receives the
// same bytes, as with the veth loop of earlier versions. Both layouts run
// in identical topologies (fixed MACs) and B's captures are compared byte
// for byte; the device type of LoopIn shows which layout ran.
func TestTunLoopSamePackets(t *testing.T) {
	testutil.RequireScapy(t)
	const rules = `table inet t {
 chain f {
  type filter hook forward priority 0; policy accept;
  iifname "sc-nfloop-in" oifname "sc-nfloop" meta mark 7 counter
 }
}
table ip nat {
 chain p {
  type nat hook postrouting priority 100
  ip saddr 10.0.1.1 snat to 10.9.9.9
 }
}
`
	type result struct {
		frames  [][]byte
		devType string
		nft     string
		c       Counters
	}
	run := func(tun bool) result {
		old := TunLoop
		TunLoop = tun
		defer func() { TunLoop = old }()
		tp := newTopo(t, 16)
		testutil.Exec(t, tp.n, "ip", "link", "set", "n1", "address", "02:00:00:00:0b:02")
		testutil.Exec(t, tp.b, "ip", "link", "set", "b0", "address", "02:00:00:00:0b:01")
		tp.load(t, "nft", rules)
		cb := capture(t, tp.b, "b0", "fc00:b::1", 4)
		send(t, tp.a, "a0",
			fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", 1000, 5000)),
			fromA("fc00:e::e0:7", udp6("fc00:1::1", "fc00:2::1", 1001, 5000)),
			fromA("fc00:e::e0:8", udp4("10.0.1.1", "10.0.2.1", 1002, 5000)),
			fromA("fc00:e::e0:7", udp4("10.0.1.1", "10.0.2.1", 1003, 5000)))
		pcap := cb.Wait(5 * time.Second)
		return result{
			frames:  testutil.PcapFrames(t, pcap),
			devType: strings.TrimSpace(testutil.Exec(t, tp.n, "cat", "/sys/class/net/"+LoopIn+"/type")),
			nft:     testutil.Exec(t, tp.n, "nft", "list", "chain", "inet", "t", "f"),
			c:       counters(t, tp.n),
		}
	}
	veth, tun := run(false), run(true)
	if veth.devType != "1" || tun.devType != "65534" {
		t.Errorf("%s device type: veth layout %s (want 1, ARPHRD_ETHER), tun layout %s (want 65534, ARPHRD_NONE)", LoopIn, veth.devType, tun.devType)
	}
	if len(veth.frames) != 4 || len(tun.frames) != 4 {
		t.Fatalf("B received %d packets through the veth loop, %d through the tun loop; want 4 each", len(veth.frames), len(tun.frames))
	}
	for i := range veth.frames {
		if !bytes.Equal(veth.frames[i], tun.frames[i]) {
			t.Errorf("packet %d differs:\nveth %x\ntun  %x", i, veth.frames[i], tun.frames[i])
		}
	}
	for _, r := range []result{veth, tun} {
		if !strings.Contains(r.nft, "counter packets 3 ") {
			t.Errorf("the rule on iifname, oifname and mark 7 should count 3 packets:\n%s", r.nft)
		}
	}
	if fmt.Sprint(veth.c) != fmt.Sprint(tun.c) {
		t.Errorf("counters: veth loop %+v, tun loop %+v", veth.c, tun.c)
	}
}

// TestNfInNotOnLoopIn: nf_in runs on every interface of the node but the
// loop's inner end, where only its own decapsulated packets enter (issue
// #32: it ran there a second time per packet, for nothing). The loop's
// outer end keeps it (a next SID handed to the stack may be another
// End.AN.NF SID, TestNextSIDLocal), and an nf_in that an earlier version
// left on LoopIn is taken off by the next attach.
func TestNfInNotOnLoopIn(t *testing.T) {
	tp := newTopo(t, 16)
	for dev, n := range map[string]int{"n0": 1, "n1": 1, LoopOut: 1, LoopIn: 0} {
		if got := testutil.TCXIngressCount(t, tp.n, dev); got != n {
			t.Errorf("TCX ingress programs on %s: %d, want %d", dev, got, n)
		}
	}
	// An earlier version's link on LoopIn, pinned where it pinned it.
	err := state.Do(tp.n, func(n *node) error {
		return nsutil.Do(tp.n, func() error {
			i, err := net.InterfaceByName(LoopIn)
			if err != nil {
				return err
			}
			if err := n.loadProgs(); err != nil {
				return err
			}
			lk, err := link.AttachTCX(link.TCXOptions{Interface: i.Index, Program: n.objs.NfIn, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			defer lk.Close()
			return lk.Pin(filepath.Join(n.dir, fmt.Sprintf("tcx-%d", i.Index)))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.TCXIngressCount(t, tp.n, LoopIn); got != 1 {
		t.Fatalf("the old layout's link on %s: %d programs", LoopIn, got)
	}
	if err := AttachNew(tp.n); err != nil {
		t.Fatal(err)
	}
	if got := testutil.TCXIngressCount(t, tp.n, LoopIn); got != 0 {
		t.Errorf("after the next attach, %d TCX ingress programs on %s, want 0", got, LoopIn)
	}
}
