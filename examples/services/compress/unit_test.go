package main

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/segchain/segchain/pkg/srv6svc/srv6svctest"
)

// TestRoundTrip (no root): compress then decompress gives the payload
// back, lengths and checksums right at every step; garbage is dropped.
func TestRoundTrip(t *testing.T) {
	sid := netip.MustParseAddr("fc00:5::100")
	segs := []netip.Addr{netip.MustParseAddr("fc00:9::99"), sid, sid}
	h := srv6svctest.New(netip.PrefixFrom(sid, 128))
	payload := bytes.Repeat([]byte("compressible "), 100)
	for _, inner := range [][]byte{
		srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1, 2, payload),
		srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 1, 2, payload),
	} {
		c := h.Run(newTransform(true, 6).handle, srv6svctest.Frame(netip.MustParseAddr("fc00:1::1"), segs, 2, inner))[0]
		if !c.Sent || len(c.Out) >= 54+56+len(inner) || !srv6svctest.Checksum(c.Out[54+56:]) {
			t.Fatalf("compress: sent %v (%s), %d bytes", c.Sent, c.Dropped, len(c.Out))
		}
		d := h.Run(newTransform(false, 6).handle, c.Out)[0] // SL 1: the same SID again
		if !d.Sent || !bytes.Equal(d.Out[54+56:], inner) {
			t.Errorf("decompress: sent %v (%s), inner differs", d.Sent, d.Dropped)
		}
		if g := h.Run(newTransform(false, 6).handle, srv6svctest.Frame(netip.MustParseAddr("fc00:1::1"), segs, 2, inner))[0]; g.Dropped != "verdict" {
			t.Errorf("decompressing plain data: %+v", g.Dropped)
		}
	}
}
