package ids

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/segchain/segchain/internal/srh"
)

func TestFromWire(t *testing.T) {
	src := netip.MustParseAddr("fc00:1::1")
	path := addrs("fc00:2::f1:bad", "fc00:3::d6") // visiting order
	inner6 := pkt(t, "tcp", "2001:db8::1", "2001:db8::2", 40000, 80, "GET /etc/passwd")
	inner4 := pkt(t, "udp", "10.0.0.1", "10.0.0.2", 1, 53, "q")
	enc6, err := srh.BuildEncap(src, path, inner6, 41, srh.Options{Tag: 0x4242})
	if err != nil {
		t.Fatal(err)
	}
	enc4, err := srh.BuildEncap(src, path, inner4, 4, srh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := srh.BuildInsert(inner6, addrs("fc00:2::f1:7"), srh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l2, err := srh.BuildL2Encap(src, path, make([]byte, 60), srh.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var p Packet
	if err := FromWire(enc6, &p, 16); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(addrs("fc00:3::d6", "fc00:2::f1:bad"), p.Segments, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("segments (-want +got):\n%s", diff)
	}
	if p.SL != 1 || p.Args != 0x0bad || p.Tag != 0x4242 || p.OuterSrc != src || p.OuterDst != path[0] || !bytes.Equal(p.Inner, inner6) {
		t.Errorf("encap6: %+v", p)
	}
	if err := FromWire(enc4, &p, 0); err != nil || p.Args != 0 || !bytes.Equal(p.Inner, inner4) {
		t.Errorf("encap4: %v %+v", err, p)
	}
	// Insert mode: the inspected packet is the original one, SRH removed.
	if err := FromWire(ins, &p, 8); err != nil {
		t.Fatal(err)
	}
	if p.SL != 1 || p.Args != 7 || !bytes.Equal(p.Inner, inner6) {
		t.Errorf("insert: SL %d args %d\ninner %x\nwant  %x", p.SL, p.Args, p.Inner, inner6)
	}
	// Plain packets: inspected as they are, no SR metadata.
	if err := FromWire(inner6, &p, 16); err != nil || p.Segments != nil || !bytes.Equal(p.Inner, inner6) {
		t.Errorf("plain v6: %v %+v", err, p)
	}
	if err := FromWire(inner4, &p, 16); err != nil || p.Segments != nil || !bytes.Equal(p.Inner, inner4) {
		t.Errorf("plain v4: %v %+v", err, p)
	}
	if err := FromWire(l2, &p, 16); !errors.Is(err, ErrNotInspectable) {
		t.Errorf("L2 encap: err = %v, want ErrNotInspectable", err)
	}
	if err := FromWire(enc6[:50], &p, 16); err == nil {
		t.Error("truncated packet: no error")
	}
	if err := FromWire(enc6, &p, 65); err == nil {
		t.Error("args bits 65: no error")
	}
}
