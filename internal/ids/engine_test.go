package ids

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/segchain/segchain/internal/testutil"
)

// pkt builds an inner packet with gopacket: proto is "tcp", "udp" or
// "icmp" (ICMPv4 or ICMPv6 after the addresses' family).
func pkt(t testing.TB, proto, src, dst string, sport, dport uint16, payload string) []byte {
	t.Helper()
	s, d := net.ParseIP(src), net.ParseIP(dst)
	v6 := s.To4() == nil
	var ip gopacket.NetworkLayer
	var nl gopacket.SerializableLayer
	ipproto := map[string]layers.IPProtocol{"tcp": layers.IPProtocolTCP, "udp": layers.IPProtocolUDP, "icmp": layers.IPProtocolICMPv4}[proto]
	if v6 {
		if proto == "icmp" {
			ipproto = layers.IPProtocolICMPv6
		}
		l := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: ipproto, SrcIP: s, DstIP: d}
		ip, nl = l, l
	} else {
		l := &layers.IPv4{Version: 4, TTL: 64, Protocol: ipproto, SrcIP: s.To4(), DstIP: d.To4()}
		ip, nl = l, l
	}
	ls := []gopacket.SerializableLayer{nl}
	switch proto {
	case "tcp":
		l := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), PSH: true, ACK: true, Window: 512}
		_ = l.SetNetworkLayerForChecksum(ip)
		ls = append(ls, l)
	case "udp":
		l := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
		_ = l.SetNetworkLayerForChecksum(ip)
		ls = append(ls, l)
	case "icmp":
		if v6 {
			l := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
			_ = l.SetNetworkLayerForChecksum(ip)
			ls = append(ls, l, &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 1})
		} else {
			ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 1})
		}
	}
	ls = append(ls, gopacket.Payload(payload))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

const engineRules = `
alert tcp any any -> any 80 (msg:"passwd"; content:"/etc/passwd"; sid:1; rev:2;)
drop tcp any any -> any any (msg:"sqlmap ua"; content:"user-agent|3a| sqlmap"; nocase; sid:2;)
alert tcp any any -> any any (msg:"GET at start"; content:"GET "; depth:4; content:"admin"; distance:0; within:20; sid:3;)
alert tcp any any -> any any (msg:"magic at 4"; content:"MAGIC"; offset:4; depth:5; sid:4;)
alert tcp any any -> any any (msg:"cmd not curl"; content:"/bin/sh"; content:!"curl"; sid:5;)
pass tcp 10.0.0.1 any -> any any (msg:"trusted"; content:"/etc/passwd"; sid:6;)
alert icmp any any -> any any (msg:"any icmp"; sid:7;)
alert udp any any -> any 53 (msg:"dns"; sid:8;)
alert ip any any -> any any (msg:"quarantine path"; srv6.segment:fc00:66::/32; sid:9;)
drop ip any any -> any any (msg:"args bad"; srv6.args:0xbad; sid:10;)
alert ipv6 any any -> any any (msg:"sl 2 active f1"; srv6.sl:2; srv6.active:fc00:2::f1:0/112; sid:11;)
alert udp any any <> 192.0.2.9 7000 (msg:"bidir"; sid:12;)
alert tcp any any -> any any (msg:"last not d6"; content:"xyzzy"; srv6.last:!fc00:3::d6; sid:13;)
alert tcp any any -> any any (msg:"no SRH"; content:"plain"; srv6.segments:0; sid:14;)
alert ip any any -> any any (msg:"outer src"; srv6.src:fc00:9::/32; sid:15;)
alert udp any any -> any 9 (msg:"tag"; srv6.tag:&0xff00=0x4200; sid:16;)
alert tcp any any -> any 25 (msg:"starts"; content:"HELO"; startswith; sid:17;)
alert tcp any any -> any 21 (msg:"ends"; content:".exe"; nocase; endswith; sid:18;)
alert udp any any -> any 7 (msg:"big"; dsize:100<>1000; sid:19;)
alert icmp any any -> any any (msg:"unreachable"; itype:3; icode:<4; sid:20;)
alert tcp any any -> any 8000 (msg:"pcre"; content:"user="; pcre:"/^[a-z]{3,}\d+;/iR"; pcre:!"/admin/i"; sid:21;)
`

