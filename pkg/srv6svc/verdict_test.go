package srv6svc

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
)

// udpSport returns the inner UDP source port of an inner IPv6 or IPv4
// packet, 0 if there is none.
func udpSport(p *Packet) uint16 {
	in := p.Inner()
	switch {
	case p.InnerProto() == protoIPv6 && len(in) >= 48 && in[6] == protoUDP:
		return binary.BigEndian.Uint16(in[40:])
	case p.InnerProto() == protoIPv4 && len(in) >= 28 && in[9] == protoUDP:
		return binary.BigEndian.Uint16(in[int(in[0]&0xf)*4:])
	}
	return 0
}

func tsharkChecked(t *testing.T, pcap string, fields ...string) []map[string]string {
	return svctest.TsharkChecked(t, pcap, fields...)
}

func TestPrivilegedVerdicts(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	tp := svctest.New(t, "h17v")
	var mu sync.Mutex
	args := map[uint16]uint64{}
	h := func(p *Packet) Verdict {
		sp := udpSport(p)
		mu.Lock()
		args[sp] = p.Args()
		mu.Unlock()
		switch sp {
		case 2:
			return Drop
		case 3:
			return SkipNext
		case 4:
			return GoLast
		case 5:
			if err := p.SetNextSegments(netip.MustParseAddr("fc00:9::77"), netip.MustParseAddr("fc00:9::78")); err != nil {
				t.Errorf("SetNextSegments: %v", err)
			}
		case 6: // longer inner packet
			in := append([]byte(nil), p.Inner()...)
			in = append(in, bytes.Repeat([]byte("y"), 300)...)
			if err := p.SetInner(in); err != nil {
				t.Errorf("SetInner: %v", err)
			}
		case 7: // in-place edit of an IPv4 inner packet: TTL and payload
			in := p.Inner()
			in[8] = 7
			copy(in[28:], "EDITED")
			p.MarkInnerModified()
		case 8: // shorter inner packet
			if err := p.SetInner(p.Inner()[:len(p.Inner())-10]); err != nil {
				t.Errorf("SetInner: %v", err)
			}
		case 9: // skip-next with one segment left: cannot apply
			return SkipNext
		}
		return Forward
	}
	s := serve(t, tp, Config{Name: "verdicts", SIDs: []netip.Prefix{sid("fc00:5::100/128"), sid("fc00:5::1:0/112")}}, h, nil)
	c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 7)
	tp.Send(t, `
SEGS = [FINAL, NEXT, "fc00:9::50", "fc00:5::100"]
def u6(sp): return IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=sp, dport=9999)/Raw(b"x"*20)
def u4(sp): return IP(src="192.0.2.1", dst="198.51.100.1", ttl=40)/UDP(sport=sp, dport=9999)/Raw(b"x"*20)
`, `[srv6("fc00:5::100", SEGS, 3, u6(sp)) for sp in (1, 2, 3, 4, 5, 6, 8)] + [srv6("fc00:5::100", SEGS, 3, u4(7))] + [srv6("fc00:5::1:2a", [FINAL, "fc00:5::1:2a"], 1, u6(9))]`)
	rows := tsharkChecked(t, c.Wait(5*time.Second), "udp.srcport", "ipv6.dst", "ipv6.routing.segleft", "ipv6.routing.srh.last_entry",
		"ipv6.plen", "udp.length", "udp.checksum.status", "ip.checksum.status", "ip.ttl", "ip.len", "udp.payload")
	t.Logf("counters %+v", s.Counters())
	bySport := map[string]map[string]string{}
	for _, r := range rows {
		sp := r["udp.srcport"]
		if i := strings.IndexByte(sp, ','); i >= 0 {
			sp = sp[:i]
		}
		bySport[sp] = r
	}
	want := map[string]map[string]string{
		"1": {"ipv6.dst": "fc00:9::50", "ipv6.routing.segleft": "2"},
		"3": {"ipv6.dst": svctest.Next, "ipv6.routing.segleft": "1"},
		"4": {"ipv6.dst": svctest.Final, "ipv6.routing.segleft": "0"},
		"5": {"ipv6.dst": "fc00:9::77", "ipv6.routing.segleft": "1", "ipv6.routing.srh.last_entry": "2"},
		"6": {"ipv6.dst": "fc00:9::50", "udp.length": "328", "udp.checksum.status": "1"},
		"7": {"ipv6.dst": "fc00:9::50", "ip.ttl": "7", "ip.checksum.status": "1", "udp.checksum.status": "1", "ip.len": "48"},
		"8": {"ipv6.dst": "fc00:9::50", "udp.length": "18", "udp.checksum.status": "1"},
	}
	if len(rows) != len(want) {
		t.Errorf("sink got %d packets, want %d: %v", len(rows), len(want), rows)
	}
	for sp, fields := range want {
		r, ok := bySport[sp]
		if !ok {
			t.Errorf("sport %s: no packet at the sink", sp)
			continue
		}
		for f, v := range fields {
			got := r[f]
			if f == "ipv6.dst" { // the outer header's: the first occurrence
				got, _, _ = strings.Cut(got, ",")
			}
			if f == "udp.checksum.status" && got != "1" || f != "udp.checksum.status" && got != v {
				t.Errorf("sport %s: %s = %q, want %q (%v)", sp, f, r[f], v, r)
			}
		}
	}
	if r := bySport["7"]; r != nil && !strings.Contains(r["udp.payload"], "454449544544") {
		t.Errorf("sport 7: payload %q lacks the edit", r["udp.payload"])
	}
	cn := s.Counters()
	if cn.DropVerdict != 1 || cn.DropBadVerdict != 1 || cn.Modified != 3 {
		t.Errorf("counters %+v: want 1 dropped by verdict, 1 bad verdict, 3 modified", cn)
	}
	mu.Lock()
	defer mu.Unlock()
	if args[9] != 0x2a || args[1] != 0 {
		t.Errorf("ARGS: got %#x for the /112 binding, %#x for the /128, want 0x2a and 0", args[9], args[1])
	}
}
