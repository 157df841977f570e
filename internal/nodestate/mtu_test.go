package nodestate

import (
	"net/netip"
	"testing"

	"github.com/segchain/segchain/internal/csid"
)

func segs(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.AddrFrom16([16]byte{0xfc, 0, 0, byte(i + 1), 15: 1})
	}
	return out
}

// TestOverhead checks Overhead against docs/deploy.md's table.
func TestOverhead(t *testing.T) {
	for _, tc := range []struct {
		mode string
		n    int
		hmac uint32
		want int
	}{
		{"encap", 1, 0, 40 + 8 + 16},
		{"encap", 3, 0, 40 + 8 + 16*3}, // web: nfv1-end, nfv2-end, egress: 96
		{"encap", 4, 0, 112},           // docs/deploy.md: 3 services + egress
		{"encap", 3, 7, 40 + 8 + 16*3 + 40},
		{"encap.red", 3, 0, 40 + 8 + 16*2},
		{"encap.red", 1, 0, 40}, // one uSID container holds the whole chain
		{"encap.red", 2, 0, 40 + 8 + 16},
		{"encap.red", 1, 7, 40 + 8 + 40},
		{"inline", 2, 0, 8 + 16*3},
		{"inline", 2, 7, 8 + 16*3 + 40},
		{"l2encap", 2, 0, 40 + 8 + 16*2 + 14},
		{"l2encap.red", 1, 0, 40 + 14},
	} {
		e := &Seg6Encap{Mode: tc.mode, Segs: segs(tc.n), HMACKeyID: tc.hmac}
		if got := e.Overhead(); got != tc.want {
			t.Errorf("%s with %d SIDs, hmac %d: overhead %d, want %d", tc.mode, tc.n, tc.hmac, got, tc.want)
		}
	}
}

// TestOverheadHeaderBytes: without HMAC or L2, Overhead is csid.HeaderBytes,
// which test/usid's TestHeaderBytes checks against what the kernel adds
// (tshark).
func TestOverheadHeaderBytes(t *testing.T) {
	for n := 1; n <= 12; n++ {
		for _, red := range []bool{false, true} {
			mode := "encap"
			if red {
				mode = "encap.red"
			}
			e := &Seg6Encap{Mode: mode, Segs: segs(n)}
			if got, want := e.Overhead(), csid.HeaderBytes(n, red); got != want {
				t.Errorf("%s with %d SIDs: %d, csid.HeaderBytes %d", mode, n, got, want)
			}
		}
	}
}
