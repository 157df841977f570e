package fwrule

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func pfx(s string, neg bool) *Prefix { return &Prefix{Prefix: netip.MustParsePrefix(s), Neg: neg} }

func TestParseGood(t *testing.T) {
	tests := []struct {
		name  string
		fam   Family
		line  string
		want  Rule
		canon string
	}{
		{"basic 5-tuple", IPv6, "-s fc00:1::/64 -d fc00:d1::1 -p tcp --sport 1024: --dport 80 -j ACCEPT",
			Rule{Family: IPv6, Src: pfx("fc00:1::/64", false), Dst: pfx("fc00:d1::1/128", false), Proto: &Value8{Value: 6},
				SPort: &PortRange{Lo: 1024, Hi: 65535}, DPort: &PortRange{Lo: 80, Hi: 80}, Target: Target{Kind: Accept}},
			"-s fc00:1::/64 -d fc00:d1::1/128 -p tcp --sport 1024:65535 --dport 80 -j ACCEPT"},
		{"save-file form", IPv6, `-A FORWARD ! -s fc00:1::1/128 -p udp -m udp --sport 1000:2000 -m comment --comment "udp range" -j DROP`,
			Rule{Family: IPv6, Src: pfx("fc00:1::1/128", true), Proto: &Value8{Value: 17}, SPort: &PortRange{Lo: 1000, Hi: 2000},
				Comment: "udp range", Target: Target{Kind: Drop}},
			`! -s fc00:1::1/128 -p udp --sport 1000:2000 -m comment --comment "udp range" -j DROP`},
		{"long option names", IPv6, "--source fc00::/16 --destination fc00::1 --protocol udp --source-port :1023 ! --destination-port 53 --jump DROP",
			Rule{Family: IPv6, Src: pfx("fc00::/16", false), Dst: pfx("fc00::1/128", false), Proto: &Value8{Value: 17},
				SPort: &PortRange{Lo: 0, Hi: 1023}, DPort: &PortRange{Lo: 53, Hi: 53, Neg: true}, Target: Target{Kind: Drop}},
			"-s fc00::/16 -d fc00::1/128 -p udp --sport 0:1023 ! --dport 53 -j DROP"},
		{"address masked, mask notation", IPv6, "-s fc00:1::5/ffff:ffff:: -d fc00::1/64 -j DROP",
			Rule{Family: IPv6, Src: pfx("fc00:1::/32", false), Dst: pfx("fc00::/64", false), Target: Target{Kind: Drop}},
			"-s fc00:1::/32 -d fc00::/64 -j DROP"},
		{"negated protocol number", IPv6, "! -p 47 -j DROP",
			Rule{Family: IPv6, Proto: &Value8{Value: 47, Neg: true}, Target: Target{Kind: Drop}}, "! -p gre -j DROP"},
		{"icmpv6 name", IPv6, "-p icmpv6 --icmpv6-type echo-request -j ACCEPT",
			Rule{Family: IPv6, Proto: &Value8{Value: 58}, ICMP: &ICMP{Type: 128, AnyCode: true}, Target: Target{Kind: Accept}},
			"-p ipv6-icmp --icmpv6-type 128 -j ACCEPT"},
		{"icmpv6 name with code", IPv6, "-p ipv6-icmp -m icmp6 ! --icmpv6-type port-unreachable -j DROP",
			Rule{Family: IPv6, Proto: &Value8{Value: 58}, ICMP: &ICMP{Type: 1, Code: 4, Neg: true}, Target: Target{Kind: Drop}},
			"-p ipv6-icmp ! --icmpv6-type 1/4 -j DROP"},
		{"icmp numeric type/code", IPv4, "-p icmp --icmp-type 3/3 -j DROP",
			Rule{Family: IPv4, Proto: &Value8{Value: 1}, ICMP: &ICMP{Type: 3, Code: 3}, Target: Target{Kind: Drop}},
			"-4 -p icmp --icmp-type 3/3 -j DROP"},
		{"icmp name", IPv4, "-s 10.1.2.3/8 -p icmp --icmp-type destination-unreachable -j REJECT --reject-with host-prohib",
			Rule{Family: IPv4, Src: pfx("10.0.0.0/8", false), Proto: &Value8{Value: 1}, ICMP: &ICMP{Type: 3, AnyCode: true},
				Target: Target{Kind: Reject, RejectWith: "icmp-host-prohibited"}},
			"-4 -s 10.0.0.0/8 -p icmp --icmp-type 3 -j REJECT --reject-with icmp-host-prohibited"},
		{"icmp any", IPv4, "-p icmp -m icmp --icmp-type any -j DROP",
			Rule{Family: IPv4, Proto: &Value8{Value: 1}, ICMP: &ICMP{Type: 255, AnyCode: true, AnyType: true}, Target: Target{Kind: Drop}},
			"-4 -p icmp --icmp-type any -j DROP"},
		{"icmp type 255 is any", IPv4, "-p icmp --icmp-type 255/255 -j DROP",
			Rule{Family: IPv4, Proto: &Value8{Value: 1}, ICMP: &ICMP{Type: 255, AnyCode: true, AnyType: true}, Target: Target{Kind: Drop}},
			"-4 -p icmp --icmp-type any -j DROP"},
		{"icmp code range", IPv4, "-p icmp --icmp-type 3/1:3 -j DROP",
			Rule{Family: IPv4, Proto: &Value8{Value: 1}, ICMP: &ICMP{Type: 3, Code: 1, CodeHi: 3}, Target: Target{Kind: Drop}},
			"-4 -p icmp --icmp-type 3/1:3 -j DROP"},
		{"icmpv6 full code range", IPv6, "-p ipv6-icmp --icmpv6-type 1/0:255 -j DROP",
			Rule{Family: IPv6, Proto: &Value8{Value: 58}, ICMP: &ICMP{Type: 1, AnyCode: true}, Target: Target{Kind: Drop}},
			"-p ipv6-icmp --icmpv6-type 1 -j DROP"},
		{"icmpv6 type 255 is a type", IPv6, "-p ipv6-icmp --icmpv6-type 255 -j DROP",
			Rule{Family: IPv6, Proto: &Value8{Value: 58}, ICMP: &ICMP{Type: 255, AnyCode: true}, Target: Target{Kind: Drop}},
			"-p ipv6-icmp --icmpv6-type 255 -j DROP"},
		{"icmpv6 name prefix and alias", IPv6, "-p ipv6-icmp --icmpv6-type MLD-LISTENER-RED -j DROP",
			Rule{Family: IPv6, Proto: &Value8{Value: 58}, ICMP: &ICMP{Type: 132, AnyCode: true}, Target: Target{Kind: Drop}},
			"-p ipv6-icmp --icmpv6-type 132 -j DROP"},
		{"getopt glued forms", IPv6, "--protocol=tcp -s2001:db8::/32 --dport=22 -jDROP",
			Rule{Family: IPv6, Src: pfx("2001:db8::/32", false), Proto: &Value8{Value: 6}, DPort: &PortRange{Lo: 22, Hi: 22}, Target: Target{Kind: Drop}},
			"-s 2001:db8::/32 -p tcp --dport 22 -j DROP"},
		{"ipv4 mask notation", IPv4, "-d 192.168.0.0/255.255.0.0 -j DROP",
			Rule{Family: IPv4, Dst: pfx("192.168.0.0/16", false), Target: Target{Kind: Drop}}, "-4 -d 192.168.0.0/16 -j DROP"},
		{"reject default", IPv6, "-p tcp -j REJECT",
			Rule{Family: IPv6, Proto: &Value8{Value: 6}, Target: Target{Kind: Reject, RejectWith: "icmp6-port-unreachable"}},
			"-p tcp -j REJECT --reject-with icmp6-port-unreachable"},
		{"reject default v4", IPv4, "-j REJECT",
			Rule{Family: IPv4, Target: Target{Kind: Reject, RejectWith: "icmp-port-unreachable"}},
			"-4 -j REJECT --reject-with icmp-port-unreachable"},
		{"reject tcp-reset", IPv6, "-p tcp -j REJECT --reject-with tcp-reset",
			Rule{Family: IPv6, Proto: &Value8{Value: 6}, Target: Target{Kind: Reject, RejectWith: "tcp-reset"}},
			"-p tcp -j REJECT --reject-with tcp-reset"},
		{"reject alias", IPv6, "-j REJECT --reject-with adm-prohibited",
			Rule{Family: IPv6, Target: Target{Kind: Reject, RejectWith: "icmp6-adm-prohibited"}},
			"-j REJECT --reject-with icmp6-adm-prohibited"},
		{"seg6 default action", IPv6, "-j SEG6",
			Rule{Family: IPv6, Target: Target{Kind: GoNext}}, "-j SEG6 --seg6-action go-next"},
		{"seg6 paper spelling", IPv6, "-j SEG6 --seg6-action seg6-go-last",
			Rule{Family: IPv6, Target: Target{Kind: GoLast}}, "-j SEG6 --seg6-action go-last"},
		{"all srh options, short names", IPv6,
			"-s fc00:1::/64 -m srh --inner-src fc00:a::1 ! --inner-dst fc00:d1::/64 --srh-next-hdr 41 ! --srh-len-eq 4 --srh-segs-gt 1 --srh-last-lt 3 ! --srh-tag 5 --srh-psid fc00:a::/64 ! --srh-nsid fc00:2::/48 --srh-lsid fc00:3::1 -j SEG6 --seg6-action skip-next",
			Rule{Family: IPv6, Src: pfx("fc00:1::/64", false), SRH: true, InnerSrc: pfx("fc00:a::1/128", false), InnerDst: pfx("fc00:d1::/64", true),
				NextHdr: &Value8{Value: 41}, HdrLen: &Compare8{Op: Eq, Value: 4, Neg: true}, SegsLeft: &Compare8{Op: Gt, Value: 1},
				LastEntry: &Compare8{Op: Lt, Value: 3}, Tag: &Tag{Value: 5, Neg: true}, PSID: pfx("fc00:a::/64", false),
				NSID: pfx("fc00:2::/48", true), LSID: pfx("fc00:3::1/128", false), Target: Target{Kind: SkipNext}},
			"-s fc00:1::/64 -m srh --inner-src fc00:a::1/128 ! --inner-dst fc00:d1::/64 --srh-next-hdr 41 ! --srh-hdr-len-eq 4 --srh-segs-left-gt 1 --srh-last-entry-lt 3 ! --srh-tag 5 --srh-psid fc00:a::/64 ! --srh-nsid fc00:2::/48 --srh-lsid fc00:3::1/128 -j SEG6 --seg6-action skip-next"},
		{"srh ip6tables long names", IPv6, "-m srh --srh-hdr-len-gt 2 --srh-segs-left-eq 0 --srh-last-entry-gt 1 -j SEG6 --seg6-action eval-args",
			Rule{Family: IPv6, SRH: true, HdrLen: &Compare8{Op: Gt, Value: 2}, SegsLeft: &Compare8{Op: Eq}, LastEntry: &Compare8{Op: Gt, Value: 1},
				Target: Target{Kind: EvalArgs}},
			"-m srh --srh-hdr-len-gt 2 --srh-segs-left-eq 0 --srh-last-entry-gt 1 -j SEG6 --seg6-action eval-args"},
		{"inner-src IPv4 original", IPv6, "-m srh --inner-src 10.0.0.0/8 -p udp --dport 53 -j SEG6 --seg6-action go-last",
			Rule{Family: IPv6, SRH: true, InnerSrc: pfx("10.0.0.0/8", false), Proto: &Value8{Value: 17}, DPort: &PortRange{Lo: 53, Hi: 53},
				Target: Target{Kind: GoLast}},
			"-p udp --dport 53 -m srh --inner-src 10.0.0.0/8 -j SEG6 --seg6-action go-last"},
		{"srh next-hdr by name", IPv6, "-m srh --srh-next-hdr ipv6 -j ACCEPT",
			Rule{Family: IPv6, SRH: true, NextHdr: &Value8{Value: 41}, Target: Target{Kind: Accept}}, "-m srh --srh-next-hdr 41 -j ACCEPT"},
		{"-4 overrides the family", IPv6, "-4 -s 10.0.0.0/8 -j DROP",
			Rule{Family: IPv4, Src: pfx("10.0.0.0/8", false), Target: Target{Kind: Drop}}, "-4 -s 10.0.0.0/8 -j DROP"},
		{"-6 overrides the family", IPv4, "-d fc00::/16 --ipv6 -j DROP",
			Rule{Family: IPv6, Dst: pfx("fc00::/16", false), Target: Target{Kind: Drop}}, "-d fc00::/16 -j DROP"},
		{"SEG6 in an IPv4 rule", IPv4, "-p udp --dport 53 -j SEG6 --seg6-action skip-next",
			Rule{Family: IPv4, Proto: &Value8{Value: 17}, DPort: &PortRange{Lo: 53, Hi: 53}, Target: Target{Kind: SkipNext}},
			"-4 -p udp --dport 53 -j SEG6 --seg6-action skip-next"},
		{"protocol all", IPv6, "-p all -j ACCEPT", Rule{Family: IPv6, Target: Target{Kind: Accept}}, "-j ACCEPT"},
		{"comment with quotes", IPv6, `-m comment --comment 'it''s "x" $y' -j ACCEPT`,
			Rule{Family: IPv6, Comment: `its "x" $y`, Target: Target{Kind: Accept}}, `-m comment --comment "its \"x\" \$y" -j ACCEPT`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLine(tt.line, tt.fam)
			if err != nil {
				t.Fatalf("ParseLine(%q): %v", tt.line, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseLine(%q):\n got %#v\nwant %#v", tt.line, got, tt.want)
			}
			if s := got.String(); s != tt.canon {
				t.Errorf("String() (-want +got):\n-%s\n+%s", tt.canon, s)
			}
			back, err := ParseLine(got.String(), got.Family)
			if err != nil {
				t.Fatalf("re-parse %q: %v", got.String(), err)
			}
			if !reflect.DeepEqual(back, got) {
				t.Errorf("round trip of %q changed the rule:\n got %#v\nwant %#v", got.String(), back, got)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		fam  Family
		line string
		want string
	}{
		{IPv6, "-4 -6 -j DROP", `"-6": family given twice (after -4)`},
		{IPv6, "-4 -m srh -j DROP", `"srh": the srh match is IPv6 only (ip6tables)`},
		{IPv6, "-s fc00::1", "missing -j target (ACCEPT, DROP, REJECT or SEG6): rules without one are not supported"},
		{IPv6, "", "missing -j target (ACCEPT, DROP, REJECT or SEG6): rules without one are not supported"},
		{IPv6, "-s ! fc00::1 -j DROP", `"-s !": write the negation before the option: ! -s VALUE`},
		{IPv6, "-s fc00::1 -s fc00::2 -j DROP", `"-s": given more than once`},
		{IPv6, "-s fc00::1 --source fc00::2 -j DROP", `"--source": given more than once`},
		{IPv6, "-s 10.0.0.1 -j DROP", `"10.0.0.1": want an IPv6 address`},
		{IPv4, "-d fc00::1 -j DROP", `"fc00::1": want an IPv4 address`},
		{IPv6, "-s example.com -j DROP", `"example.com": not an address (host names are not resolved)`},
		{IPv6, "-s fc00::1,fc00::2 -j DROP", `"fc00::1,fc00::2": address lists are not supported: write one rule per address`},
		{IPv6, "-s fc00::/129 -j DROP", `"fc00::/129": prefix length out of range`},
		{IPv6, "-s fc00::/ffff:0:ffff:: -j DROP", `"fc00::/ffff:0:ffff::": non-contiguous masks are not supported`},
		{IPv6, "--dport 80 -j DROP", `"--dport": needs -p tcp, udp, sctp or udplite`},
		{IPv6, "! -p tcp --dport 80 -j DROP", `"--dport": needs -p tcp, udp, sctp or udplite`},
		{IPv6, "-p icmpv6 --sport 80 -j DROP", `"--sport": needs -p tcp, udp, sctp or udplite`},
		{IPv6, "-p tcp --dport 90:80 -j DROP", `"90:80": invalid port range (min > max)`},
		{IPv6, "-p tcp --dport 70000 -j DROP", `"70000": want a port number 0-65535 or a range LO:HI`},
		{IPv6, "-p tcp --dport http -j DROP", `"http": want a port number 0-65535 or a range LO:HI`},
		{IPv6, "-p tcp --dport -j DROP", `"-j": want a port number 0-65535 or a range LO:HI`},
		{IPv6, "-p tcp --dport", `"--dport": missing value`},
		{IPv6, "-p bogus -j DROP", `"bogus": unknown protocol`},
		{IPv6, "-p icmp -j DROP", `"icmp": ICMP (IPv4) in an IPv6 (ip6tables) rule: use ipv6-icmp`},
		{IPv4, "-p ipv6-icmp -j DROP", `"ipv6-icmp": ICMPv6 in an IPv4 (iptables) rule`},
		{IPv6, "--icmpv6-type 128 -j DROP", `"--icmpv6-type": needs -p ipv6-icmp`},
		{IPv4, "-p icmp --icmpv6-type 128 -j DROP", `"--icmpv6-type": iptables rules use --icmp-type`},
		{IPv6, "-p icmpv6 --icmp-type 8 -j DROP", `"--icmp-type": ip6tables rules use --icmpv6-type`},
		{IPv6, "-p icmpv6 --icmpv6-type echo -j DROP", `"echo": ambiguous ICMP type name: echo-request or echo-reply?`},
		{IPv6, "-p icmpv6 --icmpv6-type 1/x -j DROP", `"1/x": bad ICMP code (want CODE or MIN:MAX, 0-255)`},
		{IPv6, "-i eth0 -j DROP", `"-i": interface matches are not supported`},
		{IPv6, "-ieth0 -j DROP", `"-i": interface matches are not supported`},
		{IPv6, "-m icmp6 -j DROP", `"icmp6": -m icmp6 needs -p ipv6-icmp`},
		{IPv6, "! -p ipv6-icmp -m icmp6 -j DROP", `"icmp6": -m icmp6 needs -p ipv6-icmp`},
		{IPv4, "-p udp -m tcp -j DROP", `"tcp": -m tcp needs -p tcp`},
		{IPv6, "-p icmp -m icmp -j DROP", `"icmp": ICMP (IPv4) in an IPv6 (ip6tables) rule: use ipv6-icmp`},
		{IPv6, "-p ipv6-icmp -m icmp -j DROP", `"icmp": no icmp match in IPv6 rules`},
		{IPv4, "-p icmp -m icmp6 -j DROP", `"icmp6": no icmp6 match in IPv4 rules`},
		{IPv4, "-p icmp --icmp-type 3/5:4 -j DROP", `"3/5:4": empty ICMP code range (MIN > MAX): it would never match`},
		{IPv6, "-p ipv6-icmp --icmpv6-type any -j DROP", `"any": unknown ICMP type (a number, TYPE/CODE, TYPE/MIN:MAX or a name such as echo-request)`},
		{IPv4, "-s 10.0.0.0/255.0.255.0 -j DROP", `"10.0.0.0/255.0.255.0": non-contiguous masks are not supported`},
		{IPv6, "-m comment --comment " + strings.Repeat("x", 256) + " -j DROP", `"--comment": comment longer than 255 characters (iptables' limit)`},
		{IPv6, "-o eth0 -j DROP", `"-o": interface matches are not supported`},
		{IPv6, "-m conntrack --ctstate ESTABLISHED -j ACCEPT", `"conntrack": unsupported match module`},
		{IPv6, "-p tcp -m multiport --dports 80,443 -j ACCEPT", `"multiport": unsupported match module`},
		{IPv6, "--bogus -j DROP", `"--bogus": unknown option`},
		{IPv6, "fc00::1 -j DROP", `"fc00::1": unexpected argument (options start with -)`},
		{IPv6, "-j DOCKER-USER", `"DOCKER-USER": jumps to user-defined chains are not supported (want ACCEPT, DROP, REJECT or SEG6)`},
		{IPv6, "-j LOG", `"LOG": unsupported target (want ACCEPT, DROP, REJECT or SEG6)`},
		{IPv6, "-A INPUT -j DROP", `"INPUT": rules belong to the FORWARD chain (got -A INPUT)`},
		{IPv6, "--srh-tag 5 -j DROP", `"--srh-tag": needs -m srh`},
		{IPv6, "-m srh --srh-tag 70000 -j DROP", `"70000": want a number 0-65535 for --srh-tag`},
		{IPv6, "-m srh --srh-segs-gt 300 -j DROP", `"300": want a number 0-255 for --srh-segs-gt`},
		{IPv6, "-m srh --srh-segs-gt 1 --srh-segs-lt 4 -j DROP", `"--srh-segs-lt": only one of --srh-segs-left-eq/-gt/-lt per rule`},
		{IPv6, "-m srh --srh-psid 10.0.0.1 -j DROP", `"10.0.0.1": want an IPv6 address`},
		{IPv4, "-m srh -j DROP", `"srh": the srh match is IPv6 only (ip6tables)`},
		{IPv6, "-j SEG6 --seg6-action jump", `"jump": unknown SEG6 action (want go-next, skip-next, go-last or eval-args)`},
		{IPv6, "-j DROP --seg6-action go-last", `"--seg6-action": needs -j SEG6 before it`},
		{IPv6, "--seg6-action go-last -j SEG6", `"--seg6-action": needs -j SEG6 before it`},
		{IPv6, "-j DROP --reject-with tcp-reset", `"--reject-with": needs -j REJECT before it`},
		{IPv6, "-j REJECT --reject-with tcp-reset", `"tcp-reset": needs -p tcp`},
		{IPv6, "-j REJECT --reject-with icmp-host-prohibited", `"icmp-host-prohibited": unknown --reject-with value for IPv6`},
		{IPv6, "-j DROP -j ACCEPT", `"-j": given more than once`},
		{IPv6, "! -j DROP", `"! -j": -j cannot be negated`},
		{IPv6, "! ! -s fc00::1 -j DROP", `"!": double negation`},
		{IPv6, "-j DROP !", `"!": negation without an option after it`},
		{IPv6, "! -p all -j DROP", `"all": ! -p all never matches`},
		{IPv6, "-m comment -j DROP", `"comment": -m comment needs --comment`},
		{IPv6, "--comment x -j DROP", `"--comment": needs -m comment`},
		{IPv6, `-m comment --comment "open -j DROP`, `"\"open -j DROP": unterminated double quote`},
		{IPv6, `-m comment --comment 'open -j DROP`, `"'open -j DROP": unterminated single quote`},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			_, err := ParseLine(tt.line, tt.fam)
			if err == nil {
				t.Fatalf("ParseLine(%q) succeeded, want error %q", tt.line, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("ParseLine(%q) error (-want +got):\n-%s\n+%s", tt.line, tt.want, err)
			}
		})
	}
}

func TestSplitWords(t *testing.T) {
	got, err := SplitWords(`-m comment --comment "a \"b\" c" 'd e'f\ g -j DROP`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-m", "comment", "--comment", `a "b" c`, "d ef g", "-j", "DROP"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SplitWords = %q, want %q", got, want)
	}
}

func TestTargetKindText(t *testing.T) {
	for k := Accept; k <= GoNext; k++ {
		b, err := k.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back TargetKind
		if err := back.UnmarshalText(b); err != nil || back != k {
			t.Errorf("%v: round trip gave %v, %v", k, back, err)
		}
	}
	if k, err := ParseTargetKind("seg6-skip-next"); err != nil || k != SkipNext {
		t.Errorf("ParseTargetKind(seg6-skip-next) = %v, %v", k, err)
	}
	if _, err := ParseTargetKind("jump"); err == nil || !strings.Contains(err.Error(), "unknown action") {
		t.Errorf("ParseTargetKind(jump) err = %v", err)
	}
	if d := DefaultArgs(); d[0] != GoNext || d[1] != Drop || d[2] != SkipNext || d[3] != GoLast || len(d) != 4 {
		t.Errorf("DefaultArgs = %v", d)
	}
}
