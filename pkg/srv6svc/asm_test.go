package srv6svc

import (
	"context"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/svctest"
	"github.com/segchain/segchain/internal/testutil"
)

// TestPrivilegedASM runs an SR-unaware function behind End.ASM: it drops
// UDP port 2 and rewrites the payload of the others; the packets leave
// with End applied, their SRH intact and valid inner checksums.
func TestPrivilegedASM(t *testing.T) {
	testutil.RequireTool(t, "tshark")
	tp := svctest.New(t, "h17a")
	s, err := Listen(Config{Name: "asm", SIDs: []netip.Prefix{sid("fc00:5::200/128")}, Netns: tp.NFV, Interfaces: []string{tp.NIn}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.ServeASM(ctx, func(inner []byte) InnerVerdict {
			// An SR-unaware function: it knows IPv6/UDP, nothing of SRv6.
			if len(inner) < 48 || inner[0]>>4 != 6 || inner[6] != protoUDP {
				return Pass
			}
			if binary.BigEndian.Uint16(inner[40:]) == 2 {
				return Discard
			}
			copy(inner[48:], "ASM!")
			return Modified
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = s.Release()
	})
	c := testutil.StartInboundCapture(t, tp.Tester, tp.TOut, "ip6 dst net fc00:9::/64", 2)
	tp.Send(t, "", `[srv6("fc00:5::200", [FINAL, NEXT, "fc00:5::200"], 2, IPv6(src="2001:db8::1", dst="2001:db8::2")/UDP(sport=sp, dport=9999)/Raw(b"x"*16)) for sp in (1, 2, 3)]`)
	rows := tsharkChecked(t, c.Wait(5*time.Second), "udp.srcport", "ipv6.dst", "ipv6.routing.segleft", "ipv6.routing.srh.addr", "udp.checksum.status", "udp.payload")
	if len(rows) != 2 {
		t.Fatalf("sink got %d packets, want 2 (port 2 discarded): %v", len(rows), rows)
	}
	for _, r := range rows {
		dst, _, _ := strings.Cut(r["ipv6.dst"], ",")
		if dst != svctest.Next || r["ipv6.routing.segleft"] != "1" || r["ipv6.routing.srh.addr"] != svctest.Final+","+svctest.Next+",fc00:5::200" {
			t.Errorf("End not applied or SRH changed: %v", r)
		}
		if r["udp.checksum.status"] != "1" || !strings.HasPrefix(r["udp.payload"], "41534d21") {
			t.Errorf("inner edit or checksum wrong: %v", r)
		}
	}
	if b, _ := Status(tp.NFV); len(b) != 1 || b[0].Kind != "End.ASM" {
		t.Errorf("status %+v: want one End.ASM binding", b)
	}
	if cn := s.Counters(); cn.DropVerdict != 1 || cn.TX != 2 {
		t.Errorf("counters %+v: want 1 dropped, 2 sent", cn)
	}
}
