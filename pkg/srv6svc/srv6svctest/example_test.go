package srv6svctest_test

import (
	"fmt"
	"net/netip"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/srv6svctest"
)

// A handler that drops inner UDP to port 7, run on two frames.
func Example() {
	sid := netip.MustParseAddr("fc00:5::100")
	segs := []netip.Addr{netip.MustParseAddr("fc00:9::99"), netip.MustParseAddr("fc00:9::1"), sid}
	src := netip.MustParseAddr("fc00:1::1")
	h := srv6svctest.New(netip.PrefixFrom(sid, 128))
	rs := h.Run(func(p *srv6svc.Packet) srv6svc.Verdict {
		if in := p.Inner(); p.InnerProto() == 4 && in[9] == 17 && in[22] == 0 && in[23] == 7 {
			return srv6svc.Drop
		}
		return srv6svc.Forward
	},
		srv6svctest.Frame(src, segs, 2, srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1000, 7, []byte("echo"))),
		srv6svctest.Frame(src, segs, 2, srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1000, 53, []byte("dns"))),
	)
	for _, r := range rs {
		fmt.Println(r.Verdict, r.Sent, r.Dropped)
	}
	// Output:
	// drop false verdict
	// forward true
}
