package srv6svc_test

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/srv6svctest"
)

// TestPrivilegedHMACKernelOracle: the Linux kernel, requiring an HMAC at
// an End SID (seg6_require_hmac), forwards the packets Packet.SignHMAC
// signed, also after a covered field changed and was re-signed, and drops
// one whose flags changed after signing.
func TestPrivilegedHMACKernelOracle(t *testing.T) {
	testutil.RequirePrivileged(t)
	tp := svctest.New(t, "h7hm")
	end := netip.MustParseAddr("fc00:5::200")
	testutil.Exec(t, tp.NFV, "ip", "-6", "route", "add", end.String()+"/128", "encap", "seg6local", "action", "End", "dev", tp.NOut)
	testutil.Exec(t, tp.NFV, "sysctl", "-qw", "net.ipv6.conf."+tp.NIn+".seg6_require_hmac=1")
	cmd := exec.Command("ip", "netns", "exec", tp.NFV, "ip", "sr", "hmac", "set", "7", "sha256")
	cmd.Stdin = strings.NewReader("segchain-key\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ip sr hmac set: %v %s", err, out)
	}
	key := []byte("segchain-key")
	first := netip.MustParseAddr("fc00:5::100")
	h := srv6svctest.New(netip.PrefixFrom(first, 128))
	mk := func(edit func(p *srv6svc.Packet)) []byte {
		in := srv6svctest.Frame(netip.MustParseAddr(svctest.TesterIn), []netip.Addr{netip.MustParseAddr(svctest.Final), end, first}, 2,
			srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 1, 9, []byte("x")))
		r := h.Run(func(p *srv6svc.Packet) srv6svc.Verdict { edit(p); return srv6svc.Forward }, in)[0]
		if !r.Sent {
			t.Fatalf("not sent: %s", r.Dropped)
		}
		return r.Out[14:] // the IPv6 packet, now to the kernel's End SID
	}
	cases := []struct {
		name string
		pkt  []byte
		pass bool
	}{
		{"signed", mk(func(p *srv6svc.Packet) { _ = p.SignHMAC(7, key) }), true},
		{"flags changed, re-signed", mk(func(p *srv6svc.Packet) { _ = p.SignHMAC(7, key); p.SetFlags(0x10); _ = p.SignHMAC(7, key) }), true},
		{"TLV added after signing", mk(func(p *srv6svc.Packet) { _ = p.SignHMAC(7, key); _ = p.AddTLV(0x80, []byte("m")) }), true},
		{"wrong key", mk(func(p *srv6svc.Packet) { _ = p.SignHMAC(7, []byte("other")) }), false},
	}
	var script strings.Builder
	script.WriteString("from scapy.all import *\nconf.verb = 0\npkts = []\n")
	for i, c := range cases {
		fmt.Fprintf(&script, "pkts.append(Ether(dst=%q)/IPv6(bytes.fromhex(%q)))  # %d %s\n", tp.NInMAC, hex.EncodeToString(c.pkt), i, c.name)
	}
	fmt.Fprintf(&script, "for p in pkts:\n    sendp(p, iface=%q)\n    time.sleep(0.05)\n", tp.TIn)
	c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst "+svctest.Final, len(cases)) // waits for a fourth that must not come
	testutil.RunScapyIn(t, tp.Tester, script.String())
	got := testutil.Tshark(t, c.Wait(5*time.Second), "ipv6.routing.segleft")
	want := 0
	for _, c := range cases {
		if c.pass {
			want++
		}
	}
	if len(got) != want {
		t.Errorf("the kernel forwarded %d packets, want %d (every case but the wrong key): %v", len(got), want, got)
	}
}
