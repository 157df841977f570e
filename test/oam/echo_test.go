package oam_test

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/testutil"
)

// Native SIDs answer ping with the responder (RFC 9259 §3.1): iputils'
// ping (the oracle) from ingress to nfv1's End and egress's End.DX6 gets
// no reply without it (Linux's seg6local drops the request) and every
// reply with it; segchain's ping too, from the SID; the reply on the wire
// is an echo reply from the SID whose ICMPv6 checksum tshark verifies.
// A node's own address is still answered by its kernel, and a request to
// an address of the locator that is no SID is not answered.
func TestNativeSIDEcho(t *testing.T) {
	e := setup(t, "../../examples/default.yaml", nil)
	ingress, _ := e.lab.Netns("ingress")
	iputils := func(target netip.Addr) (bool, string) {
		out, err := exec.Command("ip", "netns", "exec", ingress, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "1", target.String()).CombinedOutput()
		return err == nil && strings.Contains(string(out), " 3 received"), string(out)
	}
	sid := func(word string) netip.Addr {
		a, err := e.d.Resolve([]string{word})
		if err != nil {
			t.Fatal(err)
		}
		return a[0]
	}
	targets := []netip.Addr{sid("nfv1-end"), sid("web egress")}
	for _, a := range targets {
		if ok, out := iputils(a); ok {
			t.Fatalf("ping %s answered without the responder (the kernel answers SIDs now?):\n%s", a, out)
		}
	}
	for _, n := range []string{"nfv1", "egress"} {
		ns, _ := e.lab.Netns(n)
		r, err := oam.AttachEcho(ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
	}
	for _, a := range targets {
		if ok, out := iputils(a); !ok {
			t.Errorf("iputils ping %s with the responder:\n%s", a, out)
		}
		rs, err := oam.Ping(ingress, a, nil, 2, 100*time.Millisecond, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Type != "echo-reply" || r.From != a.String() {
				t.Errorf("segchain ping %s: %+v, want an echo reply from the SID", a, r)
			}
		}
	}
	// The reply on the wire, by tshark.
	c := testutil.StartInboundCapture(t, ingress, "eth-r1", "icmp6 and ip6[40] == 129", 1)
	if ok, out := iputils(targets[0]); !ok {
		t.Fatalf("iputils ping %s:\n%s", targets[0], out)
	}
	pcap := c.Wait(2 * time.Second)
	pk := testutil.Tshark(t, pcap, "ipv6.src", "icmpv6.type", "icmpv6.checksum.status")
	if len(pk) != 1 || pk[0].First("ipv6.src") != targets[0].String() || pk[0].First("icmpv6.type") != "129" {
		t.Fatalf("on the wire at ingress: %v, want an echo reply from %s", pk, targets[0])
	}
	testutil.VerifyChecksums(t, testutil.PcapFrames(t, pcap), nil, "icmpv6.checksum.status")
	// Not a SID: an unused address of nfv1's locator; a node's address.
	if ok, _ := iputils(netip.MustParseAddr("fc00:2::dead:beef")); ok {
		t.Errorf("an address of the locator that is no SID answered")
	}
	if ok, out := iputils(netip.MustParseAddr("fc00:25::2")); !ok {
		t.Errorf("nfv1's own address did not answer:\n%s", out)
	}
}
