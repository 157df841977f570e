package fwrule

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
)

func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"-s fc00:1::/64 -d fc00:d1::1 -p tcp --sport 1024: --dport 80 -j ACCEPT",
		`! -s fc00:1::1/128 -p udp -m udp --sport 1000:2000 -m comment --comment "udp range" -j DROP`,
		"-p ipv6-icmp --icmpv6-type port-unreachable -j REJECT --reject-with icmp6-adm-prohibited",
		"-m srh --inner-src fc00:a::1 ! --inner-dst 10.0.0.0/8 --srh-next-hdr 41 ! --srh-len-eq 4 --srh-segs-gt 1 --srh-last-lt 3 ! --srh-tag 5 --srh-psid fc00:a::/64 ! --srh-nsid fc00:2::/48 --srh-lsid fc00:3::1 -j SEG6 --seg6-action skip-next",
		"-A FORWARD -p tcp -j REJECT --reject-with tcp-reset",
		"-j SEG6 --seg6-action eval-args",
		`-m comment --comment 'a"b' -j DROP`,
		"-s ! fc00::1 -j DROP",
	} {
		f.Add(s, true)
	}
	f.Add("-s 10.0.0.0/255.0.0.0 -p icmp --icmp-type 3/3 -j DROP", false)
	f.Fuzz(func(t *testing.T, line string, v6 bool) {
		fam := IPv4
		if v6 {
			fam = IPv6
		}
		r, err := ParseLine(line, fam)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		s := r.String()
		back, err := ParseLine(s, IPv6)
		if err != nil {
			t.Fatalf("ParseLine(%q) ok but its String %q does not parse: %v", line, s, err)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("round trip of %q via %q:\n got %#v\nwant %#v", line, s, back, r)
		}
		// Parse on the words gives the same rule as ParseLine.
		if again, err := Parse(r.Args(), IPv6); err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("Parse(Args()) = %#v, %v", again, err)
		}
	})
}

func FuzzExtract(f *testing.F) {
	f.Add(encapUDP())
	e := encapUDP()
	e[40+3] = 0 // SL 0
	f.Add(e)
	e = encapUDP()
	e[40] = 6 // insert mode: TCP after the SRH
	f.Add(e)
	e = encapUDP()
	e[40+2] = 0 // routing type 0
	f.Add(e)
	f.Add([]byte{0x60, 0, 0, 0, 0, 8, 44, 64})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		orig := bytes.Clone(pkt)
		p, err := Extract(pkt)
		if !bytes.Equal(orig, pkt) {
			t.Fatal("Extract modified its input")
		}
		if err != nil {
			if _, ok := err.(*PacketError); !ok {
				t.Fatalf("error %T %v is not a *PacketError", err, err)
			}
			return
		}
		if p.HasPorts && !hasPorts(p.Proto) {
			t.Fatalf("ports for protocol %d", p.Proto)
		}
		if p.HasICMP && p.Proto != ProtoICMP && p.Proto != ProtoICMPv6 {
			t.Fatalf("ICMP for protocol %d", p.Proto)
		}
		if p.HasSRH {
			if p.SegsLeft > p.LastEntry || !p.LSID.IsValid() {
				t.Fatalf("inconsistent SRH %+v", p)
			}
			if p.PSID.IsValid() != (p.SegsLeft < p.LastEntry) || p.NSID.IsValid() != (p.SegsLeft > 0) {
				t.Fatalf("psid/nsid presence %+v", p)
			}
		}
		if (p.Family == IPv4) != p.OrigSrc.Is4() || !p.OuterSrc.Is6() {
			t.Fatalf("families %+v", p)
		}
	})
}

// TestFuzzCorpusFiles keeps the committed seed corpus parseable (go test
// runs the files under testdata/fuzz as regular cases as well).
func TestFuzzCorpusFiles(t *testing.T) {
	ents, err := os.ReadDir("testdata/fuzz/FuzzParseLine")
	if err != nil {
		t.Fatalf("no committed corpus: %v", err)
	}
	for _, e := range ents {
		b, err := os.ReadFile("testdata/fuzz/FuzzParseLine/" + e.Name())
		if err != nil || !strings.HasPrefix(string(b), "go test fuzz v1") {
			t.Errorf("%s: not a corpus file", e.Name())
		}
	}
}
