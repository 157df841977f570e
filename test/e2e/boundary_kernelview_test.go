package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/config"
	"github.com/segchain/segchain/internal/nsutil"
	"github.com/segchain/segchain/internal/testutil"
)

// Issue 24's bypasses, sent with scapy into a lab: each must be dropped
// where the kernel would otherwise act on it, counted by reason, and none
// may reach d.

// mac is the hardware address of node's iface.
func (e *env) mac(node, iface string) string {
	e.T.Helper()
	var hw string
	if err := nsutil.Do(e.NS(node), func() error {
		i, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		hw = i.HardwareAddr.String()
		return nil
	}); err != nil {
		e.T.Fatal(err)
	}
	return hw
}

// expectDropped sends the attacks count times each and checks that none
// reached d and that each drop was counted where the attack says.
func (e *env) expectDropped(t *testing.T, attacks []attack, count int) {
	t.Helper()
	type at struct{ node, iface, reason string }
	before := map[at]uint64{}
	want := map[at]uint64{}
	for _, a := range attacks {
		k := at{a.node, a.iface, a.reason}
		before[k] = e.boundaryDrops(a.node, a.iface, a.reason)
		want[k] += uint64(count)
	}
	got := e.sendAttacks(t, attacks, count)
	for _, a := range attacks {
		if got[a.name] != 0 {
			t.Errorf("%s: %d of %d packets reached d", a.name, got[a.name], count)
		}
	}
	for k, w := range want {
		if d := e.boundaryDrops(k.node, k.iface, k.reason) - before[k]; d != w {
			t.Errorf("%s %s %s drops +%d, want +%d", k.node, k.iface, k.reason, d, w)
		}
	}
}

// TestBoundaryKernelView: issue 24 items 1 and 2 on the default domain
// with nfv1's link to sf1 a boundary interface. A malformed SRH to the
// ingress' own address (SL > Last Entry; Last Entry beyond the header),
// which the kernel processes as an SRH all the same and forwards to the
// egress End.DX6; and forged SRv6 inside 802.1ad + 802.1Q priority tags
// (VID 0), which the kernel untags after the TCX programs have looked,
// from s and from the SF sf1.
func TestBoundaryKernelView(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	file := variant(t, "../../examples/default.yaml", func(s string) string {
		return strings.Replace(s, "routing:\n  mode: static", "routing:\n  mode: static\nsecurity:\n  boundary: {interfaces: [\"nfv1:eth-sf1\"]}", 1)
	})
	e := setup(t, file)
	e.apply()
	dx6 := e.sid(config.EgressKey("firewalled"))
	own := "fc00:1a::1" // the ingress' address on eth-s
	inner := "IPv6(src='fc00:1a::a', dst='fc00:4d::d')"
	qinq := func(node, iface string) string {
		return fmt.Sprintf("Ether(dst='%s')/Dot1AD(vlan=0)/Dot1Q(vlan=0)", e.mac(node, iface))
	}
	e.expectDropped(t, []attack{
		{name: "SL > Last Entry to the ingress' own address",
			scapy: fmt.Sprintf("IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['%s','::'], segleft=1, lastentry=0)/%s", own, dx6, inner),
			node:  "ingress", iface: "eth-s", reason: "srh-to-node"},
		{name: "Last Entry beyond the header to the ingress' own address",
			scapy: fmt.Sprintf("IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['%s','::'], segleft=1, lastentry=7)/%s", own, dx6, inner),
			node:  "ingress", iface: "eth-s", reason: "srh-to-node"},
		{name: "QinQ VID 0 around SRv6 to the egress End.DX6", sendp: "eth-ingress",
			scapy: fmt.Sprintf("%s/IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['%s'], segleft=0, lastentry=0)/%s", qinq("ingress", "eth-s"), dx6, dx6, inner),
			node:  "ingress", iface: "eth-s", reason: "sid-space-srh"},
		{name: "QinQ VID 0 around an SRH to the ingress' own address", sendp: "eth-ingress",
			scapy: fmt.Sprintf("%s/IPv6(src='fc00:1a::a', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['%s','%s'], segleft=1, lastentry=1)/%s", qinq("ingress", "eth-s"), own, dx6, own, inner),
			node:  "ingress", iface: "eth-s", reason: "srh-to-node"},
		{name: "QinQ VID 0 around SRv6 from the SF to the egress End.DX6", from: "sf1", sendp: "eth-nfv1",
			scapy: fmt.Sprintf("%s/IPv6(src='fc00:27::7', dst='%s')/IPv6ExtHdrSegmentRouting(addresses=['%s'], segleft=0, lastentry=0)/%s", qinq("nfv1", "eth-sf1"), dx6, dx6, inner),
			node:  "nfv1", iface: "eth-sf1", reason: "sid-space-srh"},
	}, 10)
	if err := e.ping("s", "fc00:4d::d"); err != nil {
		t.Errorf("web (ping s -> d) after the attacks: %v", err)
	}
}

