package dump

import (
	"context"
	"io"
	"net/netip"
	"os"
	"testing"

	"github.com/segchain/segchain/internal/srh"
)

// BenchmarkDecodeFormat measures the per-packet hot path (decode + render)
// on an in-memory SRv6 frame.
func BenchmarkDecodeFormat(b *testing.B) {
	inner := udp6("2001:db8::1", "2001:db8::2", 1000, 53, make([]byte, 64))
	enc, err := srh.BuildEncap(a("fd00::1"), []netip.Addr{a("fc00:1::1"), a("fc00:2::2"), a("fc00:3::3")}, inner, srh.ProtoIPv6,
		srh.Options{TLVs: []srh.TLV{srh.NewHMACTLV(true, 1, make([]byte, 32))}})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pr   Printer
	}{{"line", Printer{Format: FormatLine}}, {"tree", Printer{Format: FormatTree}}, {"json", Printer{Format: FormatJSON}}} {
		b.Run(tc.name, func(b *testing.B) {
			var r Record
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			for b.Loop() {
				r.Decode(LinkRaw, enc)
				buf = tc.pr.Append(buf[:0], &r)
			}
		})
	}
}

// BenchmarkRunFile runs the whole pipeline on $SEGCHAIN_BENCH_PCAP (skipped
// when unset; scripts/bench-dump.sh makes one).
func BenchmarkRunFile(b *testing.B) {
	path := os.Getenv("SEGCHAIN_BENCH_PCAP")
	if path == "" {
		b.Skip("set SEGCHAIN_BENCH_PCAP to a pcap file")
	}
	for b.Loop() {
		src, err := OpenFile(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Run(context.Background(), Config{Source: src, Printer: Printer{Format: FormatLine}, Filter: NewFilter(), Out: io.Discard}); err != nil {
			b.Fatal(err)
		}
		src.Close()
	}
}
