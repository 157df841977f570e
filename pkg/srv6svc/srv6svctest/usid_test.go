package srv6svctest_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/srv6svctest"
)

// rfcEnd is RFC 9800's End with NEXT-C-SID (section 4.1.1), written from
// the RFC's pseudocode bit by bit, not from the library:
//
//	If (DA.Argument != 0) {
//	  Copy DA.Argument into the bits [LBL..(LBL+AL-1)] of the DA.
//	  Set the bits [(LBL+AL)..127] of the DA to zero.
//	} else { End as for a full SID: SL--, DA <- Segment List[SL] }
//
// with AL = 128 − LBL − NFL. It reports whether the container shifted.
func rfcEnd(da netip.Addr, lbl, nfl int) (netip.Addr, bool) {
	b := da.As16()
	bit := func(i int) bool { return b[i/8]&(0x80>>(i%8)) != 0 }
	al := 128 - lbl - nfl
	var arg []bool // DA.Argument: bits [LBL+NFL..127]
	nonzero := false
	for i := lbl + nfl; i < 128; i++ {
		arg = append(arg, bit(i))
		nonzero = nonzero || bit(i)
	}
	if !nonzero {
		return da, false
	}
	var out [16]byte
	set := func(i int, v bool) {
		if v {
			out[i/8] |= 0x80 >> (i % 8)
		}
	}
	for i := 0; i < lbl; i++ { // the Locator-Block stays
		set(i, bit(i))
	}
	for j := 0; j < al; j++ {
		set(lbl+j, arg[j])
	}
	return netip.AddrFrom16(out), true // bits LBL+AL..127 stay zero
}

var (
	usrc    = netip.MustParseAddr("fc00:1a::a")
	usid    = netip.MustParsePrefix("fcbb:bb00:2d0::/48")
	nextSeg = netip.MustParseAddr("fcbb:bb00:900:a00::")
)

// withDA is frame f with the outer destination da.
func withDA(f []byte, da netip.Addr) []byte {
	out := append([]byte(nil), f...)
	a := da.As16()
	copy(out[14+24:14+40], a[:])
	return out
}

