package srunaware

import (
	"net/netip"
	"testing"
)

// TestProgUSID: proxy SIDs that are F3216 uSIDs (RFC 9800 NEXT-C-SID). The
// SF sees the same plain inner packet as behind a full SID; the way back
// continues with the next uSID: while the container holds one, the DA is
// the container shifted left by 16 bits (SL unchanged, also with no SRH at
// all), a consumed container goes on with the SRH's next entry. A container
// with invalid padding is dropped and counted (csid-padding); End.AM's uSID
// must end its container (csid-masquerade). The expected frames are
// written from RFC 9800 4.1.1's pseudocode, not from bpf/lib/csid.h.
func TestProgUSID(t *testing.T) {
	px := a6("fcbb:bb00:2d7::")
	usidPkt := func(da string, hop uint8, nh uint8, payload []byte) []byte {
		return eth(macNode, macPeer, 0x86dd, ip6(sidIn, a6(da), nh, hop, payload))
	}
	fromSF := eth(macSFOut, macSF, 0x86dd, inner6)
	toSF := eth(macSF, macSFOut, 0x86dd, inner6)
	eg := a6("fcbb:bb00:471::")
	tests := []struct {
		name  string
		confs []sidConf
		steps []step
	}{
		{"End.AD uSID, whole chain in the DA (no SRH)", []sidConf{{sid: px.String(), behavior: EndAD, inner: InnerIPv6, mac: true, usid: true}}, []step{
			{"inbound: the SF sees the plain inner packet", "net", usidPkt("fcbb:bb00:2d7:3c7:471::", 60, 41, inner6), VerdictRedirect, toSF, nil},
			{"outbound: DA shifted, hop limit - 1, no SRH", "sf", fromSF, VerdictRedirect,
				eth(macNext, macNode, 0x86dd, ip6(sidIn, a6("fcbb:bb00:3c7:471::"), 41, 59, inner6)), nil},
			{"an earlier uSID is active: not ours yet", "net", usidPkt("fcbb:bb00:2d1:2d7:3c7::", 60, 41, inner6), VerdictNext, usidPkt("fcbb:bb00:2d1:2d7:3c7::", 60, 41, inner6), nil},
			{"invalid padding dropped", "net", usidPkt("fcbb:bb00:2d7:0:3c7::", 60, 41, inner6), VerdictDrop, nil, reason(DropCsidPadding)},
			{"invalid padding in the last C-SID dropped", "net", usidPkt("fcbb:bb00:2d7:3c7:0:0:0:1", 60, 41, inner6), VerdictDrop, nil, reason(DropCsidPadding)},
			{"another node's uSID: not ours", "net", usidPkt("fcbb:bb00:2d8:3c7::", 60, 41, inner6), VerdictNext, usidPkt("fcbb:bb00:2d8:3c7::", 60, 41, inner6), nil},
			{"hop limit 1", "net", usidPkt("fcbb:bb00:2d7:3c7::", 1, 41, inner6), VerdictDrop, nil, reason(DropHopLimit)},
		}},
		{"End.AD uSID, SRH: shift keeps SL, a consumed container moves on", []sidConf{{sid: px.String(), behavior: EndAD, inner: InnerIPv6, mac: true, usid: true}}, []step{
			{"inbound mid-container", "net", usidPkt("fcbb:bb00:2d7:3c7::", 60, 43, srh(41, []netip.Addr{eg, a6("fcbb:bb00:2d7:3c7::")}, 1, 0, nil, inner6)), VerdictRedirect, toSF, nil},
			{"outbound: shifted, SL 1 kept", "sf", fromSF, VerdictRedirect,
				eth(macNext, macNode, 0x86dd, ip6(sidIn, a6("fcbb:bb00:3c7::"), 43, 59, srh(41, []netip.Addr{eg, a6("fcbb:bb00:2d7:3c7::")}, 1, 0, nil, inner6))), nil},
			{"inbound, last uSID of its container", "net", usidPkt("fcbb:bb00:2d7::", 60, 43, srh(41, []netip.Addr{eg, px}, 1, 0, nil, inner6)), VerdictRedirect, toSF, nil},
			{"outbound: SL 0, DA the next entry", "sf", fromSF, VerdictRedirect,
				eth(macNext, macNode, 0x86dd, ip6(sidIn, eg, 43, 59, srh(41, []netip.Addr{eg, px}, 0, 0, nil, inner6))), nil},
			{"consumed, no SRH: nothing follows", "net", usidPkt("fcbb:bb00:2d7::", 60, 41, inner6), VerdictDrop, nil, reason(DropSLZero)},
		}},
		{"End.AS uSID: the configured headers carry the next container", []sidConf{{sid: px.String(), behavior: EndAS, inner: InnerIPv6, mac: true, usid: true,
			asSrc: "fc00:2::5", asSegs: []string{"fcbb:bb00:3c7:471::"}}}, []step{
			{"inbound mid-container", "net", usidPkt("fcbb:bb00:2d7:3c7:471::", 60, 41, inner6), VerdictRedirect, toSF, nil},
			{"invalid padding dropped", "net", usidPkt("fcbb:bb00:2d7:0:471::", 60, 41, inner6), VerdictDrop, nil, reason(DropCsidPadding)},
		}},
		{"End.AM uSID must end its container", []sidConf{{sid: px.String(), behavior: EndAM, inner: InnerIPv6, mac: true, usid: true}}, []step{
			{"mid-container dropped", "net", usidPkt("fcbb:bb00:2d7:3c7::", 60, 43, srh(17, []netip.Addr{eg, a6("fcbb:bb00:2d7:3c7::")}, 1, 0, nil, udp(1, 2, 8))), VerdictDrop, nil, reason(DropCsidAm)},
			{"last of its container: masqueraded as with a full SID", "net", usidPkt("fcbb:bb00:2d7::", 60, 43, srh(17, []netip.Addr{eg, px}, 1, 0, nil, udp(1, 2, 8))), VerdictRedirect,
				eth(macSF, macSFOut, 0x86dd, ip6(sidIn, eg, 43, 60, srh(17, []netip.Addr{eg, px}, 1, 0, nil, udp(1, 2, 8)))), nil},
		}},
		{"a full SID is never matched by its first 48 bits", []sidConf{{sid: "fcbb:bb00:2e0::", behavior: EndAD, inner: InnerIPv6, mac: true}, {sid: px.String(), behavior: EndAD, inner: InnerIPv6, mac: true, usid: true}}, []step{
			{"block:2e0:3c7:: passes", "net", usidPkt("fcbb:bb00:2e0:3c7::", 60, 41, inner6), VerdictNext, usidPkt("fcbb:bb00:2e0:3c7::", 60, 41, inner6), nil},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t)
			n.seed(t, tc.confs)
			for _, s := range tc.steps {
				n.runStep(t, s)
			}
		})
	}
}
