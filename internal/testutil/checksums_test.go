package testutil

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// errRecorder is a testing.TB that records Errorf instead of failing.
type errRecorder struct {
	testing.TB
	errs []string
}

func (r *errRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *errRecorder) Helper() {}

// VerifyChecksums is tshark's verdict: a good ICMPv6 error passes, the same
// with its checksum off by one fails, naming the frame.
func TestVerifyChecksums(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	quoted := IPv6(netip.MustParseAddr("fc00::1"), netip.MustParseAddr("fc00::2"), 59, 64, nil)
	good := Eth(mac, mac, 0x86dd, ICMP6Error(netip.MustParseAddr("fc00::9"), quoted, 1, 4, 0))
	bad := append([]byte(nil), good...)
	bad[14+40+3]++ // the ICMPv6 checksum's low byte
	r := &errRecorder{TB: t}
	VerifyChecksums(r, [][]byte{good, bad}, []string{"good", "bad"}, "icmpv6.checksum.status")
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "frame 2 bad: tshark icmpv6.checksum.status = 0") {
		t.Errorf("errors %q, want one for frame 2 (bad)", r.errs)
	}
}

// Tshark checks every ICMPv6 checksum it dissects, whatever fields the
// caller asked for.
func TestTsharkChecksICMPv6(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	quoted := IPv6(netip.MustParseAddr("fc00::1"), netip.MustParseAddr("fc00::2"), 59, 64, nil)
	frame := Eth(mac, mac, 0x86dd, ICMP6Error(netip.MustParseAddr("fc00::9"), quoted, 1, 4, 0))
	bad := append([]byte(nil), frame...)
	bad[14+40+3]++
	for _, tc := range []struct {
		name  string
		frame []byte
		errs  int
	}{{"good", frame, 0}, {"bad", bad, 1}} {
		path := writePcap(t, tc.frame)
		r := &errRecorder{TB: t}
		pkts := Tshark(r, path, "icmpv6.type")
		if len(pkts) != 1 || pkts[0].First("icmpv6.type") != "1" || len(r.errs) != tc.errs {
			t.Errorf("%s: packets %v, errors %q; want one type-1 packet and %d error(s)", tc.name, pkts, r.errs, tc.errs)
		}
	}
}
