package usid

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/csid"
	"github.com/segchain/segchain/internal/testutil"
)

// TestHeaderBytes measures the headers the kernel's headend adds for a
// chain of 1..10 functions plus an egress, full SIDs (encap, SRH of n+1)
// vs F3216 and F4816 (the fewest containers of six and of five uSIDs,
// encap.red), on packets tshark dissects, and checks them against
// csid.HeaderBytes. The table goes to
// docs/benchmarks.md (#31): go test ./test/usid -run TestHeaderBytes -v.
func TestHeaderBytes(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "ushdr")
	testutil.Exec(t, ns, "ip", "link", "add", "h0", "type", "veth", "peer", "name", "h1")
	testutil.Exec(t, ns, "ip", "link", "set", "lo", "up")
	testutil.Exec(t, ns, "ip", "link", "set", "h0", "up")
	testutil.Exec(t, ns, "ip", "link", "set", "h1", "up")
	testutil.Exec(t, ns, "ip", "-6", "addr", "add", "fc00:99::1/64", "dev", "h0", "nodad")
	testutil.Exec(t, ns, "ip", "-6", "neigh", "add", "fc00:99::2", "lladdr", "02:00:00:00:00:02", "dev", "h0")
	for _, p := range []string{"fcbb:bb00::/32", "2001:db8:aa::/48", "fc00:2::/32"} {
		testutil.Exec(t, ns, "ip", "-6", "route", "add", p, "via", "fc00:99::2", "dev", "h0")
	}
	f := csid.F3216(netip.MustParsePrefix("fcbb:bb00::/32"))
	f48 := csid.Format{Block: netip.MustParsePrefix("2001:db8:aa::/48"), NFLen: 16}
	var script strings.Builder
	script.WriteString("import socket\ns = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n")
	type row struct{ n, full, usid, fullWant, usidWant, u48, u48Want, c48 int }
	var rows []row
	for n := 1; n <= 10; n++ {
		var full []string
		var hops []csid.Hop
		for i := 1; i <= n+1; i++ {
			full = append(full, fmt.Sprintf("fc00:2:%d::%x", n, i))
			hops = append(hops, csid.Hop{USID: true, Value: uint32(0x100*i + n), Last: i == n+1})
		}
		packed := f.Pack(hops)
		var us []string
		for _, a := range packed {
			us = append(us, a.String())
		}
		packed48 := f48.Pack(hops)
		var us48 []string
		for _, a := range packed48 {
			us48 = append(us48, a.String())
		}
		testutil.Exec(t, ns, "ip", "-6", "route", "add", fmt.Sprintf("fc00:4d:%d::1/128", n), "encap", "seg6", "mode", "encap",
			"segs", strings.Join(full, ","), "dev", "h0")
		testutil.Exec(t, ns, "ip", "-6", "route", "add", fmt.Sprintf("fc00:4d:%d::2/128", n), "encap", "seg6", "mode", "encap.red",
			"segs", strings.Join(us, ","), "dev", "h0")
		testutil.Exec(t, ns, "ip", "-6", "route", "add", fmt.Sprintf("fc00:4d:%d::3/128", n), "encap", "seg6", "mode", "encap.red",
			"segs", strings.Join(us48, ","), "dev", "h0")
		// A kernel socket: the packet must take the encap routes (scapy's
		// send routes by itself).
		fmt.Fprintf(&script, "s.sendto(b'x'*16, ('fc00:4d:%d::1', %d))\n", n, 1000+n)
		fmt.Fprintf(&script, "s.sendto(b'x'*16, ('fc00:4d:%d::2', %d))\n", n, 2000+n)
		fmt.Fprintf(&script, "s.sendto(b'x'*16, ('fc00:4d:%d::3', %d))\n", n, 3000+n)
		rows = append(rows, row{n: n, fullWant: csid.HeaderBytes(n+1, false), usidWant: csid.HeaderBytes(len(packed), true),
			u48Want: csid.HeaderBytes(len(packed48), true), c48: len(packed48)})
	}
	c := testutil.StartInboundCapture(t, ns, "h1", "ip6 and (ip6[6] == 43 or ip6[6] == 41)", 30)
	testutil.RunScapyIn(t, ns, script.String())
	// The inner packet is 40 + 8 + 16 = 64 bytes; its UDP port says which.
	for _, p := range testutil.Tshark(t, c.Wait(10*time.Second), "frame.len", "udp.dstport") {
		l, _ := strconv.Atoi(p.First("frame.len"))
		port, _ := strconv.Atoi(p.First("udp.dstport"))
		hdr := l - 14 - 64
		switch {
		case port > 3000:
			rows[port-3001].u48 = hdr
		case port > 2000:
			rows[port-2001].usid = hdr
		case port > 1000:
			rows[port-1001].full = hdr
		}
	}
	t.Log("| functions | full SIDs: header bytes | F3216: header bytes (containers) | ratio | F4816: header bytes (containers) | ratio |")
	t.Log("|---|---|---|---|---|---|")
	for _, r := range rows {
		if r.full != r.fullWant || r.usid != r.usidWant || r.u48 != r.u48Want {
			t.Errorf("%d functions: measured %d / %d / %d header bytes, want %d / %d / %d", r.n, r.full, r.usid, r.u48, r.fullWant, r.usidWant, r.u48Want)
		}
		if want := (r.n + 1 + 4) / 5; r.c48 != want {
			t.Errorf("%d functions: %d F4816 containers, want %d (five uSIDs each)", r.n, r.c48, want)
		}
		t.Logf("| %d | %d | %d (%d) | %.2f× | %d (%d) | %.2f× |", r.n, r.full, r.usid, (r.n+1+5)/6, float64(r.full)/float64(max(r.usid, 1)),
			r.u48, r.c48, float64(r.full)/float64(max(r.u48, 1)))
	}
	if rows[4].full < 3*rows[4].usid {
		t.Errorf("5 functions: %d vs %d header bytes, want at least 3× fewer", rows[4].full, rows[4].usid)
	}
}
