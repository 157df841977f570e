package srv6svctest_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/segchain/segchain/pkg/srv6svc"
	"github.com/segchain/segchain/pkg/srv6svc/srv6svctest"
)

var (
	src   = netip.MustParseAddr("fc00:1::1")
	sid   = netip.MustParseAddr("fc00:5::100")
	next  = netip.MustParseAddr("fc00:9::1")
	final = netip.MustParseAddr("fc00:9::99")
	segs  = []netip.Addr{final, next, sid}
	bound = netip.MustParsePrefix("fc00:5::100/128")
)

// srhOf returns the SRH of an Ethernet frame (no extension header before it).
func srhOf(t *testing.T, f []byte) []byte {
	t.Helper()
	if len(f) < 14+40+8 || f[14+6] != 43 {
		t.Fatalf("no SRH in %x", f)
	}
	s := f[54:]
	return s[:(int(s[1])+1)*8]
}

func dst(f []byte) netip.Addr { return netip.AddrFrom16([16]byte(f[14+24 : 14+40])) }

func TestForwardExactBytes(t *testing.T) {
	inner := srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1000, 53, []byte("query"))
	in := srv6svctest.Frame(src, segs, 2, inner)
	r := srv6svctest.New(bound).Run(func(p *srv6svc.Packet) srv6svc.Verdict {
		if p.Bound != bound || p.Outer().Dst != sid || p.SRH().SegmentsLeft != 2 {
			t.Errorf("packet: bound %s dst %s SL %d", p.Bound, p.Outer().Dst, p.SRH().SegmentsLeft)
		}
		return srv6svc.Forward
	}, in)[0]
	want := append([]byte(nil), in...)
	want[54+3] = 1 // SL
	n := next.As16()
	copy(want[14+24:], n[:])
	if !r.Sent || !bytes.Equal(r.Out, want) {
		t.Errorf("sent %v\n got %x\nwant %x", r.Sent, r.Out, want)
	}
}

func TestVerdicts(t *testing.T) {
	h := srv6svctest.New(bound)
	in := srv6svctest.Frame(src, segs, 2, srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 1, 2, nil))
	for _, tc := range []struct {
		v       srv6svc.Verdict
		sl      uint8
		dst     netip.Addr
		dropped string
	}{
		{srv6svc.Forward, 2, next, ""},
		{srv6svc.SkipNext, 2, final, ""},
		{srv6svc.GoLast, 2, final, ""},
		{srv6svc.Drop, 2, netip.Addr{}, "verdict"},
		{srv6svc.SkipNext, 1, netip.Addr{}, "bad verdict"},
	} {
		f := srv6svctest.Frame(src, segs, tc.sl, srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 1, 2, nil))
		r := h.Run(func(*srv6svc.Packet) srv6svc.Verdict { return tc.v }, f)[0]
		if r.Dropped != tc.dropped || (r.Sent && dst(r.Out) != tc.dst) {
			t.Errorf("%s at SL %d: dropped %q sent %v", tc.v, tc.sl, r.Dropped, r.Sent)
		}
	}
	// Malformed: the handler never runs.
	bad := append([]byte(nil), in...)
	bad[54+2] = 3 // routing type 3
	if r := h.Run(func(*srv6svc.Packet) srv6svc.Verdict { t.Error("ran"); return 0 }, bad)[0]; r.Ran || r.Dropped != "malformed: routing type is not 4" {
		t.Errorf("malformed: %+v", r)
	}
}

