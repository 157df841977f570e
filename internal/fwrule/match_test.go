package fwrule

import (
	"net/netip"
	"testing"
)

// Packets the classification cases use.
var (
	// encap mode, inner IPv6 TCP fc00:a::1:40000 → fc00:d1::1:80; SRH
	// [fc00:d1::e (0), fc00:3::d6 (1), fc00:2::f1:0 (2), fc00:9::1 (3)] SL 2.
	pktEncap = Packet{Family: IPv6, OrigSrc: a("fc00:a::1"), OrigDst: a("fc00:d1::1"), Proto: 6, HasPorts: true, SPort: 40000, DPort: 80,
		HasSRH: true, OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:2::f1:0"), NextHdr: 41, HdrLen: 8, SegsLeft: 2, LastEntry: 3, Tag: 5,
		PSID: a("fc00:9::1"), NSID: a("fc00:3::d6"), LSID: a("fc00:d1::e")}
	// insert mode, ICMPv6 echo request fc00:1::1 → fc00:d2::1; SRH
	// [fc00:d2::1, fc00:2::f1:0] SL 1: no previous SID.
	pktInsert = Packet{Family: IPv6, OrigSrc: a("fc00:1::1"), OrigDst: a("fc00:d2::1"), Proto: 58, HasICMP: true, ICMPType: 128,
		HasSRH: true, OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:2::f1:0"), NextHdr: 58, HdrLen: 4, SegsLeft: 1, LastEntry: 1,
		NSID: a("fc00:d2::1"), LSID: a("fc00:d2::1")}
	// SL 0: no next SID.
	pktLast = Packet{Family: IPv6, OrigSrc: a("fc00:1::1"), OrigDst: a("fc00:d2::1"), Proto: 17, HasPorts: true, SPort: 1, DPort: 2,
		HasSRH: true, OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:d2::1"), NextHdr: 17, HdrLen: 4, SegsLeft: 0, LastEntry: 1,
		PSID: a("fc00:2::f1:0"), LSID: a("fc00:d2::1")}
	// encap mode, inner IPv4 ICMP port unreachable 10.0.0.1 → 10.1.0.1.
	pktV4 = Packet{Family: IPv4, OrigSrc: a("10.0.0.1"), OrigDst: a("10.1.0.1"), Proto: 1, HasICMP: true, ICMPType: 3, ICMPCode: 3,
		HasSRH: true, OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:2::f1:0"), NextHdr: 4, HdrLen: 4, SegsLeft: 1, LastEntry: 1,
		NSID: a("fc00:3::d6"), LSID: a("fc00:3::d6")}
	// plain IPv6 UDP (no SRH).
	pktPlain = Packet{Family: IPv6, OrigSrc: a("fc00:1::1"), OrigDst: a("fc00:d1::1"), Proto: 17, HasPorts: true, SPort: 5000, DPort: 53,
		OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:d1::1")}
	// plain IPv6 non-first fragment of TCP: no ports.
	pktFrag = Packet{Family: IPv6, OrigSrc: a("fc00:1::1"), OrigDst: a("fc00:d1::1"), Proto: 6,
		OuterSrc: a("fc00:1::1"), OuterDst: a("fc00:d1::1")}
)

func TestMatches(t *testing.T) {
	tests := []struct {
		rule string
		fam  Family
		pkt  Packet
		want bool
	}{
		// basic mode: original addresses
		{"-s fc00:a::/64 -j DROP", IPv6, pktEncap, true},
		{"-s fc00:1::/64 -j DROP", IPv6, pktEncap, false}, // outer source is not the original
		{"! -s fc00:1::/64 -j DROP", IPv6, pktEncap, true},
		{"! -s fc00:a::/64 -j DROP", IPv6, pktEncap, false},
		{"-d fc00:d1::1 -j DROP", IPv6, pktEncap, true},
		{"-d fc00:2::/64 -j DROP", IPv6, pktEncap, false},
		{"! -d fc00:d1::/64 -j DROP", IPv6, pktEncap, false},
		{"-d fc00:d2::1 -j DROP", IPv6, pktInsert, true}, // insert: Segment List[0]
		{"-d fc00:2::f1:0 -j DROP", IPv6, pktInsert, false},
		{"-s fc00:1::1 -j DROP", IPv6, pktInsert, true},
		{"-s fc00:1::1 -d fc00:d1::1 -j DROP", IPv6, pktPlain, true},
		{"-s 10.0.0.0/8 -j DROP", IPv4, pktV4, true},
		{"! -s 10.0.0.0/8 -j DROP", IPv4, pktV4, false},
		{"-d 10.1.0.0/16 -j DROP", IPv4, pktV4, true},
		// family
		{"-j DROP", IPv4, pktEncap, false},
		{"-j DROP", IPv6, pktV4, false},
		{"! -s 192.168.0.0/16 -j DROP", IPv4, pktPlain, false},
		{"-j DROP", IPv4, pktV4, true},
		// protocol
		{"-p tcp -j DROP", IPv6, pktEncap, true},
		{"! -p tcp -j DROP", IPv6, pktEncap, false},
		{"-p udp -j DROP", IPv6, pktEncap, false},
		{"! -p udp -j DROP", IPv6, pktEncap, true},
		{"-p ipv6-icmp -j DROP", IPv6, pktInsert, true},
		{"-p tcp -j DROP", IPv6, pktFrag, true},
		{"-p icmp -j DROP", IPv4, pktV4, true},
		// ports
		{"-p tcp --dport 80 -j DROP", IPv6, pktEncap, true},
		{"-p tcp ! --dport 80 -j DROP", IPv6, pktEncap, false},
		{"-p tcp --dport 81:90 -j DROP", IPv6, pktEncap, false},
		{"-p tcp ! --dport 81:90 -j DROP", IPv6, pktEncap, true},
		{"-p tcp --sport 30000:40000 -j DROP", IPv6, pktEncap, true},
		{"-p tcp --sport 40001: -j DROP", IPv6, pktEncap, false},
		{"-p tcp ! --sport 40001: -j DROP", IPv6, pktEncap, true},
		{"-p tcp --sport 40000 --dport 80 -j DROP", IPv6, pktEncap, true},
		{"-p tcp --sport 40000 --dport 81 -j DROP", IPv6, pktEncap, false},
		{"-p udp --dport 53 -j DROP", IPv6, pktPlain, true},
		{"-p tcp --dport 53 -j DROP", IPv6, pktPlain, false},
		{"-p tcp --dport 0:65535 -j DROP", IPv6, pktFrag, false},   // no ports: never
		{"-p tcp ! --dport 80 -j DROP", IPv6, pktFrag, false},      // negated, still never
		{"-p tcp ! --sport 0:65535 -j DROP", IPv6, pktFrag, false}, // ditto
		// ICMP
		{"-p ipv6-icmp --icmpv6-type echo-request -j DROP", IPv6, pktInsert, true},
		{"-p ipv6-icmp ! --icmpv6-type echo-request -j DROP", IPv6, pktInsert, false},
		{"-p ipv6-icmp --icmpv6-type 128/0 -j DROP", IPv6, pktInsert, true},
		{"-p ipv6-icmp --icmpv6-type 128/1 -j DROP", IPv6, pktInsert, false},
		{"-p ipv6-icmp ! --icmpv6-type echo-reply -j DROP", IPv6, pktInsert, true},
		{"-p ipv6-icmp ! --icmpv6-type echo-reply -j DROP", IPv6, pktPlain, false}, // not ICMPv6
		{"-p icmp --icmp-type port-unreachable -j DROP", IPv4, pktV4, true},
		{"-p icmp --icmp-type destination-unreachable -j DROP", IPv4, pktV4, true},
		{"-p icmp --icmp-type any -j DROP", IPv4, pktV4, true},
		{"-p icmp ! --icmp-type any -j DROP", IPv4, pktV4, false},
		{"-p icmp --icmp-type 3/2:4 -j DROP", IPv4, pktV4, true},
		{"-p icmp --icmp-type 3/4:9 -j DROP", IPv4, pktV4, false},
		{"-p icmp --icmp-type 3/0:2 -j DROP", IPv4, pktV4, false},
		{"-p icmp ! --icmp-type 3/4:9 -j DROP", IPv4, pktV4, true},
		{"-p ipv6-icmp --icmpv6-type 128/0:3 -j DROP", IPv6, pktInsert, true},
		{"-p ipv6-icmp --icmpv6-type 255 -j DROP", IPv6, pktInsert, false}, // no "any" in ICMPv6
		{"-p icmp --icmp-type host-unreachable -j DROP", IPv4, pktV4, false},
		{"-p icmp ! --icmp-type echo-request -j DROP", IPv4, pktV4, true},
		// advanced: outer addresses, inner addresses
		{"-m srh -j DROP", IPv6, pktEncap, true},
		{"-m srh -j DROP", IPv6, pktPlain, false},
		{"-m srh ! --srh-tag 99 -j DROP", IPv6, pktPlain, false}, // never without an SRH
		{"-m srh -j DROP", IPv6, pktV4, true},                    // advanced rules apply to IPv4 originals too
		{"-s fc00:1::1 -m srh -j DROP", IPv6, pktEncap, true},
		{"-s fc00:a::1 -m srh -j DROP", IPv6, pktEncap, false},
		{"! -s fc00:1::1 -m srh -j DROP", IPv6, pktEncap, false},
		{"-d fc00:2::f1:0 -m srh -j DROP", IPv6, pktEncap, true},
		{"! -d fc00:2::/64 -m srh -j DROP", IPv6, pktEncap, false},
		{"-m srh --inner-src fc00:a::1 -j DROP", IPv6, pktEncap, true},
		{"-m srh ! --inner-src fc00:a::1 -j DROP", IPv6, pktEncap, false},
		{"-m srh --inner-dst fc00:d1::/64 -j DROP", IPv6, pktEncap, true},
		{"-m srh ! --inner-dst fc00:d1::/64 -j DROP", IPv6, pktEncap, false},
		{"-m srh --inner-dst fc00:d2::1 -j DROP", IPv6, pktInsert, true},
		{"-m srh --inner-src 10.0.0.0/8 -j DROP", IPv6, pktV4, true},
		{"-m srh ! --inner-src 10.0.0.0/8 -j DROP", IPv6, pktV4, false},
		{"-m srh ! --inner-src fc00::/8 -j DROP", IPv6, pktV4, false}, // other family: never
		{"-m srh --inner-src 10.0.0.0/8 -j DROP", IPv6, pktEncap, false},
		{"-p tcp --dport 80 -m srh -j DROP", IPv6, pktEncap, true},
		{"-p ipv6-icmp --icmpv6-type 3 -m srh -j DROP", IPv6, pktV4, false}, // ICMPv6 match on an IPv4 original
		// SRH fields
		{"-m srh --srh-next-hdr 41 -j DROP", IPv6, pktEncap, true},
		{"-m srh ! --srh-next-hdr 41 -j DROP", IPv6, pktEncap, false},
		{"-m srh --srh-next-hdr 4 -j DROP", IPv6, pktV4, true},
		{"-m srh --srh-len-eq 8 -j DROP", IPv6, pktEncap, true},
		{"-m srh ! --srh-len-eq 8 -j DROP", IPv6, pktEncap, false},
		{"-m srh --srh-len-gt 7 -j DROP", IPv6, pktEncap, true},
		{"-m srh --srh-len-gt 8 -j DROP", IPv6, pktEncap, false},
		{"-m srh ! --srh-len-gt 8 -j DROP", IPv6, pktEncap, true},
		{"-m srh --srh-len-lt 9 -j DROP", IPv6, pktEncap, true},
		{"-m srh --srh-len-lt 8 -j DROP", IPv6, pktEncap, false},
		{"-m srh --srh-segs-eq 2 -j DROP", IPv6, pktEncap, true},
		{"-m srh --srh-segs-eq 1 -j DROP", IPv6, pktEncap, false},
		{"-m srh ! --srh-segs-eq 1 -j DROP", IPv6, pktEncap, true},
		{"-m srh --srh-segs-gt 1 -j DROP", IPv6, pktEncap, true},
		{"-m srh --srh-segs-gt 2 -j DROP", IPv6, pktEncap, false},
		{"-m srh --srh-segs-lt 3 -j DROP", IPv6, pktEncap, true},
		{"-m srh ! --srh-segs-lt 3 -j DROP", IPv6, pktEncap, false},
		{"-m srh --srh-last-eq 3 -j DROP", IPv6, pktEncap, true},
		{"-m srh --srh-last-gt 3 -j DROP", IPv6, pktEncap, false},
		{"-m srh ! --srh-last-gt 3 -j DROP", IPv6, pktEncap, true},
		{"-m srh --srh-last-lt 2 -j DROP", IPv6, pktInsert, true},
		{"-m srh --srh-last-lt 1 -j DROP", IPv6, pktInsert, false},
		{"-m srh --srh-tag 5 -j DROP", IPv6, pktEncap, true},
		{"-m srh ! --srh-tag 5 -j DROP", IPv6, pktEncap, false},
		{"-m srh --srh-tag 0 -j DROP", IPv6, pktInsert, true},
		// previous / next / last SID, and absent segments
		{"-m srh --srh-psid fc00:9::/64 -j DROP", IPv6, pktEncap, true},
		{"-m srh ! --srh-psid fc00:9::/64 -j DROP", IPv6, pktEncap, false},
		{"-m srh ! --srh-psid fc00:8::/64 -j DROP", IPv6, pktEncap, true},
		{"-m srh --srh-psid ::/0 -j DROP", IPv6, pktInsert, false},      // SL = last entry: no previous SID
		{"-m srh ! --srh-psid fc00::1 -j DROP", IPv6, pktInsert, false}, // negated: still false (ip6t_srh)
		{"-m srh --srh-nsid fc00:3::d6 -j DROP", IPv6, pktEncap, true},
		{"-m srh ! --srh-nsid fc00:3::d6 -j DROP", IPv6, pktEncap, false},
		{"-m srh --srh-nsid ::/0 -j DROP", IPv6, pktLast, false},      // SL = 0: no next SID
		{"-m srh ! --srh-nsid fc00::1 -j DROP", IPv6, pktLast, false}, // negated: still false
		{"-m srh --srh-psid fc00:2::f1:0 -j DROP", IPv6, pktLast, true},
		{"-m srh --srh-lsid fc00:d1::e -j DROP", IPv6, pktEncap, true},
		{"-m srh ! --srh-lsid fc00:d1::e -j DROP", IPv6, pktEncap, false},
		{"-m srh --srh-lsid fc00:d2::/64 -j DROP", IPv6, pktInsert, true},
		// all together
		{"-s fc00:1::/64 -d fc00:2::/64 -p tcp --sport 40000 --dport 80 -m srh --inner-src fc00:a::/64 --inner-dst fc00:d1::1 --srh-next-hdr 41 --srh-len-eq 8 --srh-segs-eq 2 --srh-last-eq 3 --srh-tag 5 --srh-psid fc00:9::1 --srh-nsid fc00:3::d6 --srh-lsid fc00:d1::e -j SEG6 --seg6-action skip-next", IPv6, pktEncap, true},
		{"-s fc00:1::/64 -d fc00:2::/64 -p tcp --sport 40000 --dport 80 -m srh --inner-src fc00:a::/64 --inner-dst fc00:d1::1 --srh-next-hdr 41 --srh-len-eq 8 --srh-segs-eq 2 --srh-last-eq 3 --srh-tag 6 --srh-psid fc00:9::1 --srh-nsid fc00:3::d6 --srh-lsid fc00:d1::e -j SEG6 --seg6-action skip-next", IPv6, pktEncap, false},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			r, err := ParseLine(tt.rule, tt.fam)
			if err != nil {
				t.Fatal(err)
			}
			if got := Matches(r, tt.pkt); got != tt.want {
				t.Errorf("Matches(%s, %+v) = %v, want %v", tt.rule, tt.pkt, got, tt.want)
			}
		})
	}
}

func TestClassifyFirstMatchWins(t *testing.T) {
	var rules []Rule
	for _, l := range []string{
		"-p udp -j ACCEPT",
		"-m srh --srh-tag 5 -j SEG6 --seg6-action skip-next",
		"-s fc00:a::/64 -j DROP",
		"-j SEG6 --seg6-action eval-args",
	} {
		r, err := ParseLine(l, IPv6)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	for _, tt := range []struct {
		pkt  Packet
		want int
	}{{pktPlain, 0}, {pktEncap, 1}, {pktInsert, 3}, {pktV4, -1}} {
		i, ok := Classify(rules, tt.pkt)
		if i != tt.want || ok != (tt.want >= 0) {
			t.Errorf("Classify(%v) = %d, %v; want %d", tt.pkt.OrigDst, i, ok, tt.want)
		}
	}
	if i, ok := Classify(nil, pktPlain); i != -1 || ok {
		t.Errorf("Classify(nil) = %d, %v", i, ok)
	}
	_ = netip.Addr{}
}
