package fw_test

import (
	"fmt"
	"strings"
	"testing"
)

// outcome is where a marked packet must end up.
type outcome struct {
	where string // ids, eg-direct, eg-via-ids, in (an ICMPv6 error back at the sender), "" = dropped
	da    string
	sl    int
	icmp  int // for where == "in": the ICMPv6 type
}

var (
	toIDS   = outcome{where: "ids", da: idsSID, sl: 2}
	dropped = outcome{}
)

// check compares the captured arrivals with the expectations by marker.
func check(t *testing.T, got map[string][]arrival, want map[string]outcome) {
	t.Helper()
	for m, w := range want {
		m = "fwt-" + m
		as := got[m]
		if w.where == "" {
			if len(as) != 0 {
				t.Errorf("%s: want dropped, got %+v", m, as)
			}
			continue
		}
		if len(as) == 0 {
			t.Errorf("%s: want %s (DA %s SL %d), got nothing", m, w.where, w.da, w.sl)
			continue
		}
		found := false
		for _, a := range as {
			if a.Where == w.where && (w.where == "in" && a.ICMP == w.icmp || w.where != "in" && a.DA == w.da && a.SL == w.sl) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: want %s DA %s SL %d icmp %d, got %+v", m, w.where, w.da, w.sl, w.icmp, as)
		}
		if w.where == "ids" || w.where == "eg-direct" {
			for _, a := range as {
				if (a.Where == "ids" || a.Where == "eg-direct") && a.Where != w.where {
					t.Errorf("%s: also seen at %s: %+v", m, a.Where, a)
				}
			}
		}
	}
}

// matchCase is one match option: a rule that accepts (go-next, policy
// drop) and packets that must and must not match it.
type matchCase struct {
	name string
	rule string
	pos  string   // scapy expression of a packet the rule matches
	negs []string // packets it must not match
	want outcome  // where pos goes (default: ids, SL 2)
}