func TestSRHEdits(t *testing.T) {
	h := srv6svctest.New(bound)
	in := srv6svctest.Frame(src, segs, 2, srv6svctest.TCP4("10.0.0.1", "10.0.0.2", 1, 80, []byte("GET /")))
	r := h.Run(func(p *srv6svc.Packet) srv6svc.Verdict {
		p.SetTag(0xbeef)
		p.SetFlags(0x20)
		if err := p.AddTLV(0x80, []byte("meta")); err != nil {
			t.Fatal(err)
		}
		if err := p.SetSegmentsLeft(3); !errors.Is(err, srv6svc.ErrBadSRH) {
			t.Errorf("SL beyond last entry: %v", err)
		}
		return srv6svc.Forward
	}, in)[0]
	if !r.Sent {
		t.Fatalf("not sent: %s", r.Dropped)
	}
	s := srhOf(t, r.Out)
	if binary.BigEndian.Uint16(s[6:]) != 0xbeef || s[5] != 0x20 || s[3] != 1 || len(s) != 8+48+8 ||
		!bytes.Equal(s[56:62], []byte{0x80, 4, 'm', 'e', 't', 'a'}) || s[62] != 4 || s[63] != 0 {
		t.Errorf("SRH after edits: %x", s)
	}
	if binary.BigEndian.Uint16(r.Out[14+4:]) != uint16(len(r.Out)-54) || !srv6svctest.Checksum(r.Out[54+len(s):]) {
		t.Error("outer payload length or inner checksum wrong")
	}
	// Removing it again gives the original SRH back (SL, tag, flags aside).
	r2 := h.Run(func(p *srv6svc.Packet) srv6svc.Verdict {
		if n, err := p.RemoveTLVs(0x80); n != 1 || err != nil {
			t.Errorf("RemoveTLVs: %d %v", n, err)
		}
		return srv6svc.Forward
	}, r.Out)[0]
	if s2 := srhOf(t, r2.Out); !r2.Sent || len(s2) != 56 || binary.BigEndian.Uint16(s2[6:]) != 0xbeef {
		t.Errorf("SRH after RemoveTLVs: %x", s2)
	}
}

func TestSetSegmentsLeftAndSegment(t *testing.T) {
	r := srv6svctest.New(bound).Run(func(p *srv6svc.Packet) srv6svc.Verdict {
		if err := p.SetSegment(0, netip.MustParseAddr("fc00:9::42")); err != nil {
			t.Fatal(err)
		}
		if err := p.SetSegmentsLeft(1); err != nil { // the next segment is now segment 0
			t.Fatal(err)
		}
		return srv6svc.Forward
	}, srv6svctest.Frame(src, segs, 2, srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 1, 2, nil)))[0]
	if !r.Sent || dst(r.Out) != netip.MustParseAddr("fc00:9::42") || srhOf(t, r.Out)[3] != 0 {
		t.Errorf("%+v", r)
	}
}

func TestHMAC(t *testing.T) {
	key := []byte("secret")
	h := srv6svctest.New(bound)
	sign := func(p *srv6svc.Packet) srv6svc.Verdict {
		if err := p.SignHMAC(7, key); err != nil {
			t.Fatal(err)
		}
		return srv6svc.Forward
	}
	signed := h.Run(sign, srv6svctest.Frame(src, segs, 2, srv6svctest.UDP6("2001:db8::1", "2001:db8::2", 1, 2, nil)))[0]
	if !signed.Sent {
		t.Fatal(signed.Dropped)
	}
	// The signed packet, back at the SID (SL 2 again), verifies; an edit
	// of a covered field without re-signing drops it; re-signed or with
	// the HMAC removed, it leaves.
	again := append([]byte(nil), signed.Out...)
	again[54+3] = 2
	copy(again[14+24:], sid.AsSlice())
	for _, tc := range []struct {
		name    string
		edit    func(p *srv6svc.Packet)
		dropped string
		hmac    bool
	}{
		{"untouched", func(p *srv6svc.Packet) {}, "", true},
		{"tag (not covered)", func(p *srv6svc.Packet) { p.SetTag(9) }, "", true},
		{"flags, stale", func(p *srv6svc.Packet) { p.SetFlags(1) }, "bad verdict", true},
		{"flags, re-signed", func(p *srv6svc.Packet) { p.SetFlags(1); _ = p.SignHMAC(7, key) }, "", true},
		{"segments, removed", func(p *srv6svc.Packet) { _ = p.SetNextSegments(final); _ = p.RemoveHMAC() }, "", false},
	} {
		r := h.Run(func(p *srv6svc.Packet) srv6svc.Verdict {
			if !p.VerifyHMAC(key) || p.VerifyHMAC([]byte("other")) {
				t.Errorf("%s: received HMAC does not verify with its key only", tc.name)
			}
			tc.edit(p)
			return srv6svc.Forward
		}, again)[0]
		if r.Dropped != tc.dropped {
			t.Errorf("%s: dropped %q, want %q", tc.name, r.Dropped, tc.dropped)
		}
		if r.Sent && bytes.Contains(srhOf(t, r.Out), []byte{5, 38}) != tc.hmac {
			t.Errorf("%s: HMAC TLV present %v, want %v", tc.name, !tc.hmac, tc.hmac)
		}
	}
}