// newEngine parses rules and compiles them with o.
func newEngine(t testing.TB, rules string, o Options) *Engine {
	t.Helper()
	rs, err := Parse(strings.NewReader(rules), "engine", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(rs, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestInspect(t *testing.T) {
	ids := newEngine(t, engineRules, Options{Mode: ModeIDS})
	ips := newEngine(t, engineRules, Options{Mode: ModeIPS})
	sr := addrs("fc00:3::d6", "fc00:2::f1:0")
	for _, tc := range []struct {
		name     string
		p        Packet
		want     []uint32 // sids fired, in order
		ipsDrops bool
	}{
		{"passwd v6", Packet{Segments: sr, SL: 1, Inner: pkt(t, "tcp", "2001:db8::1", "2001:db8::2", 1000, 80, "GET /etc/passwd HTTP/1.1")}, []uint32{1}, false},
		{"passwd wrong port", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1000, 81, "GET /etc/passwd")}, nil, false},
		{"benign", Packet{Segments: sr, SL: 1, Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1000, 80, "GET /index.html")}, nil, false},
		{"sqlmap nocase v4", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1000, 8080, "x\r\nUser-Agent: SQLMAP/1")}, []uint32{2}, true},
		{"sqlmap case matters without nocase", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1000, 8080, "x\r\nUser-Agent; sqlmap")}, nil, false},
		{"depth+within", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1, 2, "GET /x/admin")}, []uint32{3}, false},
		{"depth fails", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1, 2, " GET /x/admin")}, nil, false},
		{"within fails", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1, 2, "GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/admin")}, nil, false},
		{"offset ok", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1, 2, "1234MAGIC")}, []uint32{4}, false},
		{"offset too early", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1, 2, "123MAGIC")}, nil, false},
		{"depth too late", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1, 2, "12345MAGIC")}, nil, false},
		{"negated content absent", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1, 2, "wget x;/bin/sh")}, []uint32{5}, false},
		{"negated content present", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1, 2, "curl x|/bin/sh")}, nil, false},
		{"pass suppresses", Packet{Inner: pkt(t, "tcp", "10.0.0.1", "10.0.0.2", 1000, 80, "GET /etc/passwd User-Agent: sqlmap")}, nil, false},
		{"drop ordered first", Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1000, 80, "GET /etc/passwd User-Agent: sqlmap")}, []uint32{2, 1}, true},
		{"icmp4", Packet{Inner: pkt(t, "icmp", "10.0.0.3", "10.0.0.2", 0, 0, "ping")}, []uint32{7}, false},
		{"icmp6", Packet{Inner: pkt(t, "icmp", "2001:db8::1", "2001:db8::2", 0, 0, "ping")}, []uint32{7}, false},
		{"udp port index", Packet{Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 5000, 53, "q")}, []uint32{8}, false},
		{"udp other port", Packet{Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 5000, 54, "q")}, nil, false},
		{"segment prefix", Packet{Segments: addrs("fc00:3::d6", "fc00:66::1", "fc00:2::f1:0"), SL: 1, Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 2, "q")}, []uint32{9}, false},
		{"args", Packet{Segments: sr, SL: 1, Args: 0xbad, Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 2, "q")}, []uint32{10}, true},
		{"args other", Packet{Segments: sr, SL: 1, Args: 0xbae, Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 2, "q")}, nil, false},
		{"args without SRH", Packet{Args: 0xbad, Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 2, "q")}, nil, false},
		{"sl and active", Packet{Segments: addrs("fc00:3::d6", "fc00:5::1", "fc00:2::f1:7"), SL: 2, Inner: pkt(t, "udp", "2001:db8::1", "2001:db8::2", 1, 2, "q")}, []uint32{11}, false},
		{"sl and active: v4 inner", Packet{Segments: addrs("fc00:3::d6", "fc00:5::1", "fc00:2::f1:7"), SL: 2, Inner: pkt(t, "udp", "10.0.0.1", "10.0.0.2", 1, 2, "q")}, nil, false},
		{"sl wrong", Packet{Segments: addrs("fc00:3::d6", "fc00:5::1", "fc00:2::f1:7"), SL: 1, Inner: pkt(t, "udp", "2001:db8::1", "2001:db8::2", 1, 2, "q")}, nil, false},
		{"bidir forward", Packet{Inner: pkt(t, "udp", "10.0.0.3", "192.0.2.9", 1, 7000, "q")}, []uint32{12}, false},
		{"bidir reverse", Packet{Inner: pkt(t, "udp", "192.0.2.9", "10.0.0.3", 7000, 1, "q")}, []uint32{12}, false},
		{"bidir no", Packet{Inner: pkt(t, "udp", "192.0.2.9", "10.0.0.3", 7001, 1, "q")}, nil, false},
		{"negated last", Packet{Segments: addrs("fc00:3::d7", "fc00:2::f1:0"), SL: 1, Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 2, "xyzzy")}, []uint32{13}, false},
		{"negated last holds", Packet{Segments: sr, SL: 1, Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 2, "xyzzy")}, nil, false},
		{"segments count needs SRH", Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 2, "plain")}, nil, false},
		{"outer src", Packet{OuterSrc: netip.MustParseAddr("fc00:9::1"), Segments: sr, SL: 1, Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 2, "q")}, []uint32{15}, false},
		{"tag", Packet{Segments: sr, SL: 1, Tag: 0x42ff, Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 9, "q")}, []uint32{16}, false},
		{"tag other", Packet{Segments: sr, SL: 1, Tag: 0x43ff, Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 9, "q")}, nil, false},
		{"startswith", Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 25, "HELO x")}, []uint32{17}, false},
		{"startswith not at start", Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 25, " HELO x")}, nil, false},
		{"endswith", Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 21, "RETR a.exe.EXE")}, []uint32{18}, false},
		{"endswith not at end", Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 21, "RETR a.exe ")}, nil, false},
		{"dsize in range", Packet{Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 7, strings.Repeat("x", 200))}, []uint32{19}, false},
		{"dsize at bound", Packet{Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 7, strings.Repeat("x", 100))}, nil, false},
		{"itype icode", Packet{Inner: testutil.IPv4("10.0.0.3", "10.0.0.2", 1, false, []byte{3, 1, 0, 0, 0, 0, 0, 0, 'x'})}, []uint32{7, 20}, false},
		{"icode out", Packet{Inner: testutil.IPv4("10.0.0.3", "10.0.0.2", 1, false, []byte{3, 4, 0, 0, 0, 0, 0, 0, 'x'})}, []uint32{7}, false},
		{"pcre relative", Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 8000, "x user=Bob42; y")}, []uint32{21}, false},
		{"pcre not right after", Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 8000, "x user= Bob42; y")}, nil, false},
		{"pcre negated", Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 8000, "x user=bob42; ADMIN")}, nil, false},
		{"not ip", Packet{Inner: []byte{0x00, 0x11, 0x22}}, nil, false},
		{"truncated", Packet{Inner: pkt(t, "tcp", "10.0.0.9", "10.0.0.2", 1000, 80, "GET /etc/passwd")[:30]}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, fired := ids.Match(&tc.p, nil)
			var sids []uint32
			for _, r := range fired {
				sids = append(sids, r.SID)
			}
			if diff := cmp.Diff(tc.want, sids); diff != "" {
				t.Errorf("fired sids (-want +got):\n%s", diff)
			}
			if v != Forward {
				t.Errorf("IDS verdict = %v, want forward", v)
			}
			wantV := Forward
			if tc.ipsDrops {
				wantV = Drop
			}
			if v := ips.Inspect(&tc.p); v != wantV {
				t.Errorf("IPS verdict = %v, want %v", v, wantV)
			}
		})
	}
}

