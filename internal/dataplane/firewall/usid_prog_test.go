package firewall

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/testutil"
)

// TestProgUSID: a uSID instance (F3216) applies End with NEXT-C-SID on
// accept: while its container holds another uSID the DA shifts (Segments
// Left unchanged, also without any SRH); a consumed container goes on to
// the SRH's next entry; a drop rule still drops. Expected frames are
// written from RFC 9800 4.1.1's pseudocode, not from bpf/lib/csid.h.
func TestProgUSID(t *testing.T) {
	tn := newTestNode(t)
	pfx := netip.MustParsePrefix("fcbb:bb00:3f1::/48")
	in := Instance{SID: pfx, Policy: fwrule.Accept, CSIDLBLen: 32, CSIDNFLen: 16,
		Rules: mustRules(t, fwrule.IPv6, "-p udp --dport 6666 -j DROP")}
	tn.seed(t, in)
	bad := testutil.IPv6(hostS, hostD, 17, 63, l4(1, 6666, 8))
	eg := a6("fcbb:bb00:4b6::")
	for _, s := range []struct {
		name    string
		in, out []byte
		verdict uint32
	}{
		{"no SRH, container with more uSIDs: DA shifted",
			testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, a6("fcbb:bb00:3f1:3c7:4b6::"), 41, 60, inner6)),
			testutil.Eth(macNext, macNode, 0x86dd, testutil.IPv6(sidIn, a6("fcbb:bb00:3c7:4b6::"), 41, 59, inner6)), vRedirect},
		{"SRH, container with more uSIDs: DA shifted, SL kept",
			testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, a6("fcbb:bb00:3f1:3c7::"), 43, 60, srh(41, []netip.Addr{sidEg, a6("fcbb:bb00:3f1:3c7::")}, 1, 0, inner6))),
			testutil.Eth(macNext, macNode, 0x86dd, testutil.IPv6(sidIn, a6("fcbb:bb00:3c7::"), 43, 59, srh(41, []netip.Addr{sidEg, a6("fcbb:bb00:3f1:3c7::")}, 1, 0, inner6))), vRedirect},
		{"SRH, consumed container: the next entry",
			testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, a6("fcbb:bb00:3f1::"), 43, 60, srh(41, []netip.Addr{eg, a6("fcbb:bb00:3f1::")}, 1, 0, inner6))),
			testutil.Eth(macNext, macNode, 0x86dd, testutil.IPv6(sidIn, eg, 43, 59, srh(41, []netip.Addr{eg, a6("fcbb:bb00:3f1::")}, 0, 0, inner6))), vRedirect},
		{"drop rule on the inner packet",
			testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, a6("fcbb:bb00:3f1:3c7:4b6::"), 41, 60, bad)), nil, vShot},
		{"another uSID: not this instance",
			testutil.Eth(macNode, macPeer, 0x86dd, testutil.IPv6(sidIn, a6("fcbb:bb00:3f2:3c7::"), 41, 60, inner6)), nil, vUnspec},
	} {
		v, out := tn.run(t, s.in)
		if v != s.verdict {
			t.Errorf("%s: verdict %d, want %d", s.name, int32(v), int32(s.verdict))
			continue
		}
		if s.out != nil {
			if diff := cmp.Diff(s.out, out); diff != "" {
				t.Errorf("%s: output (-want +got):\n%s", s.name, diff)
			}
		}
	}
	if st := tn.status(t, pfx); st.Counters.Packets != 4 || st.Rules[0].Packets != 1 {
		t.Errorf("counters: %d packets, rule 1 %d; want 4 and 1", st.Counters.Packets, st.Rules[0].Packets)
	}
}
