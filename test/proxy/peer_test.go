package proxy_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/segchain/segchain/internal/dataplane/srunaware"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPeerRedirectSamePackets: the inbound fast path of a proxy with a MAC
// S-ADDR whose IFACE-OUT is a veth into the SF's namespace hands the
// packet straight to the SF's end (bpf_redirect_peer: no transmit on
// IFACE-OUT, no backlog queue; issue #32). The SF must receive exactly the
// frames the classic redirect gave it, and the node must send on exactly
// the same packets: both paths are run in identical topologies (fixed
// MACs) and their captures compared byte for byte. The interface counter
// of IFACE-OUT shows which path ran (the peer redirect never transmits on
// it), so the test fails if the fast path is not taken, or taken in the
// classic mode.
func TestPeerRedirectSamePackets(t *testing.T) {
	testutil.RequireScapy(t)
	const n = 20
	type result struct {
		atSF, atEg [][]byte
		sfTx       uint64
		st         srunaware.Status
	}
	run := func(peer bool) result {
		old := srunaware.PeerRedirect
		srunaware.PeerRedirect = peer
		defer func() { srunaware.PeerRedirect = old }()
		tp := newTopo(t)
		for _, c := range [][]string{{tp.nfv, "sf0", "02:00:00:00:5f:01"}, {tp.sf, "p0", "02:00:00:00:5f:02"},
			{tp.nfv, "g0", "02:00:00:00:e2:01"}, {tp.eg, "n0", "02:00:00:00:e2:02"}} {
			testutil.Exec(t, c[0], "ip", "link", "set", c[1], "address", c[2])
		}
		addProxy(t, tp.nfv, "fc00:2::ad End.AD6 mac 02:00:00:00:5f:02 oif sf0 iif sf0")
		testutil.Exec(t, tp.edge, "ip", "-6", "route", "add", "fc00:5::/64", "encap", "seg6", "mode", "encap",
			"segs", "fc00:2::ad,fc00:4::d6", "dev", "n0")
		// The first packet resolves the neighbours on the way: send one
		// before counting, so both runs capture the same steady state.
		scapy(t, tp.cl, rawSockets+`
send(IPv6(src="fc00:c::2", dst="fc00:5::2")/UDP(sport=5555, dport=999)/Raw(b"warm"))
`)
		atSF := startCapture(t, tp.sf, "p0", "udp port 1000")
		atEg := startCapture(t, tp.eg, "n0", "ip6 proto 43")
		tx0 := txPackets(t, tp.nfv, "sf0")
		scapy(t, tp.cl, rawSockets+`
for i in range(20):
    send(IPv6(src="fc00:c::2", dst="fc00:5::2")/UDP(sport=5555, dport=1000)/Raw(bytes([i])*(17+i)))
`)
		atSF.fields("udp", "udp.dstport") // waits for the capture to settle
		atEg.fields("", "frame.len")
		return result{
			atSF: frames(t, atSF.Path()),
			atEg: frames(t, atEg.Path()),
			sfTx: txPackets(t, tp.nfv, "sf0") - tx0,
			st:   status(t, tp.nfv, "fc00:2::ad"),
		}
	}
	classic, fast := run(false), run(true)
	if classic.st.PeerRedirect || !fast.st.PeerRedirect {
		t.Errorf("peer-redirect flag: classic %v, fast %v; want false, true", classic.st.PeerRedirect, fast.st.PeerRedirect)
	}
	if classic.sfTx < n || fast.sfTx >= n {
		t.Errorf("packets transmitted on IFACE-OUT: classic %d (want >= %d), fast path %d (want < %d: it never transmits there)",
			classic.sfTx, n, fast.sfTx, n)
	}
	for _, c := range []struct {
		what        string
		want, got   [][]byte
		wantPackets int
	}{{"received by the SF", classic.atSF, fast.atSF, n}, {"sent on towards the egress", classic.atEg, fast.atEg, n}} {
		if len(c.want) != c.wantPackets || len(c.got) != c.wantPackets {
			t.Errorf("%s: classic path %d packets, fast path %d, want %d each", c.what, len(c.want), len(c.got), c.wantPackets)
			continue
		}
		for i := range c.want {
			if !bytes.Equal(c.want[i], c.got[i]) {
				t.Errorf("%s, packet %d differs:\nclassic %x\nfast    %x", c.what, i, c.want[i], c.got[i])
			}
		}
	}
	if fast.st.Counters.InPackets != classic.st.Counters.InPackets || fast.st.Counters.OutPackets != classic.st.Counters.OutPackets {
		t.Errorf("counters: classic %+v, fast %+v", classic.st.Counters, fast.st.Counters)
	}
}

// frames reads a pcap's packets in order, except the warm-up packet (it
// may still be on its way when the captures start).
func frames(t *testing.T, path string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, data := range testutil.PcapFrames(t, path) {
		if !bytes.Contains(data, []byte("warm")) {
			out = append(out, data)
		}
	}
	return out
}

// txPackets is dev's transmitted-packets counter.
func txPackets(t *testing.T, ns, dev string) uint64 {
	t.Helper()
	var l []struct {
		Stats64 struct {
			TX struct {
				Packets uint64 `json:"packets"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(testutil.Exec(t, ns, "ip", "-s", "-j", "link", "show", dev)), &l); err != nil || len(l) != 1 {
		t.Fatalf("ip -s -j link show %s: %v", dev, err)
	}
	return l[0].Stats64.TX.Packets
}
