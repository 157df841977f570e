package nfperf

import (
	"net"
	"testing"

	"github.com/segchain/segchain/internal/fwrule"
	"github.com/segchain/segchain/internal/perf"
)

// TestFrame: the End.AN.NF recipe's packet is SRv6 to the SID (ARGS
// 0xa1) with SL 1, carrying a UDP packet to port 5000, which none of the
// recipe's rules (udp dport 10000+i) matches.
func TestFrame(t *testing.T) {
	env := &perf.Env{InMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, TxMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	for _, v4 := range []bool{false, true} {
		f, err := Frame(env, 3, perf.Params{Size: 64}, v4)
		if err != nil {
			t.Fatal(err)
		}
		p, err := fwrule.Extract(f[14:])
		if err != nil {
			t.Fatal(err)
		}
		fam := fwrule.IPv6
		if v4 {
			fam = fwrule.IPv4
		}
		if !p.HasSRH || p.SegsLeft != 1 || p.OuterDst != sidAddr(3) || !SID(3).Contains(p.OuterDst) ||
			p.DPort != 5000 || p.Family != fam {
			t.Errorf("v4 %v: packet %+v", v4, p)
		}
	}
}
