package docs

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/segchain/segchain/internal/srh"
)

// writeTraces writes trace.pcap and trace.pcapng, the capture files the
// manual's dump examples read: SRv6 packets along the default domain's
// chain, with tags 1 and 7 and Segments Left 1 and 0.
func writeTraces(t *testing.T, dir string) {
	t.Helper()
	inner := make([]byte, 40)
	inner[0], inner[6] = 0x60, 59
	path := []netip.Addr{netip.MustParseAddr("fc00:2::1"), netip.MustParseAddr("fc00:4::1")}
	var frames [][]byte
	for _, tag := range []uint16{1, 7} {
		b, err := srh.BuildEncap(netip.MustParseAddr("fc00:1::1"), path, inner, srh.ProtoIPv6, srh.Options{Tag: tag})
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, b)
	}
	ts := time.Unix(1700000000, 0)
	f, err := os.Create(filepath.Join(dir, "trace.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeRaw); err != nil {
		t.Fatal(err)
	}
	for _, b := range frames {
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(b), Length: len(b)}, b); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	g, err := os.Create(filepath.Join(dir, "trace.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	ng, err := pcapgo.NewNgWriter(g, layers.LinkTypeRaw)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range frames {
		if err := ng.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(b), Length: len(b), InterfaceIndex: 0}, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := ng.Flush(); err != nil {
		t.Fatal(err)
	}
	g.Close()
}
