package srh

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzSeeds returns well-formed packets of every kind the builders make.
func fuzzSeeds(t testing.TB) [][]byte {
	src := netip.MustParseAddr("fd00::1")
	path := addrs("fc00:1::100", "fc00:2::200", "fc00:3::300")
	inner := rawIPv6("2001:db8::1", "2001:db8::2", ProtoUDP, 63, udpPayload)
	tlvs := []TLV{NewHMACTLV(true, 42, bytes.Repeat([]byte{0xaa}, 32)), {Type: 99, Value: []byte{1, 2, 3}}}
	var out [][]byte
	add := func(b []byte, err error) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	add(BuildEncap(src, path, inner, ProtoIPv6, Options{Tag: 7}))
	add(BuildEncap(src, path[:1], []byte{0x45, 0, 0, 20}, ProtoIPv4, Options{TLVs: tlvs}))
	add(BuildEncap(src, path, inner, ProtoIPv6, Options{Reduced: true}))
	add(BuildL2Encap(src, path[:2], make([]byte, 14), Options{TLVs: []TLV{NewPad1()}}))
	add(BuildInsert(inner, path, Options{TLVs: tlvs[1:]}))
	hbh := append([]byte{ProtoDstOpts, 0, 1, 4, 0, 0, 0, 0, ProtoUDP, 0, 1, 4, 0, 0, 0, 0}, udpPayload...)
	add(BuildInsert(rawIPv6("2001:db8::1", "2001:db8::2", ProtoHopByHop, 63, hbh), path[:1], Options{}))
	return out
}

func FuzzParseSRH(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		if p, err := DecodePacket(b); err == nil && p.SRH != nil {
			f.Add(b[p.SRHOffset:])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSRH(b)
		if err != nil {
			if Reason(err) == "" {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		enc, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("re-encode of an accepted srh: %v", err)
		}
		if s.Len() > len(b) || !bytes.Equal(enc, b[:s.Len()]) {
			t.Fatalf("re-encode not byte-exact:\n in %x\nout %x", b, enc)
		}
		s2, err := ParseSRH(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if diff := cmp.Diff(s, s2, cmpAddr); diff != "" {
			t.Fatalf("decode→encode→decode unstable (-first +second):\n%s", diff)
		}
	})
}

func FuzzDecodePacket(f *testing.F) {
	for _, b := range fuzzSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePacket(b)
		if err != nil {
			if Reason(err) == "" {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		_ = p.Path()
		_ = p.FinalDestination()
		if p.SRH != nil {
			_ = p.SRH.Active()
		}
		enc, err := p.MarshalBinary()
		if err != nil {
			t.Fatalf("re-encode of an accepted packet: %v", err)
		}
		if want := b[:40+int(p.PayloadLen)]; !bytes.Equal(enc, want) {
			t.Fatalf("re-encode not byte-exact:\n in %x\nout %x", want, enc)
		}
		p2, err := DecodePacket(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		p.Trailer = nil
		if diff := cmp.Diff(p, p2, pktOpts); diff != "" {
			t.Fatalf("decode→encode→decode unstable (-first +second):\n%s", diff)
		}
	})
}
