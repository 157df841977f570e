package ids

import (
	"strings"
	"testing"
)

// FuzzParse: any input either parses or returns an ErrorList whose
// entries carry a line; it never panics, and parsed rules compile and
// inspect a packet.
func FuzzParse(f *testing.F) {
	for _, l := range strings.Split(engineRules, "\n") {
		f.Add(l)
	}
	f.Add(`alert tcp [10.0.0.0/8,![10.1.0.0/16]] [80,!81:90] <> $HOME_NET any (msg:"a\;b"; content:"|00 ff|x"; nocase; offset:1; depth:9; content:"y"; distance:-1; within:3; sid:1;)`)
	f.Add("alert tcp any any -> any any (sid:1;) \\\n  \\\n")
	f.Add(`alert tcp any any -> any 80 (content:"a"; pcre:"/^b+[c-e]{2}\d/iRG"; pcre:!"/z/"; sid:4;)`)
	f.Add(`drop ip any any -> any any (srv6.args:&0xff!=0x0; srv6.sl:!1-9; srv6.segments:>=2; srv6.present; sid:3;)`)
	f.Add("alert tcp any any -> any any (content:\"\xff\xfe\"; sid:9;)")
	inner := []byte{0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
		0, 80, 0, 80, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x18, 0, 0, 0, 0, 0, 0}
	withPayload := append(append([]byte{}, inner...), "GET /a\xe9 x\vy;\n"...)
	withPayload[3] = byte(len(withPayload))
	f.Fuzz(func(t *testing.T, src string) {
		rules, err := Parse(strings.NewReader(src), "fuzz", testVars)
		if err != nil {
			el, ok := err.(ErrorList)
			if !ok || len(el) == 0 {
				t.Fatalf("error %T %v is not a non-empty ErrorList", err, err)
			}
			for _, e := range el {
				if e.Line < 1 {
					t.Fatalf("error without a line: %v", e)
				}
			}
		}
		e, err := New(rules, Options{Mode: ModeIPS})
		if err != nil {
			t.Fatal(err)
		}
		e.Inspect(&Packet{Inner: inner})
		e.Inspect(&Packet{Inner: withPayload})
	})
}

// FuzzPCRE: any pcre either is refused with an error or compiles, and
// matching it (alone, and followed by a relative content, which retries
// it) over any payload does not panic and reports offsets inside the
// payload.
func FuzzPCRE(f *testing.F) {
	for _, s := range []string{`/x\sy/`, `/[\s,]/i`, `/\Q.$\E/`, `/[]a]\S/`, `/caf./`, `/a$/`, `/^\d/m`,
		`/[[:alpha:]]+/`, `/\x{e9}|\xff\x/`, "/caf\xe9/A", `/(?i)a|b*?/G`, `/\b\B/s`} {
		f.Add(s, []byte("xid=1 caf\xc3\xa9 \xe9\v;\n"))
	}
	f.Fuzz(func(t *testing.T, pcre string, payload []byte) {
		c, err := parsePCRE(`"` + pcre + `"`)
		if err != nil {
			return
		}
		var lat []byte
		if loc := pcreFind(c.Regex, payload, &lat); loc != nil && (loc[0] < 0 || loc[0] > loc[1] || loc[1] > len(payload)) {
			t.Fatalf("pcre %q on %q: match %v outside the payload", pcre, payload, loc)
		}
		c.Relative = false
		m := contentMatcher{buf: payload, budget: maxContentSteps, lat: &lat}
		m.match([]Content{c, {Pattern: []byte(";"), Relative: true, Within: 1, HasWithin: true}}, 0)
	})
}

// FuzzInspect: any inner packet bytes are inspected without panicking.
func FuzzInspect(f *testing.F) {
	f.Add([]byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2})
	f.Add(append([]byte{0x60, 0, 0, 0, 0, 8, 44, 64}, make([]byte, 40)...))
	e := newEngine(f, engineRules, Options{Mode: ModeIPS, DropUndecodable: true})
	f.Fuzz(func(t *testing.T, b []byte) {
		e.Inspect(&Packet{Inner: b, Segments: addrs("fc00::1"), SL: 3})
	})
}
