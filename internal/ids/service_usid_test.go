package ids

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/srv6svctest"
)

// TestFromServiceUSIDContainer: a packet a uSID binding gets without an
// SRH (the container holds the rest of the chain) is a packet without an
// SRH to the rules, every time, not an SRH with no segments (whose
// srv6.active would index an empty list), and its inner packet is
// inspected: the rule on it fires, srv6.present and srv6.active do not.
func TestFromServiceUSIDContainer(t *testing.T) {
	rules, err := Parse(strings.NewReader(`alert udp any any -> any 9999 (msg:"inner"; sid:1;)
alert ip any any -> any any (msg:"srh"; srv6.present; sid:2;)
alert ip any any -> any any (msg:"active"; srv6.active:fcbb:bb00::/32; sid:3;)
`), "usid.rules", nil)
	if err != nil {
		t.Fatal(err)
	}
	var eve bytes.Buffer
	e, err := New(rules, Options{Alerts: &eve})
	if err != nil {
		t.Fatal(err)
	}
	h := srv6svctest.New(netip.MustParsePrefix("fcbb:bb00:2d0::/48"))
	h.CSID = srv6svc.F3216
	inner := srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 4000, 9999, []byte("x"))
	frame := srv6svctest.Container(netip.MustParseAddr("fc00:1a::a"), netip.MustParseAddr("fcbb:bb00:2d0:3c7::"), inner)
	var s ServiceScratch
	for i := 0; i < 2; i++ { // the second time with the scratch's segment buffer in use
		eve.Reset()
		r := h.Run(func(sp *srv6svc.Packet) srv6svc.Verdict {
			p := s.FromService(sp)
			if p.Segments != nil {
				t.Errorf("segments %v, want none (no SRH)", p.Segments)
			}
			return ServiceVerdict(e.Inspect(p))
		}, frame)[0]
		lines := strings.Split(strings.TrimSpace(eve.String()), "\n")
		if !r.Sent || len(lines) != 1 || !strings.Contains(lines[0], `"signature_id":1,`) {
			t.Errorf("run %d: sent %v, alerts %q; want sent and only sid 1", i, r.Sent, lines)
		}
		s.segs = append(s.segs, netip.IPv6Unspecified())
	}
}