func TestFWMatchOptions(t *testing.T) {
	tp := newTopo(t)
	u := func(src, dst string, sport, dport int, m string) string {
		return fmt.Sprintf("encap(IPv6(src='%s', dst='%s')/UDP(sport=%d, dport=%d)/mark('%s'))", src, dst, sport, dport, m)
	}
	// Segment lists other than CHAIN ([FINAL, EG, IDS, SID], SL 3).
	const (
		three   = "segs=[EG, IDS, SID]"                      // last entry 2, hdr len 6
		sl2     = "segs=[FINAL, EG, SID, 'fc00:9::1'], sl=2" // next SID EG, previous fc00:9::1
		psid9   = "segs=[FINAL, EG, IDS, SID, 'fc00:9::1'], sl=3"
		psid8   = "segs=[FINAL, EG, IDS, SID, 'fc00:8::1'], sl=3"
		last0   = "segs=[SID, 'fc00:9::1'], sl=0" // no next SID
		otherLS = "segs=['fc00:d9::1', EG, IDS, SID]"
	)
	inner := func(dst, m string) string {
		return fmt.Sprintf("IPv6(src='fc00:a::1', dst='%s')/UDP(sport=1, dport=2)/mark('%s')", dst, m)
	}
	adv := func(dst, opts, m string) string { return fmt.Sprintf("encap(%s, %s)", inner(dst, m), opts) }
	toEG := outcome{where: "eg-direct", da: egSID, sl: 1}
	cases := []matchCase{
		{name: "src", rule: "-s fc00:a::1 -p udp --dport 1001 -j ACCEPT",
			pos: u("fc00:a::1", finalDA, 1, 1001, "src+"), negs: []string{u("fc00:a::2", finalDA, 1, 1001, "src-")}},
		{name: "src-neg", rule: "! -s fc00:a::1 -p udp --dport 1002 -j ACCEPT",
			pos: u("fc00:a::2", finalDA, 1, 1002, "nsrc+"), negs: []string{u("fc00:a::1", finalDA, 1, 1002, "nsrc-")}},
		{name: "dst", rule: "-d fc00:d1::/64 -p udp --dport 1003 -j ACCEPT",
			pos: u("fc00:a::1", "fc00:d1::5", 1, 1003, "dst+"), negs: []string{u("fc00:a::1", "fc00:d9::5", 1, 1003, "dst-")}},
		{name: "dst-neg", rule: "! -d fc00:d1::/64 -p udp --dport 1004 -j ACCEPT",
			pos: u("fc00:a::1", "fc00:d9::5", 1, 1004, "ndst+"), negs: []string{u("fc00:a::1", "fc00:d1::5", 1, 1004, "ndst-")}},
		{name: "proto", rule: "-s fc00:a::5 -p tcp -j ACCEPT",
			pos:  "encap(IPv6(src='fc00:a::5', dst=FINAL)/TCP(sport=1, dport=5)/mark('proto+'))",
			negs: []string{u("fc00:a::5", finalDA, 1, 5, "proto-")}},
		{name: "proto-neg", rule: "! -p tcp -s fc00:a::6 -j ACCEPT",
			pos:  u("fc00:a::6", finalDA, 1, 6, "nproto+"),
			negs: []string{"encap(IPv6(src='fc00:a::6', dst=FINAL)/TCP(sport=1, dport=6)/mark('nproto-'))"}},
		{name: "sport", rule: "-p udp --sport 2007 --dport 1007 -j ACCEPT",
			pos: u("fc00:a::1", finalDA, 2007, 1007, "sport+"), negs: []string{u("fc00:a::1", finalDA, 2008, 1007, "sport-")}},
		{name: "dport-range", rule: "-s fc00:a::8 -p udp --dport 1008:1009 -j ACCEPT",
			pos: u("fc00:a::8", finalDA, 1, 1009, "drange+"), negs: []string{u("fc00:a::8", finalDA, 1, 1010, "drange-")}},
		{name: "dport-neg", rule: "-s fc00:a::9 -p udp ! --dport 1010 -j ACCEPT",
			pos: u("fc00:a::9", finalDA, 1, 1011, "ndport+"), negs: []string{u("fc00:a::9", finalDA, 1, 1010, "ndport-")}},
		{name: "sport-range-neg", rule: "-p udp ! --sport 3000:3999 --dport 1012 -j ACCEPT",
			pos: u("fc00:a::1", finalDA, 4000, 1012, "nsrange+"), negs: []string{u("fc00:a::1", finalDA, 3500, 1012, "nsrange-")}},
		{name: "icmpv6-type", rule: "-s fc00:a::b -p ipv6-icmp --icmpv6-type echo-request -j ACCEPT",
			pos:  "encap(IPv6(src='fc00:a::b', dst=FINAL)/ICMPv6EchoRequest(data=b'fwt-icmp+|pad.'))",
			negs: []string{"encap(IPv6(src='fc00:a::b', dst=FINAL)/ICMPv6EchoReply(data=b'fwt-icmp-|pad.'))"}},
		{name: "icmpv6-type-neg", rule: "-s fc00:a::c -p ipv6-icmp ! --icmpv6-type echo-request -j ACCEPT",
			pos:  "encap(IPv6(src='fc00:a::c', dst=FINAL)/ICMPv6EchoReply(data=b'fwt-nicmp+|pad.'))",
			negs: []string{"encap(IPv6(src='fc00:a::c', dst=FINAL)/ICMPv6EchoRequest(data=b'fwt-nicmp-|pad.'))"}},
		{name: "icmpv6-type-code", rule: "-s fc00:a::d -p ipv6-icmp --icmpv6-type port-unreachable -j ACCEPT",
			pos:  "encap(IPv6(src='fc00:a::d', dst=FINAL)/ICMPv6DestUnreach(code=4)/mark('icmpc+'))",
			negs: []string{"encap(IPv6(src='fc00:a::d', dst=FINAL)/ICMPv6DestUnreach(code=3)/mark('icmpc-'))"}},
		{name: "insert-original", rule: "-s fc00:10::2 -d fc00:d1::e -p udp --dport 1014 -j ACCEPT",
			pos:  "insert(UDP(sport=1, dport=1014)/mark('ins+'), segs=['fc00:d1::e', EG, IDS, SID])",
			negs: []string{"insert(UDP(sport=1, dport=1014)/mark('ins-'), segs=['fc00:d1::f', EG, IDS, SID])"}},
		{name: "inner-src-ipv4", rule: "-m srh --inner-src 10.0.0.0/8 -p udp --dport 1015 -j ACCEPT",
			pos:  "encap(IP(src='10.1.1.1', dst='10.2.2.2')/UDP(sport=1, dport=1015)/mark('v4+'))",
			negs: []string{"encap(IP(src='192.168.1.1', dst='10.2.2.2')/UDP(sport=1, dport=1015)/mark('v4-'))"}},
		{name: "outer-src", rule: "-s fc00:10::2 -m srh --inner-dst fc00:d1::16 -j ACCEPT",
			pos: adv("fc00:d1::16", "src=SRC", "osrc+"), negs: []string{adv("fc00:d1::16", "src='fc00:10::99'", "osrc-")}},
		{name: "outer-dst-neg", rule: "! -d fc00:2::f1:0 -m srh --inner-dst fc00:d1::17 -j ACCEPT",
			pos:  adv("fc00:d1::17", "segs=[FINAL, EG, IDS, 'fc00:2::f1:5']", "nodst+"),
			negs: []string{adv("fc00:d1::17", "segs=CHAIN", "nodst-")}},
		{name: "inner-src-neg", rule: "-m srh ! --inner-src fc00:a::18 --inner-dst fc00:d1::18 -j ACCEPT",
			pos:  "encap(IPv6(src='fc00:a::99', dst='fc00:d1::18')/UDP()/mark('nisrc+'))",
			negs: []string{"encap(IPv6(src='fc00:a::18', dst='fc00:d1::18')/UDP()/mark('nisrc-'))"}},
		{name: "next-hdr", rule: "-m srh --srh-next-hdr 17 --srh-lsid fc00:d1::19 -j ACCEPT",
			pos:  "insert(UDP(dport=9)/mark('nh+'), segs=['fc00:d1::19', EG, IDS, SID])",
			negs: []string{"insert(TCP(dport=9)/mark('nh-'), segs=['fc00:d1::19', EG, IDS, SID])"}},
		{name: "next-hdr-neg", rule: "-m srh ! --srh-next-hdr 41 --srh-lsid fc00:d1::20 -j ACCEPT",
			pos:  "insert(UDP(dport=9)/mark('nnh+'), segs=['fc00:d1::20', EG, IDS, SID])",
			negs: []string{"encap(IPv6(src='fc00:a::1', dst='fc00:d1::20')/UDP()/mark('nnh-'), segs=['fc00:d1::20', EG, IDS, SID])"}},
		{name: "len-eq", rule: "-m srh --srh-len-eq 8 --inner-dst fc00:d1::21 -j ACCEPT",
			pos: adv("fc00:d1::21", "segs=CHAIN", "leneq+"), negs: []string{adv("fc00:d1::21", three, "leneq-")}},
		{name: "len-gt", rule: "-m srh --srh-hdr-len-gt 6 --inner-dst fc00:d1::22 -j ACCEPT",
			pos: adv("fc00:d1::22", "segs=CHAIN", "lengt+"), negs: []string{adv("fc00:d1::22", three, "lengt-")}},
		{name: "len-lt", rule: "-m srh --srh-len-lt 8 --inner-dst fc00:d1::23 -j ACCEPT",
			pos: adv("fc00:d1::23", three, "lenlt+"), negs: []string{adv("fc00:d1::23", "segs=CHAIN", "lenlt-")}, want: toIDSsl1()},
		{name: "len-eq-neg", rule: "-m srh ! --srh-len-eq 8 --inner-dst fc00:d1::24 -j ACCEPT",
			pos: adv("fc00:d1::24", three, "nleneq+"), negs: []string{adv("fc00:d1::24", "segs=CHAIN", "nleneq-")}, want: toIDSsl1()},
		{name: "segs-eq", rule: "-m srh --srh-segs-eq 3 --inner-dst fc00:d1::25 -j ACCEPT",
			pos: adv("fc00:d1::25", "segs=CHAIN", "sleq+"), negs: []string{adv("fc00:d1::25", sl2, "sleq-")}},
		{name: "segs-gt", rule: "-m srh --srh-segs-left-gt 2 --inner-dst fc00:d1::26 -j ACCEPT",
			pos: adv("fc00:d1::26", "segs=CHAIN", "slgt+"), negs: []string{adv("fc00:d1::26", sl2, "slgt-")}},
		{name: "segs-lt", rule: "-m srh --srh-segs-lt 3 --inner-dst fc00:d1::27 -j ACCEPT",
			pos: adv("fc00:d1::27", sl2, "sllt+"), negs: []string{adv("fc00:d1::27", "segs=CHAIN", "sllt-")}, want: toEG},
		{name: "segs-eq-neg", rule: "-m srh ! --srh-segs-eq 3 --inner-dst fc00:d1::28 -j ACCEPT",
			pos: adv("fc00:d1::28", sl2, "nsleq+"), negs: []string{adv("fc00:d1::28", "segs=CHAIN", "nsleq-")}, want: toEG},
		{name: "last-eq", rule: "-m srh --srh-last-eq 3 --inner-dst fc00:d1::29 -j ACCEPT",
			pos: adv("fc00:d1::29", "segs=CHAIN", "lasteq+"), negs: []string{adv("fc00:d1::29", three, "lasteq-")}},
		{name: "last-gt", rule: "-m srh --srh-last-entry-gt 2 --inner-dst fc00:d1::30 -j ACCEPT",
			pos: adv("fc00:d1::30", "segs=CHAIN", "lastgt+"), negs: []string{adv("fc00:d1::30", three, "lastgt-")}},
		{name: "last-lt", rule: "-m srh --srh-last-lt 3 --inner-dst fc00:d1::31 -j ACCEPT",
			pos: adv("fc00:d1::31", three, "lastlt+"), negs: []string{adv("fc00:d1::31", "segs=CHAIN", "lastlt-")}, want: toIDSsl1()},
		{name: "tag", rule: "-m srh --srh-tag 5 --inner-dst fc00:d1::32 -j ACCEPT",
			pos: adv("fc00:d1::32", "tag=5", "tag+"), negs: []string{adv("fc00:d1::32", "tag=6", "tag-")}},
		{name: "tag-neg", rule: "-m srh ! --srh-tag 5 --inner-dst fc00:d1::33 -j ACCEPT",
			pos: adv("fc00:d1::33", "tag=6", "ntag+"), negs: []string{adv("fc00:d1::33", "tag=5", "ntag-")}},
		{name: "psid", rule: "-m srh --srh-psid fc00:9::/64 --inner-dst fc00:d1::34 -j ACCEPT",
			pos:  adv("fc00:d1::34", psid9, "psid+"),
			negs: []string{adv("fc00:d1::34", psid8, "psid-"), adv("fc00:d1::34", "segs=CHAIN", "psid-absent")}},
		{name: "psid-neg", rule: "-m srh ! --srh-psid fc00:9::/64 --inner-dst fc00:d1::35 -j ACCEPT",
			pos: adv("fc00:d1::35", psid8, "npsid+"),
			// No previous SID (SL = last entry): never matches, negated or not (ip6t_srh).
			negs: []string{adv("fc00:d1::35", psid9, "npsid-"), adv("fc00:d1::35", "segs=CHAIN", "npsid-absent")}},
		{name: "nsid", rule: "-m srh --srh-nsid fc00:3::1 --inner-dst fc00:d1::36 -j ACCEPT",
			pos: adv("fc00:d1::36", "segs=CHAIN", "nsid+"), negs: []string{adv("fc00:d1::36", sl2, "nsid-")}},
		{name: "nsid-neg", rule: "-m srh ! --srh-nsid fc00:3::1 --inner-dst fc00:d1::37 -j ACCEPT",
			pos:  adv("fc00:d1::37", sl2, "nnsid+"),
			negs: []string{adv("fc00:d1::37", "segs=CHAIN", "nnsid-"), adv("fc00:d1::37", last0, "nnsid-absent")}, want: toEG},
		{name: "lsid", rule: "-m srh --srh-lsid fc00:d1::/64 --inner-dst fc00:d1::38 -j ACCEPT",
			pos: adv("fc00:d1::38", "segs=CHAIN", "lsid+"), negs: []string{adv("fc00:d1::38", otherLS, "lsid-")}},
		{name: "lsid-neg", rule: "-m srh ! --srh-lsid fc00:d1::/64 --inner-dst fc00:d1::39 -j ACCEPT",
			pos: adv("fc00:d1::39", otherLS, "nlsid+"), negs: []string{adv("fc00:d1::39", "segs=CHAIN", "nlsid-")}},
	}
	var rules []string
	var script strings.Builder
	want := map[string]outcome{}
	for _, c := range cases {
		rules = append(rules, c.rule)
		fmt.Fprintf(&script, "pkts.append(%s)\n", c.pos)
		w := c.want
		if w.where == "" {
			w = toIDS
		}
		want[markerOf(t, c.pos)] = w
		for _, n := range c.negs {
			fmt.Fprintf(&script, "pkts.append(%s)\n", n)
			want[markerOf(t, n)] = dropped
		}
	}
	tp.installFW(t, "drop", rules...)
	caps := tp.capture(t)
	tp.send(t, script.String())
	check(t, caps.collect(), want)
}

func toIDSsl1() outcome { return outcome{where: "ids", da: idsSID, sl: 1} }

// markerOf extracts the fwt- marker name of a scapy expression.
func markerOf(t *testing.T, expr string) string {
	t.Helper()
	for _, pre := range []string{"mark('", "b'fwt-"} {
		if i := strings.Index(expr, pre); i >= 0 {
			rest := expr[i+len(pre):]
			return rest[:strings.IndexAny(rest, "'|")]
		}
	}
	t.Fatalf("no marker in %s", expr)
	return ""
}