func TestDropUndecodable(t *testing.T) {
	e, err := New(nil, Options{Mode: ModeIPS, DropUndecodable: true})
	if err != nil {
		t.Fatal(err)
	}
	if v := e.Inspect(&Packet{Inner: []byte{0x45, 0}}); v != Drop {
		t.Errorf("verdict = %v, want drop", v)
	}
	if v := e.Inspect(&Packet{Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 2, "q")}); v != Forward {
		t.Errorf("verdict = %v, want forward", v)
	}
	e.Inspect(&Packet{Inner: []byte{0x20}})
	e.Inspect(&Packet{Inner: []byte{0x45, 0, 0, 10, 0, 0, 0, 0, 64, 6, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}}) // total length < header
	s := e.Stats()
	if s.Undecodable != 3 || s.Dropped != 3 || s.Inspected != 4 {
		t.Errorf("stats = %+v", s)
	}
	if diff := cmp.Diff(map[string]uint64{"truncated": 1, "not-ip": 1, "bad-header": 1}, s.UndecodableBy); diff != "" {
		t.Errorf("undecodable by reason (-want +got):\n%s", diff)
	}
}

// TestBacktracking: a relative content succeeds on the second occurrence
// of its predecessor.
func TestBacktracking(t *testing.T) {
	r, err := ParseRule(`alert tcp any any -> any any (content:"a="; content:"42"; distance:0; within:2; sid:1;)`, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := New([]*Rule{r}, Options{})
	_, fired := e.Match(&Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1, 2, "a=1&a=42")}, nil)
	if len(fired) != 1 {
		t.Errorf("fired %d rules, want 1", len(fired))
	}
}

