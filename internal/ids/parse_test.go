package ids

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var testVars = map[string]string{
	"HOME_NET":     "[10.0.0.0/8,2001:db8::/32]",
	"EXTERNAL_NET": "!$HOME_NET",
	"HTTP_PORTS":   "[80,8080:8081]",
	"LOOP":         "$LOOP",
}

func TestParseRuleFields(t *testing.T) {
	r, err := ParseRule(`drop tcp $EXTERNAL_NET any -> $HOME_NET $HTTP_PORTS (msg:"x \"q\" \; y"; content:"GET"; depth:3; content:"|2f 65|tc/"; nocase; distance:1; within:20; content:!"curl"; srv6.segment:fc00:66::/32,fc00:67::1; srv6.sl:>0; srv6.args:&0xff00=0x0b00; classtype:web-application-attack; priority:1; sid:42; rev:7; gid:3;)`, testVars)
	if err != nil {
		t.Fatal(err)
	}
	if r.Action != ActionDrop || r.Proto != ProtoTCP || r.SID != 42 || r.Rev != 7 || r.GID != 3 || r.Priority != 1 || r.Classtype != "web-application-attack" {
		t.Errorf("header/meta: %+v", r)
	}
	if r.Msg != `x "q" ; y` {
		t.Errorf("msg = %q", r.Msg)
	}
	want := []Content{
		{Pattern: []byte("GET"), Depth: 3, HasDepth: true},
		{Pattern: []byte("/etc/"), NoCase: true, Distance: 1, Within: 20, HasWithin: true, Relative: true},
		{Pattern: []byte("curl"), Negated: true},
	}
	if diff := cmp.Diff(want, r.Contents, cmp.AllowUnexported(Content{})); diff != "" {
		t.Errorf("contents (-want +got):\n%s", diff)
	}
	if fp := r.FastPattern(); fp != 1 {
		t.Errorf("fast pattern = %d, want 1 (the longest)", fp)
	}
	for _, tc := range []struct {
		a    string
		src  bool
		dst  bool
		port uint16
		pin  bool
	}{
		{"10.1.2.3", false, true, 80, true},
		{"192.0.2.1", true, false, 8081, true},
		{"2001:db8::1", false, true, 8082, false},
		{"2001:db9::1", true, false, 79, false},
	} {
		a := netip.MustParseAddr(tc.a)
		if got := r.Src.Contains(a); got != tc.src {
			t.Errorf("src contains %s = %v", a, got)
		}
		if got := r.Dst.Contains(a); got != tc.dst {
			t.Errorf("dst contains %s = %v", a, got)
		}
		if got := r.DstPort.Contains(tc.port); got != tc.pin {
			t.Errorf("dst port contains %d = %v", tc.port, got)
		}
	}
	if !r.SR.Segment.contains(netip.MustParseAddr("fc00:66:1::5")) || r.SR.Segment.contains(netip.MustParseAddr("fc00:67::2")) {
		t.Error("srv6.segment prefixes")
	}
	if !r.SR.Args.match(0x0bff) || r.SR.Args.match(0x0cff) || !r.SR.SL.match(1) || r.SR.SL.match(0) {
		t.Error("srv6 integer conditions")
	}
}