// TestUSIDForwardRFC9800: a service bound to a uSID (F3216) forwards a
// container byte for byte as rfcEnd says: shifted while uSIDs follow
// (with or without an SRH, Segments Left and the SRH untouched), the next
// segment when consumed. Invalid padding never reaches the handler;
// SkipNext on a container with uSIDs to come is a bad verdict. Without
// Config.CSID (the library before uSIDs were wired) the container without
// SRH is malformed and the one with an SRH leaves with SL − 1.
func TestUSIDForwardRFC9800(t *testing.T) {
	inner := srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 4000, 9999, []byte("usid"))
	inner4 := srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 4000, 9999, []byte("usid"))
	h := srv6svctest.New(usid)
	h.CSID = srv6svc.F3216
	var seen []string
	fwd := func(p *srv6svc.Packet) srv6svc.Verdict {
		seen = append(seen, p.Outer().Dst.String())
		if p.Args() != 0 || !bytes.Equal(p.Inner()[len(p.Inner())-4:], []byte("usid")) {
			t.Errorf("%s: Args %d, inner %x: want 0 and the UDP packet", p.Outer().Dst, p.Args(), p.Inner())
		}
		return srv6svc.Forward
	}
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"three uSIDs, no SRH", srv6svctest.Container(usrc, netip.MustParseAddr("fcbb:bb00:2d0:3c7:4b6::"), inner)},
		{"IPv4 inner, no SRH", srv6svctest.Container(usrc, netip.MustParseAddr("fcbb:bb00:2d0:3c7::"), inner4)},
		{"a full container, no SRH", srv6svctest.Container(usrc, netip.MustParseAddr("fcbb:bb00:2d0:1:2:3:4:5"), inner)},
		{"uSIDs follow, SRH SL 1", srv6svctest.Frame(usrc, []netip.Addr{nextSeg, netip.MustParseAddr("fcbb:bb00:2d0:3c7::")}, 1, inner)},
		{"uSIDs follow, last segment (SL 0)", srv6svctest.Frame(usrc, []netip.Addr{netip.MustParseAddr("fcbb:bb00:2d0:3c7::"), nextSeg}, 0, inner)},
		{"consumed, SRH SL 1", srv6svctest.Frame(usrc, []netip.Addr{nextSeg, netip.MustParseAddr("fcbb:bb00:2d0::")}, 1, inner)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.Run(fwd, c.frame)[0]
			if !r.Sent {
				t.Fatalf("not sent: %s", r.Dropped)
			}
			da := netip.AddrFrom16([16]byte(c.frame[14+24 : 14+40]))
			want := c.frame
			if shifted, ok := rfcEnd(da, 32, 16); ok {
				want = withDA(c.frame, shifted)
			} else { // End for a full SID: SL − 1, DA ← Segment List[SL − 1]
				want = withDA(c.frame, nextSeg)
				want[14+40+3]--
			}
			if !bytes.Equal(r.Out, want) {
				t.Errorf("sent\n%x\nwant (RFC 9800 End with NEXT-C-SID)\n%x", r.Out, want)
			}
		})
	}
	if len(seen) != 6 {
		t.Errorf("the handler saw %d packets, want 6", len(seen))
	}

	for _, da := range []string{"fcbb:bb00:2d0:0:4b6::", "fcbb:bb00:2d0:3c7:0:0:0:1"} {
		r := h.Run(fwd, srv6svctest.Container(usrc, netip.MustParseAddr(da), inner))[0]
		if r.Ran || !strings.HasPrefix(r.Dropped, "malformed: uSID container with invalid padding") {
			t.Errorf("%s (invalid padding): ran %v, dropped %q; want malformed, never handled", da, r.Ran, r.Dropped)
		}
	}
	r := h.Run(func(*srv6svc.Packet) srv6svc.Verdict { return srv6svc.SkipNext },
		srv6svctest.Container(usrc, netip.MustParseAddr("fcbb:bb00:2d0:3c7:4b6::"), inner))[0]
	if r.Sent || r.Dropped != "bad verdict" {
		t.Errorf("skip-next on a container: sent %v, dropped %q; want a bad verdict", r.Sent, r.Dropped)
	}
	// No SRH: the SRH edits refuse, the payload setter writes the outer
	// Next Header, and the lengths follow.
	r = h.Run(func(p *srv6svc.Packet) srv6svc.Verdict {
		if p.HasSRH() || !p.CSIDFollows() || len(p.Segments()) != 0 || p.SetSegmentsLeft(1) == nil || p.AddTLV(7, []byte{1}) == nil {
			t.Errorf("no SRH: HasSRH %v, CSIDFollows %v, segments %v, or an SRH edit accepted", p.HasSRH(), p.CSIDFollows(), p.Segments())
		}
		if err := p.SetPayload(253, []byte("opaque!!")); err != nil {
			t.Error(err)
		}
		return srv6svc.Forward
	}, srv6svctest.Container(usrc, netip.MustParseAddr("fcbb:bb00:2d0:3c7::"), inner))[0]
	if !r.Sent || r.Out[14+6] != 253 || binary.BigEndian.Uint16(r.Out[14+4:]) != 8 || string(r.Out[14+40:]) != "opaque!!" {
		t.Errorf("SetPayload without SRH: sent %v %x", r.Sent, r.Out)
	}

	// Without CSID: what the library did before.
	full := srv6svctest.New(usid)
	if r := full.Run(fwd, srv6svctest.Container(usrc, netip.MustParseAddr("fcbb:bb00:2d0:3c7::"), inner))[0]; r.Ran {
		t.Error("a full-SID binding handled a container without SRH")
	}
}