func TestEVE(t *testing.T) {
	var out bytes.Buffer
	e := newEngine(t, engineRules, Options{Mode: ModeIPS, Alerts: &out})
	ts := time.Date(2026, 11, 25, 12, 0, 0, 123456000, time.UTC)
	p := &Packet{
		Time:     ts,
		OuterSrc: netip.MustParseAddr("fc00:1::1"), OuterDst: netip.MustParseAddr("fc00:2::f1:bad"),
		Segments: addrs("fc00:3::d6", "fc00:2::f1:bad"), SL: 1, Args: 0xbad,
		Inner: pkt(t, "tcp", "2001:db8::1", "2001:db8::2", 40000, 80, "GET /etc/passwd"),
	}
	if v := e.Inspect(p); v != Drop {
		t.Fatalf("verdict %v", v)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out.String())
	}
	var got []map[string]any
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		got = append(got, m)
	}
	want0 := map[string]any{
		"timestamp": "2026-11-25T12:00:00.123456+0000", "event_type": "alert",
		"src_ip": "2001:db8::1", "src_port": 40000.0, "dest_ip": "2001:db8::2", "dest_port": 80.0, "proto": "TCP",
		"alert": map[string]any{"action": "blocked", "gid": 1.0, "signature_id": 10.0, "rev": 0.0, "signature": "args bad", "category": "", "severity": 3.0},
		"srv6": map[string]any{"outer_src": "fc00:1::1", "outer_dst": "fc00:2::f1:bad", "segments": []any{"fc00:3::d6", "fc00:2::f1:bad"},
			"segments_left": 1.0, "active_segment": "fc00:2::f1:bad", "args": 2989.0, "tag": 0.0},
	}
	if diff := cmp.Diff(want0, got[0]); diff != "" {
		t.Errorf("first alert (-want +got):\n%s", diff)
	}
	a1 := got[1]["alert"].(map[string]any)
	if a1["action"] != "allowed" || a1["signature_id"] != 1.0 || a1["rev"] != 2.0 {
		t.Errorf("second alert = %v", a1)
	}
	// ICMP: no ports, type and code instead; no SRH: no srv6 object.
	out.Reset()
	e.Inspect(&Packet{Time: ts, Inner: pkt(t, "icmp", "10.0.0.3", "10.0.0.2", 0, 0, "ping")})
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"proto": "ICMP", "icmp_type": 8.0, "icmp_code": 0.0, "src_port": nil, "srv6": nil} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	if s := e.Stats(); s.Alerts != 3 || s.Dropped != 1 {
		t.Errorf("stats = %+v", s)
	}
}