func TestSetsAndIntegers(t *testing.T) {
	a := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	for _, tc := range []struct {
		set  string
		addr string
		want bool
	}{
		{"any", "1.2.3.4", true},
		{"1.2.3.4", "1.2.3.4", true},
		{"1.2.3.4", "1.2.3.5", false},
		{"!1.2.3.4", "1.2.3.5", true},
		{"[1.2.3.0/24,!1.2.3.4]", "1.2.3.4", false},
		{"[1.2.3.0/24,!1.2.3.4]", "1.2.3.9", true},
		{"[!1.2.3.4, !fc00::/7]", "fc00::1", false},
		{"[!1.2.3.4, !fc00::/7]", "2001:db8::1", true},
		{"[any,!10.0.0.0/8]", "10.1.1.1", false},
		{"[any,!10.0.0.0/8]", "11.1.1.1", true},
		{"![10.0.0.0/8,[192.168.0.0/16]]", "192.168.1.1", false},
		{"$EXTERNAL_NET", "10.9.9.9", false},
		{"$EXTERNAL_NET", "fc00::9", true},
		{"10.0.0.0/8", "::ffff:10.0.0.1", false}, // families do not mix
	} {
		s, err := parseAddrSet(tc.set, 0, testVars)
		if err != nil {
			t.Fatalf("%s: %v", tc.set, err)
		}
		if got := s.Contains(a(tc.addr)); got != tc.want {
			t.Errorf("%s contains %s = %v, want %v", tc.set, tc.addr, got, tc.want)
		}
	}
	for _, tc := range []struct {
		set  string
		port uint16
		want bool
	}{
		{"any", 1, true}, {"80", 80, true}, {"80", 81, false}, {"1024:", 1024, true}, {"1024:", 1023, false},
		{":1023", 0, true}, {"!80", 80, false}, {"[80:90,!85]", 85, false}, {"[80:90,!85]", 86, true},
		{"$HTTP_PORTS", 8081, true}, {"[$HTTP_PORTS,443]", 443, true}, {"![22,23]", 23, false},
	} {
		s, err := parsePortSet(tc.set, 0, testVars)
		if err != nil {
			t.Fatalf("%s: %v", tc.set, err)
		}
		if got := s.Contains(tc.port); got != tc.want {
			t.Errorf("%s contains %d = %v, want %v", tc.set, tc.port, got, tc.want)
		}
	}
	for _, tc := range []struct {
		cond string
		v    uint64
		want bool
	}{
		{"3", 3, true}, {"=3", 4, false}, {"!3", 3, false}, {"!=3", 4, true}, {">3", 4, true}, {">3", 3, false},
		{">=3", 3, true}, {"<3", 2, true}, {"<=3", 4, false}, {"1-4", 1, false}, {"1-4", 2, true}, {"1-4", 4, false},
		{"!1-4", 4, true}, {"300<>400", 300, false}, {"300<>400", 301, true}, {"&0xf0=0x20", 0x2f, true}, {"&0xf0=0x20", 0x3f, false}, {"&0xf0!=0", 0x0f, false},
	} {
		c, err := parseUintCond(tc.cond)
		if err != nil {
			t.Fatalf("%s: %v", tc.cond, err)
		}
		if got := c.match(tc.v); got != tc.want {
			t.Errorf("%s on %d = %v, want %v", tc.cond, tc.v, got, tc.want)
		}
	}
}