// signedSRH is an SRH (Segment List[0] first, Segments Left sl, Next
// Header nh) with the HMAC flag and an HMAC TLV for key id keyID computed
// as the kernel does (seg6_hmac_compute: source, Last Entry, flags, key
// id, segments; HMAC-SHA256 with secret). The kernel is the oracle: a
// packet with it must be delivered.
func signedSRH(nh, sl uint8, src netip.Addr, segs []netip.Addr, keyID uint32, secret []byte) []byte {
	const flags = 0x08 // SR6_FLAG1_HMAC
	le := uint8(len(segs) - 1)
	b := []byte{nh, uint8((16*len(segs) + 40) / 8), 4, sl, le, flags, 0, 0}
	mac := hmac.New(sha256.New, secret)
	s16 := src.As16()
	mac.Write(s16[:])
	mac.Write([]byte{le, flags})
	mac.Write(binary.BigEndian.AppendUint32(nil, keyID))
	for _, s := range segs {
		x := s.As16()
		b = append(b, x[:]...)
		mac.Write(x[:])
	}
	b = append(b, 5, 38, 0, 0)
	b = binary.BigEndian.AppendUint32(b, keyID)
	return append(b, mac.Sum(nil)...)
}

// TestBoundaryHMACKernelView: issue 24 items 4 and 5 on examples/hmac.yaml.
// 4: a malformed SRH (Last Entry 7) is taken for none by End.DX6, which
// then decapsulates without checking the HMAC: from outside through the
// ingress' own address, and from inside straight to the End.DX6. 5: a
// byte copy of a correctly signed SRH in a destination options header in
// front of an altered SRH: the kernel checks the copy and acts on the
// other. A correctly signed packet is delivered (the oracle for the HMAC
// computed here).
func TestBoundaryHMACKernelView(t *testing.T) {
	testutil.RequireScapy(t)
	testutil.RequireTool(t, "tshark")
	e := setup(t, "../../examples/hmac.yaml")
	e.apply()
	dx6 := e.sid(config.EgressKey("signed"))
	secret, err := os.ReadFile("../../examples/secrets/k1.key")
	if err != nil {
		t.Fatal(err)
	}
	secret = []byte(strings.TrimSuffix(string(secret), "\n"))
	inner := "IPv6(src='fc00:1a::a', dst='fc00:4d::d')"
	src := netip.MustParseAddr("fc00:2::1")
	raw := func(nh uint8, hdrs ...[]byte) string {
		var all []byte
		for _, h := range hdrs {
			all = append(all, h...)
		}
		return fmt.Sprintf("IPv6(src='%s', dst='%s', nh=%d)/Raw(bytes.fromhex('%s'))/%s", src, dx6, nh, hex.EncodeToString(all), inner)
	}
	via := netip.MustParseAddr("fc00:2::99")
	signed := signedSRH(41, 0, src, []netip.Addr{dx6, via}, 1001, secret)

	t.Run("a correctly signed SRH is delivered", func(t *testing.T) {
		got := e.sendAttacks(t, []attack{{name: "signed", from: "nfv1", scapy: raw(43, signed)}}, 5)
		if got["signed"] != 5 {
			t.Fatalf("%d of 5 correctly signed packets reached d: the HMAC computed here is not the kernel's", got["signed"])
		}
	})

	// Last Entry 7 in a header of two segments, HMAC flag and TLV.
	le7 := append([]byte{}, signed...)
	le7[4] = 7
	copyInDstOpts := append([]byte{}, signed...)
	copyInDstOpts[0] = 43 // a destination options header followed by the SRH
	altered := signedSRH(41, 0, src, []netip.Addr{dx6, netip.MustParseAddr("fc00:2::66")}, 1001, secret)
	copy(altered[len(altered)-32:], signed[len(signed)-32:]) // the captured digest: wrong for this list
	e.expectDropped(t, []attack{
		{name: "from outside: Last Entry 7 through the ingress' own address",
			scapy: fmt.Sprintf("IPv6(src='fc00:1a::a', dst='fc00:1a::1')/IPv6ExtHdrSegmentRouting(addresses=['%s','::'], segleft=1, lastentry=7)/%s", dx6, inner),
			node:  "ingress", iface: "eth-s", reason: "srh-to-node"},
		{name: "from nfv1: Last Entry 7 to the End.DX6", from: "nfv1", scapy: raw(43, le7),
			node: "egress", iface: "eth-nfv1", reason: "hmac-malformed"},
		{name: "from nfv1: a signed copy in destination options before an altered SRH", from: "nfv1", scapy: raw(60, copyInDstOpts, altered),
			node: "egress", iface: "eth-nfv1", reason: "hmac-misplaced"},
	}, 5)
}