// TestNoAllocs: a packet that matches nothing allocates nothing, with and
// without prefilter hits.
func TestNoAllocs(t *testing.T) {
	rules := genRules(t, 1000)
	e, err := New(rules, Options{Mode: ModeIPS, Alerts: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	p := &Packet{Segments: addrs("fc00:3::d6", "fc00:2::f1:0"), SL: 1, Inner: pkt(t, "tcp", "2001:db8::1", "2001:db8::2", 40000, 80, benignHTTP)}
	if n := testing.AllocsPerRun(100, func() { e.Inspect(p) }); n != 0 {
		t.Errorf("Inspect allocates %.1f times per benign packet", n)
	}
	if _, fired := e.Match(p, nil); len(fired) != 0 {
		t.Errorf("benign packet fired %d rules", len(fired))
	}
}

// TestACAgainstNaive compares the automaton with a naive search.
func TestACAgainstNaive(t *testing.T) {
	pats := [][]byte{[]byte("he"), []byte("She"), []byte("his"), []byte("hers"), []byte("\x00\xff"), []byte("s")}
	m, err := newACMatcher(pats)
	if err != nil {
		t.Fatal(err)
	}
	text := []byte("uSHErs ahishers \x00\xff\x00\xffs")
	type hit struct{ ID, End int }
	var got, want []hit
	m.scan(text, func(id int32, end int) { got = append(got, hit{int(id), end}) })
	for end := 1; end <= len(text); end++ {
		for id, p := range pats {
			if end >= len(p) && index(text[end-len(p):end], p, true) == 0 {
				want = append(want, hit{id, end})
			}
		}
	}
	sortHits := func(h []hit) {
		for i := 1; i < len(h); i++ {
			for j := i; j > 0 && (h[j].End < h[j-1].End || h[j].End == h[j-1].End && h[j].ID < h[j-1].ID); j-- {
				h[j], h[j-1] = h[j-1], h[j]
			}
		}
	}
	sortHits(got)
	sortHits(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hits (-want +got):\n%s", diff)
	}
}

const benignHTTP = "GET /static/css/site.min.css?v=20261125 HTTP/1.1\r\n" +
	"Host: www.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n" +
	"Accept: text/css,*/*;q=0.1\r\n" +
	"Accept-Language: en-US,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br\r\n" +
	"Referer: https://www.example.com/articles/2026/11/segment-routing.html\r\n" +
	"Connection: keep-alive\r\n" +
	"Cookie: session=3f9a1c0e7b2d4a6f8e0c1b3d5f7a9c2e; theme=dark\r\n\r\n"

// genRules parses SyntheticRules(n).
func genRules(t testing.TB, n int) []*Rule {
	t.Helper()
	rules, err := Parse(strings.NewReader(SyntheticRules(n)), "synthetic", nil)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// TestConcurrentInspect: worker queues share one engine (run with -race).
func TestConcurrentInspect(t *testing.T) {
	var out bytes.Buffer
	e := newEngine(t, engineRules, Options{Mode: ModeIPS, Alerts: &out})
	bad := &Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1000, 80, "GET /etc/passwd")}
	good := &Packet{Inner: pkt(t, "tcp", "10.0.0.3", "10.0.0.2", 1000, 80, "GET /")}
	const workers, n = 4, 200
	done := make(chan struct{})
	for w := 0; w < workers; w++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < n; i++ {
				e.Inspect(bad)
				e.Inspect(good)
			}
		}()
	}
	for w := 0; w < workers; w++ {
		<-done
	}
	if got := strings.Count(out.String(), "\n"); got != workers*n {
		t.Errorf("%d alert lines, want %d", got, workers*n)
	}
	if s := e.Stats(); s.Inspected != 2*workers*n || s.Alerts != workers*n {
		t.Errorf("stats = %+v", s)
	}
}

// TestHandBuiltRule: a Rule built without the parser works (the fast
// pattern is chosen by New, never a negated content).
func TestHandBuiltRule(t *testing.T) {
	r := &Rule{Action: ActionAlert, Proto: ProtoIP, Src: AddrSet{any: true}, Dst: AddrSet{any: true}, SID: 1,
		Contents: []Content{{Pattern: []byte("evil"), Negated: true}, {Pattern: []byte("ok")}}}
	e, err := New([]*Rule{r}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, fired := e.Match(&Packet{Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 2, "ok fine")}, nil); len(fired) != 1 {
		t.Errorf("fired %d, want 1", len(fired))
	}
	if _, fired := e.Match(&Packet{Inner: pkt(t, "udp", "10.0.0.3", "10.0.0.2", 1, 2, "ok evil")}, nil); len(fired) != 0 {
		t.Errorf("fired %d, want 0", len(fired))
	}
	// Unset address and port fields match anything.
	r2 := &Rule{Action: ActionAlert, Proto: ProtoTCP, SID: 2, Contents: []Content{{Pattern: []byte("ok")}}}
	e2, err := New([]*Rule{r2}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, fired := e2.Match(&Packet{Inner: pkt(t, "tcp", "2001:db8::1", "2001:db8::2", 1, 2, "ok")}, nil); len(fired) != 1 {
		t.Errorf("zero-value sets: fired %d, want 1", len(fired))
	}
}

// TestPrefilterAgainstNaive: on random patterns and payloads over a small
// alphabet (many overlaps, many root skips), the prefilter's candidates
// are exactly the rules whose pattern occurs (case-folded).
func TestPrefilterAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alpha := []byte("abAB/\x00")
	word := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return b
	}
	for round := 0; round < 200; round++ {
		var b prefilterBuilder
		var pats [][]byte
		for i := 0; i < 1+rng.IntN(20); i++ {
			p := word(1 + rng.IntN(4))
			pats = append(pats, p)
			b.add(p, int32(i))
		}
		pf, err := b.build()
		if err != nil {
			t.Fatal(err)
		}
		payload := word(rng.IntN(40))
		s := &scratch{mark: make([]uint32, len(pats))}
		s.reset()
		pf.scan(payload, s)
		got := map[int32]bool{}
		for _, c := range s.cands {
			got[c] = true
		}
		for i, p := range pats {
			if want := index(payload, p, true) >= 0; got[int32(i)] != want {
				t.Fatalf("round %d: pattern %q in %q: candidate %v, want %v", round, p, payload, got[int32(i)], want)
			}
		}
	}
}