// TestParseErrors checks that each bad rule is rejected with its line,
// column and reason.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, rule string
		want       []string // "line:col: substring"
	}{
		{"unsupported keyword", `alert tcp any any -> any any (msg:"m"; flow:established; sid:1;)`, []string{`1:40: unsupported keyword "flow"`}},
		{"byte_test unsupported", `alert tcp any any -> any any (byte_test:1,>,2,0; sid:1;)`, []string{`1:31: unsupported keyword "byte_test"`}},
		{"pcre x flag", `alert tcp any any -> any any (pcre:"/a b/x"; sid:1;)`, []string{`1:36: pcre: unsupported flag 'x'`}},
		{"pcre buffer flag", `alert tcp any any -> any any (pcre:"/a/U"; sid:1;)`, []string{`unsupported flag 'U'`}},
		{"pcre backreference", `alert tcp any any -> any any (pcre:"/(a)\1/"; sid:1;)`, []string{`pcre: /(a)\1/: error parsing regexp: invalid escape sequence`}},
		{"pcre lookahead", `alert tcp any any -> any any (pcre:"/a(?=b)/"; sid:1;)`, []string{`error parsing regexp`}},
		{"pcre above a byte", `alert tcp any any -> any any (pcre:"/\x{100}/"; sid:1;)`, []string{`1:36: pcre: /\x{100}/: \x{100}: a pcre matches bytes, the largest is \xff`}},
		{"pcre not slashed", `alert tcp any any -> any any (pcre:"abc"; sid:1;)`, []string{`"abc" is not /regex/flags`}},
		{"pcre relative first", `alert tcp any any -> any any (pcre:"/a/R"; sid:1;)`, []string{`the R flag needs a content or pcre before`}},
		{"modifier on pcre", `alert tcp any any -> any any (pcre:"/a/"; nocase; sid:1;)`, []string{`nocase modifies a content, not a pcre`}},
		{"unknown no-value keyword", `alert tcp any any -> any any (sid:1; noalert;)`, []string{`1:38: unsupported keyword "noalert"`}},
		{"action", `reject tcp any any -> any any (sid:1;)`, []string{`1:1: unsupported action "reject"`}},
		{"protocol", `alert sctp any any -> any any (sid:1;)`, []string{`1:7: unsupported protocol "sctp"`}},
		{"direction", `alert tcp any any <- any any (sid:1;)`, []string{`1:19: unsupported direction "<-"`}},
		{"bad address", `alert tcp 10.0.0.300 any -> any any (sid:1;)`, []string{`1:11: address "10.0.0.300"`}},
		{"bad port", `alert tcp any 70000 -> any any (sid:1;)`, []string{`1:15: port "70000"`}},
		{"undefined var", `alert tcp $NOPE any -> any any (sid:1;)`, []string{`1:11: undefined variable $NOPE`}},
		{"var loop", `alert tcp $LOOP any -> any any (sid:1;)`, []string{`1:11: variable $LOOP`}},
		{"list in list error", `alert tcp [1.2.3.4,[5.6.7.8,x]] any -> any any (sid:1;)`, []string{`1:29: address "x"`}},
		{"unterminated list", `alert tcp [1.2.3.4 any -> any any (sid:1;)`, []string{`1:11: unterminated '[' list`}},
		{"!any", `alert tcp !any any -> any any (sid:1;)`, []string{`1:11: !any matches nothing`}},
		{"fields", `alert tcp any -> any any (sid:1;)`, []string{`1:1: rule header has 6 fields`}},
		{"no parens", `alert tcp any any -> any any sid:1;`, []string{`missing '('`}},
		{"no close", `alert tcp any any -> any any (sid:1;`, []string{`1:30: missing ')'`}},
		{"no sid", `alert tcp any any -> any any (msg:"m";)`, []string{`1:30: rule has no sid`}},
		{"bad sid", `alert tcp any any -> any any (sid:x;)`, []string{`1:35: sid: "x"`}},
		{"msg unquoted", `alert tcp any any -> any any (msg:hi; sid:1;)`, []string{`1:35: msg: value must be a quoted string`}},
		{"hex odd", `alert tcp any any -> any any (content:"|4|"; sid:1;)`, []string{`1:39: content: |4|: hex bytes come in pairs`}},
		{"hex bad", `alert tcp any any -> any any (content:"|4g|"; sid:1;)`, []string{`content: |4g|: "4g" is not a hex byte`}},
		{"hex open", `alert tcp any any -> any any (content:"a|41"; sid:1;)`, []string{`unterminated |hex|`}},
		{"empty content", `alert tcp any any -> any any (content:""; sid:1;)`, []string{`empty content`}},
		{"unterminated string", `alert tcp any any -> any any (content:"abc; sid:1;)`, []string{`unterminated quoted string`, `rule has no sid`}},
		{"modifier without content", `alert tcp any any -> any any (nocase; sid:1;)`, []string{`1:31: nocase needs a preceding content`}},
		{"depth too short", `alert tcp any any -> any any (content:"abcd"; depth:2; sid:1;)`, []string{`1:53: depth 2 is shorter than the content`}},
		{"within on first", `alert tcp any any -> any any (content:"ab"; within:5; sid:1;)`, []string{`within needs a content before`}},
		{"mixed absolute relative", `alert tcp any any -> any any (content:"a"; content:"b"; distance:1; offset:2; sid:1;)`, []string{`offset cannot be combined with distance/within`}},
		{"value on nocase", `alert tcp any any -> any any (content:"a"; nocase:1; sid:1;)`, []string{`nocase takes no value`}},
		{"missing value", `alert tcp any any -> any any (content:"a"; depth; sid:1;)`, []string{`depth needs a value`}},
		{"ports on icmp", `alert icmp any 80 -> any any (sid:1;)`, []string{`protocol icmp has no ports`}},
		{"srv6 bad prefix", `alert ip any any -> any any (srv6.segment:fc00::/200; sid:1;)`, []string{`1:43: srv6.segment: "fc00::/200"`}},
		{"srv6 bad int", `alert ip any any -> any any (srv6.sl:>x; sid:1;)`, []string{`srv6.sl: "x" is not an unsigned integer`}},
		{"srv6 tag too big", `alert ip any any -> any any (srv6.tag:>65536; sid:1;)`, []string{`srv6.tag: ">65536": the tag is 16 bits`}},
		{"startswith with depth", `alert tcp any any -> any any (content:"ab"; depth:5; startswith; sid:1;)`, []string{`startswith cannot be combined`}},
		{"bad dsize", `alert tcp any any -> any any (dsize:>>3; sid:1;)`, []string{`dsize: ">3" is not an unsigned integer`}},
		{"srv6 empty range", `alert ip any any -> any any (srv6.args:3-4; sid:1;)`, []string{`range 3-4 is exclusive and matches nothing`}},
		{"text after", `alert ip any any -> any any (sid:1;) x`, []string{`text after the closing ')'`}},
		{"several errors", `alert tcp any any -> any any (flow:x; content:"|zz|"; sid:0; isdataat:1;)`, []string{`unsupported keyword "flow"`, `not a hex byte`, `sid: "0"`, `unsupported keyword "isdataat"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRule(tc.rule, testVars)
			var el ErrorList
			if !errors.As(err, &el) {
				t.Fatalf("err = %v, want an ErrorList", err)
			}
			if len(el) != len(tc.want) {
				t.Errorf("got %d errors, want %d:\n%v", len(el), len(tc.want), err)
			}
			for i, w := range tc.want {
				if i < len(el) && !strings.Contains(strings.TrimPrefix(el[i].Error(), "rules:"), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, el[i].Error(), w)
				}
			}
		})
	}
}

// TestParseFile checks comments, blank lines, continuations, and that
// every error of the file is reported with its physical line.
func TestParseFile(t *testing.T) {
	src := `# a comment
alert tcp any any -> any any (msg:"one"; content:"abc"; sid:1;)

   # an indented comment
alert udp any any -> any 53 \
    (msg:"two"; \
     content:"|00 01|"; sid:2;)
alert tcp any any -> any any (msg:"bad"; \
     flowbits:set,x; sid:3;)
alert tcp any any -> any any (msg:"dup"; sid:1;)
drop icmp any any -> any any (msg:"three"; sid:4;)
alert tcp any any -> any any (msg:"typo" sid:5;)
`
	rules, err := Parse(strings.NewReader(src), "t.rules", nil)
	var el ErrorList
	if !errors.As(err, &el) {
		t.Fatalf("err = %v", err)
	}
	var got []string
	for _, e := range el {
		got = append(got, e.Error())
	}
	want := []string{
		`t.rules:9:6: unsupported keyword "flowbits"`,
		`t.rules:10: duplicate sid 1 (gid 1) first used on line 2`,
		`t.rules:12:35: msg: value must be a quoted string`,
		`t.rules:12:30: rule has no sid`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	var sids []uint32
	var lines []int
	for _, r := range rules {
		sids = append(sids, r.SID)
		lines = append(lines, r.Line)
	}
	if diff := cmp.Diff([]uint32{1, 2, 4}, sids); diff != "" {
		t.Errorf("sids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{2, 5, 11}, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if string(rules[1].Contents[0].Pattern) != "\x00\x01" {
		t.Errorf("continued rule content = %q", rules[1].Contents[0].Pattern)
	}
}

func TestParseTrailingContinuation(t *testing.T) {
	_, err := Parse(strings.NewReader("alert tcp any any -> any any (sid:1;) \\\n"), "f", nil)
	if err == nil || !strings.Contains(err.Error(), "f:1: file ends after a '\\' continuation") {
		t.Fatalf("err = %v", err)
	}
}