// TestPartialChecksum: a host's partial checksum (pseudo-header sum only)
// leaves complete.
func TestPartialChecksum(t *testing.T) {
	inner := srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1000, 53, []byte("data"))
	var ph uint32
	for i := 12; i < 20; i += 2 {
		ph += uint32(inner[i])<<8 | uint32(inner[i+1])
	}
	ph += 17 + uint32(len(inner)-20)
	for ph>>16 != 0 {
		ph = ph&0xffff + ph>>16
	}
	binary.BigEndian.PutUint16(inner[26:], uint16(ph))
	if srv6svctest.Checksum(inner) {
		t.Fatal("test packet's checksum is not partial")
	}
	for name, run := range map[string]func(h *srv6svctest.Harness, f []byte) srv6svctest.Result{
		"sync": func(h *srv6svctest.Harness, f []byte) srv6svctest.Result {
			return h.Run(func(*srv6svc.Packet) srv6svc.Verdict { return 0 }, f)[0]
		},
		"batch": func(h *srv6svctest.Harness, f []byte) srv6svctest.Result {
			return h.RunBatch(func([]*srv6svc.Packet, []srv6svc.Verdict) {}, f)[0]
		},
		"asm": func(h *srv6svctest.Harness, f []byte) srv6svctest.Result {
			return h.RunASM(func([]byte) srv6svc.InnerVerdict { return srv6svc.Pass }, f)[0]
		},
	} {
		r := run(srv6svctest.New(bound), srv6svctest.Frame(src, segs, 2, inner))
		if !r.Sent || !srv6svctest.Checksum(r.Out[54+56:]) {
			t.Errorf("%s: sent %v, inner checksum not completed", name, r.Sent)
		}
	}
}

func TestReadPCAP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	frames := [][]byte{
		srv6svctest.Frame(src, segs, 2, srv6svctest.UDP4("10.0.0.1", "10.0.0.2", 1, 7, nil)),
		srv6svctest.Frame(src, segs, 2, srv6svctest.TCP6("2001:db8::1", "2001:db8::2", 1, 80, nil)),
	}
	for _, fr := range frames {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(fr), Length: len(fr)}, fr); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	got, err := srv6svctest.ReadPCAP(path)
	if err != nil || len(got) != 2 || !bytes.Equal(got[1], frames[1]) {
		t.Fatalf("ReadPCAP: %d frames, %v", len(got), err)
	}
	rs := srv6svctest.New(bound).RunBatch(func(ps []*srv6svc.Packet, vs []srv6svc.Verdict) { vs[0] = srv6svc.Drop }, got...)
	if rs[0].Dropped != "verdict" || !rs[1].Sent {
		t.Errorf("%+v", rs)
	}
}

func TestTypedErrors(t *testing.T) {
	_, err := srv6svc.Listen(srv6svc.Config{Name: "", SIDs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	var ce *srv6svc.ConfigError
	if !errors.Is(err, srv6svc.ErrConfig) || !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Errorf("Listen with a bad config: %v", err)
	}
}