// TestIndexAgainstAllRules: on random rule sets and packets, the engine
// (prefilter + header index, then evaluation) fires exactly the rules a
// plain evaluation of every rule fires: no candidate is ever lost.
func TestIndexAgainstAllRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"ab", "AB", "abc", "xyz", "b", "|00 ff|", "zz"}
	protos := []string{"ip", "tcp", "udp", "icmp", "ipv4", "ipv6"}
	ports := []string{"any", "80", "[80,81]", "1:100", "!80", "[!1:50]"}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	for round := 0; round < 1000; round++ {
		var b strings.Builder
		for i := 0; i < 1+rng.IntN(12); i++ {
			proto := pick(protos)
			sp, dp := "any", "any"
			if proto == "tcp" || proto == "udp" {
				sp, dp = pick(ports), pick(ports)
			}
			dir := "->"
			if rng.IntN(4) == 0 {
				dir = "<>"
			}
			var opts string
			for j := 0; j < rng.IntN(3); j++ {
				neg := ""
				if rng.IntN(4) == 0 {
					neg = "!"
				}
				opts += fmt.Sprintf(`content:%s"%s"; `, neg, pick(words))
				if rng.IntN(2) == 0 {
					opts += "nocase; "
				}
				if j > 0 && rng.IntN(2) == 0 {
					opts += "distance:0; "
				}
			}
			action := []string{"alert", "drop", "pass"}[rng.IntN(3)]
			fmt.Fprintf(&b, "%s %s any %s %s any %s (%ssid:%d;)\n", action, proto, sp, dir, dp, opts, i+1)
		}
		rules, err := Parse(strings.NewReader(b.String()), "random", nil)
		if err != nil {
			t.Fatalf("round %d: %v\n%s", round, err, b.String())
		}
		e, err := New(rules, Options{Mode: ModeIPS})
		if err != nil {
			t.Fatal(err)
		}
		payload := ""
		for j := 0; j < rng.IntN(5); j++ {
			payload += pick([]string{"ab", "AB", "c", "xyz", "\x00\xff", "q", "zz"})
		}
		proto := []string{"tcp", "udp", "icmp"}[rng.IntN(3)]
		src, dst := "10.0.0.1", "10.0.0.2"
		if rng.IntN(2) == 0 {
			src, dst = "2001:db8::1", "2001:db8::2"
		}
		pp := []uint16{5, 50, 80, 81, 99}
		p := &Packet{Inner: pkt(t, proto, src, dst, pp[rng.IntN(len(pp))], pp[rng.IntN(len(pp))], payload)}
		_, got := e.Match(p, nil)
		// Reference: every rule evaluated, pass first.
		var f flow
		if f.decode(p.Inner) != decodeOK {
			t.Fatal("decode")
		}
		var want []*Rule
		for _, r := range rules {
			if r.matches(&f, p, nil) {
				if r.Action == ActionPass {
					want = nil
					break
				}
				want = append(want, r)
			}
		}
		sortMatches(want)
		sids := func(rs []*Rule) (s []uint32) {
			for _, r := range rs {
				s = append(s, r.SID)
			}
			return s
		}
		if diff := cmp.Diff(sids(want), sids(got)); diff != "" {
			t.Fatalf("round %d: %s %s→%s payload %q\n%s\nfired (-want +got):\n%s", round, proto, src, dst, payload, b.String(), diff)
		}
	}
}
