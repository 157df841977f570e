package ids

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// rawIP builds an IPv4 or IPv6 packet of another protocol than TCP, UDP
// and ICMP, carrying payload.
func rawIP(t testing.TB, proto uint8, src, dst string, payload string) []byte {
	t.Helper()
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	if s.Is4() {
		b := make([]byte, 20, 20+len(payload))
		b[0], b[8], b[9] = 0x45, 64, proto
		binary.BigEndian.PutUint16(b[2:4], uint16(20+len(payload)))
		copy(b[12:16], s.AsSlice())
		copy(b[16:20], d.AsSlice())
		return append(b, payload...)
	}
	b := make([]byte, 40, 40+len(payload))
	b[0], b[6], b[7] = 0x60, proto, 64
	binary.BigEndian.PutUint16(b[4:6], uint16(len(payload)))
	copy(b[8:24], s.AsSlice())
	copy(b[24:40], d.AsSlice())
	return append(b, payload...)
}

// TestSuricataSemantics pins, case by case, what Suricata 7.0.10 does
// (each case was run through `suricata -r` with the same rule and packet;
// TestSuricataDifferential compares with the binary on a whole corpus).
// Every case failed before the engine followed Suricata.
func TestSuricataSemantics(t *testing.T) {
	vars := map[string]string{"HOME_NET": "[10.1.0.0/16]", "EXTERNAL_NET": "!$HOME_NET"}
	udp := func(src, payload string) []byte { return pkt(t, "udp", src, "10.3.0.1", 1000, 2000, payload) }
	udp6 := func(src, payload string) []byte { return pkt(t, "udp", src, "2001:db8::99", 1000, 2000, payload) }
	for _, tc := range []struct {
		name  string
		rule  string // options and sid are added
		inner []byte
		want  bool
	}{
		// A negated list of one family says nothing about the other.
		{"!v4 on v6", `alert ip !10.1.0.0/16 any -> any any`, udp6("2001:db8::1", "x"), false},
		{"!v4 on v4 outside", `alert ip !10.1.0.0/16 any -> any any`, udp("10.2.0.1", "x"), true},
		{"!v4 on v4 inside", `alert ip !10.1.0.0/16 any -> any any`, udp("10.1.0.1", "x"), false},
		{"EXTERNAL_NET of a v4 HOME_NET on v6", `alert ip $EXTERNAL_NET any -> any any`, udp6("2001:db8::1", "x"), false},
		{"EXTERNAL_NET on v4", `alert ip $EXTERNAL_NET any -> any any`, udp("10.2.0.1", "x"), true},
		{"![v6] on v4", `alert ip ![2001:db8::/32] any -> any any`, udp("10.2.0.1", "x"), false},
		// A family with only negations is that family minus them.
		{"mixed list, v6 positive", `alert ip [!10.1.0.0/16, 2001:db8::/32] any -> any any`, udp6("2001:db8::1", "x"), true},
		{"mixed list, v4 negation", `alert ip [!10.1.0.0/16, 2001:db8::/32] any -> any any`, udp("10.2.0.1", "x"), true},
		{"v4 positive, v6 negated: other v6", `alert ip [1.2.3.4, !2001:db8::1] any -> any any`, udp6("2001:db8::2", "x"), true},
		{"v4 positive, v6 negated: the v6", `alert ip [1.2.3.4, !2001:db8::1] any -> any any`, udp6("2001:db8::1", "x"), false},
		{"v4 positive, v6 negated: other v4", `alert ip [1.2.3.4, !2001:db8::1] any -> any any`, udp("10.2.0.1", "x"), false},
		// Positive nested lists are flattened; negated ones evaluated first.
		{"flattened nested negation", `alert ip [10.2.0.0/16, [10.3.0.0/16, !10.2.0.1]] any -> any any`, udp("10.2.0.1", "x"), false},
		{"flattened nested positive", `alert ip [10.2.0.0/16, [10.3.0.0/16, !10.2.0.1]] any -> any any`, udp("10.2.0.2", "x"), true},
		{"negated list with a negation: excepted", `alert ip ![10.0.0.0/8, !10.2.0.0/16] any -> any any`, udp("10.2.0.1", "x"), true},
		{"negated list with a negation: in", `alert ip ![10.0.0.0/8, !10.2.0.0/16] any -> any any`, udp("10.1.0.1", "x"), false},
		{"negated list with a negation: v6", `alert ip ![10.0.0.0/8, !10.2.0.0/16] any -> any any`, udp6("2001:db8::1", "x"), false},
		{"negated mixed sublist: v6", `alert ip [10.0.0.0/8, ![10.2.0.0/16, 2001:db8::1]] any -> any any`, udp6("2001:db8::2", "x"), true},
		{"negated mixed sublist: excluded v6", `alert ip [10.0.0.0/8, ![10.2.0.0/16, 2001:db8::1]] any -> any any`, udp6("2001:db8::1", "x"), false},

		// Content and pcre need a payload, negated ones too.
		{"negated content, empty payload", `alert udp any any -> any any (content:!"zzz";`, udp("10.2.0.1", ""), false},
		{"negated content, payload", `alert udp any any -> any any (content:!"zzz";`, udp("10.2.0.1", "hello"), true},
		{"negated pcre, empty payload", `alert udp any any -> any any (pcre:!"/zzz/";`, udp("10.2.0.1", ""), false},
		{"dsize 0, empty payload", `alert udp any any -> any any (dsize:0;`, udp("10.2.0.1", ""), true},
		// Other protocols have no payload to inspect.
		{"content in proto 253", `alert ip any any -> any any (content:"hello";`, rawIP(t, 253, "10.2.0.1", "10.3.0.1", "hello"), false},
		{"content in v6 proto 253", `alert ip any any -> any any (content:"hello";`, rawIP(t, 253, "2001:db8::1", "2001:db8::2", "hello"), false},
		{"dsize 0 of proto 253", `alert ip any any -> any any (dsize:0;`, rawIP(t, 253, "10.2.0.1", "10.3.0.1", "hello"), true},
		{"dsize 5 of proto 253", `alert ip any any -> any any (dsize:5;`, rawIP(t, 253, "10.2.0.1", "10.3.0.1", "hello"), false},
		{"content in icmp", `alert ip any any -> any any (content:"hello";`, pkt(t, "icmp", "10.2.0.1", "10.3.0.1", 0, 0, "hello"), true},

		// pcre matches bytes.
		{`\s matches \v`, `alert udp any any -> any any (pcre:"/x\sy/";`, udp("10.2.0.1", "x\vy"), true},
		{`\s in a class matches \v`, `alert udp any any -> any any (pcre:"/x[\s,]y/";`, udp("10.2.0.1", "x\vy"), true},
		{`\S does not match \v`, `alert udp any any -> any any (pcre:"/x\Sy/";`, udp("10.2.0.1", "x\vy"), false},
		{`\S matches a high byte`, `alert udp any any -> any any (pcre:"/x\Sy/";`, udp("10.2.0.1", "x\xe9y"), true},
		{". is one byte (UTF-8 é is two)", `alert udp any any -> any any (pcre:"/a.b/";`, udp("10.2.0.1", "a\xc3\xa9b"), false},
		{".. is two bytes", `alert udp any any -> any any (pcre:"/a..b/";`, udp("10.2.0.1", "a\xc3\xa9b"), true},
		{". matches a high byte", `alert udp any any -> any any (pcre:"/a.b/";`, udp("10.2.0.1", "a\xe9b"), true},
		{`\xe9 is the byte`, `alert udp any any -> any any (pcre:"/a\xe9b/";`, udp("10.2.0.1", "a\xe9b"), true},
		{`\xe9 is not UTF-8 é`, `alert udp any any -> any any (pcre:"/a\xe9b/";`, udp("10.2.0.1", "a\xc3\xa9b"), false},
		{`caseless \xe9 is not \xc9`, `alert udp any any -> any any (pcre:"/\xe9/i";`, udp("10.2.0.1", "\xc9"), false},
		{"match end in bytes", `alert udp any any -> any any (pcre:"/caf./"; content:"!"; distance:0; within:1;`, udp("10.2.0.1", "caf\xc3\xa9!"), false},
		{"match end in bytes, Latin-1", `alert udp any any -> any any (pcre:"/caf./"; content:"!"; distance:0; within:1;`, udp("10.2.0.1", "caf\xe9!"), true},
		{"$ before a final newline", `alert udp any any -> any any (pcre:"/foo$/";`, udp("10.2.0.1", "foo\n"), true},
		{"$ not before another newline", `alert udp any any -> any any (pcre:"/foo$/";`, udp("10.2.0.1", "foo\n\n"), false},
		{"$ with E", `alert udp any any -> any any (pcre:"/foo$/E";`, udp("10.2.0.1", "foo\n"), false},
		{"pcre retried for a relative content", `alert udp any any -> any any (pcre:"/a\d/"; content:" Z"; within:2;`, udp("10.2.0.1", "xa1 xa2 Zb"), true},
		{"anchored pcre not retried", `alert udp any any -> any any (pcre:"/^.a\d/"; content:" Z"; within:2;`, udp("10.2.0.1", "xa1 xa2 Zb"), false},
		{`retry sees the byte before: multiline ^`, `alert udp any any -> any any (pcre:"/^\d/m"; content:"\;"; within:1;`, udp("10.2.0.1", "11;"), false},
		{`retry sees the byte before: \b`, `alert udp any any -> any any (pcre:"/\b\d/"; content:"\;"; within:1;`, udp("10.2.0.1", "11;"), false},
		{`retry sees the byte before: \B`, `alert udp any any -> any any (pcre:"/\B\d/"; content:"\;"; within:1;`, udp("10.2.0.1", "11;"), true},
		{`retry after a newline: multiline ^`, `alert udp any any -> any any (pcre:"/^\d/m"; content:"\;"; within:1;`, udp("10.2.0.1", "1x\n2;"), true},
		{"A flag", `alert udp any any -> any any (pcre:"/id=\d/A"; content:"\;"; within:1;`, udp("10.2.0.1", "xid=1 id=2;"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := tc.rule
			if text[len(text)-1] == ';' {
				text += " sid:1;)"
			} else {
				text += " (sid:1;)"
			}
			r, err := ParseRule(text, vars)
			if err != nil {
				t.Fatal(err)
			}
			e, err := New([]*Rule{r}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, fired := e.Match(&Packet{Inner: tc.inner}, nil)
			if got := len(fired) == 1; got != tc.want {
				t.Errorf("%s on %q: fired %v, Suricata: %v", text, tc.inner, got, tc.want)
			}
		})
	}
}

// TestPCRECorners: PCRE constructs of real rule sets, each with the
// verdict Suricata 7.0.10 gave on the same payload.
func TestPCRECorners(t *testing.T) {
	for i, tc := range []struct {
		pcre, payload string
		want          bool
	}{
		{`/[\x80-\xff]{4}/`, "\x80\x81\xfe\xff", true},
		{`/[\x80-\xff]{4}/`, "\xc3\xa9", false},
		{`/\x2f[a-z]{1,3}\x2ephp/i`, "/ABC.php", true},
		{`/[[:alpha:]]+\d/`, "abc1", true},
		{`/[\]\[]x/`, "]x", true},
		{`/\Q.$\E/`, "a.$", true},
		{`/\Q.$\E/`, "ab", false},
		{`/[^\s]+=/`, "a\v=", false},
		{`/\//`, "a/b", true},
		{`/a\x{e9}/`, "a\xe9", true},
		{`/^\x00{2}/`, "\x00\x00a", true},
		{`/caf\xc3\xa9/`, "caf\xc3\xa9", true},
		{"/caf\xc3\xa9/", "caf\xc3\xa9", true}, // UTF-8 in the rule: its bytes
		{"/^\xc3\xa9$/", "\xc3\xa9", true},
		{`/^.$/`, "\xc3\xa9", false}, // é is two bytes
		{`/\w+\s\w+$/`, "hello world\n", true},
		{`/\xe9+/i`, "\xe9\xe9", true},
		{`/[^a]b/`, "\xe9b", true},
		{`/\D\W/`, "\xe9\xe9", true},
		{`/(?i)ABC\xe9/`, "abc\xe9", true},
		{`/a.c/s`, "a\nc", true},
		{`/a$/m`, "a\nb", true},
		{`/^b/m`, "a\nb", true},
		{`/ab*?c/G`, "abbc", true},
		{`/\x/`, "a\x00", true},
		// Caseless classes fold ASCII letters only.
		{`/[\xe0-\xef]/i`, "\xc0", false},
		{`/[^\xe9]/i`, "\xc9", true},
		{`/[^a]/i`, "A", false},
		{`/[a-c]x/i`, "Bx", true},
		{`/[^\x00-\x40\x5b-\xff]/i`, "a", false},
		{`/[\xe9a]/i`, "A", true},
	} {
		text := `alert udp any any -> any any (pcre:"` + tc.pcre + `"; sid:1;)`
		r, err := ParseRule(text, nil)
		if err != nil {
			t.Errorf("%d: %v", i, err)
			continue
		}
		e, err := New([]*Rule{r}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, fired := e.Match(&Packet{Inner: pkt(t, "udp", "10.2.0.1", "10.3.0.1", 1, 2, tc.payload)}, nil)
		if got := len(fired) == 1; got != tc.want {
			t.Errorf("%d: pcre:%q on %q: fired %v, Suricata: %v", i, tc.pcre, tc.payload, got, tc.want)
		}
	}
}
