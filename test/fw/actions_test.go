package fw_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

func advPkt(dst, m string, extra ...string) string {
	opts := ""
	if len(extra) > 0 {
		opts = ", " + strings.Join(extra, ", ")
	}
	return fmt.Sprintf("pkts.append(encap(IPv6(src='fc00:a::1', dst='%s')/UDP(sport=1, dport=2)/mark('%s')%s))\n", dst, m, opts)
}

// TestFWActions: every action on a 4-segment list fw → ids → eg → final,
// then the policy.
func TestFWActions(t *testing.T) {
	tp := newTopo(t)
	tp.installFW(t, "accept",
		"-m srh --inner-dst fc00:d1::a1 -j SEG6 --seg6-action go-next",
		"-m srh --inner-dst fc00:d1::a2 -j SEG6 --seg6-action skip-next",
		"-m srh --inner-dst fc00:d1::a3 -j SEG6 --seg6-action go-last",
		"-m srh --inner-dst fc00:d1::a4 -j DROP",
		"-m srh --inner-dst fc00:d1::a5 -j REJECT",
		"-d fc00:d1::a6 -j ACCEPT",
		"-d fc00:d1::a7 -j REJECT --reject-with icmp6-adm-prohibited",
		"-p tcp --dport 5 -j SEG6 --seg6-action skip-next",
	)
	caps := tp.capture(t)
	tp.send(t, advPkt("fc00:d1::a1", "go-next")+advPkt("fc00:d1::a2", "skip-next")+advPkt("fc00:d1::a3", "go-last")+
		advPkt("fc00:d1::a4", "drop")+advPkt("fc00:d1::a5", "reject")+advPkt("fc00:d1::a6", "accept")+
		advPkt("fc00:d1::a7", "reject-adm")+advPkt("fc00:d1::a8", "policy-accept")+
		// insert mode: skip-next on the transport header after the SRH
		"pkts.append(insert(TCP(sport=1, dport=5)/mark('insert-skip')))\n")
	got := caps.collect()
	check(t, got, map[string]outcome{
		"go-next":       toIDS,
		"skip-next":     {where: "eg-direct", da: egSID, sl: 1},
		"go-last":       {where: "eg-direct", da: finalDA, sl: 0},
		"drop":          dropped,
		"reject":        {where: "in", icmp: 1},
		"accept":        toIDS,
		"reject-adm":    {where: "in", icmp: 1},
		"policy-accept": toIDS,
		"insert-skip":   {where: "eg-direct", da: egSID, sl: 1},
	})
	// tshark reads the ICMPv6 errors: port unreachable (code 4) for the
	// default REJECT, administratively prohibited (code 1) for the other;
	// both from the firewall node to the outer source.
	codes := map[string]bool{}
	for _, p := range testutil.Tshark(t, caps.files["in"], "icmpv6.type", "icmpv6.code", "ipv6.dst") {
		if p.First("icmpv6.type") == "1" {
			codes[p.First("icmpv6.code")] = true
			if p.First("ipv6.dst") != sender {
				t.Errorf("ICMPv6 error to %s, want %s", p.First("ipv6.dst"), sender)
			}
		}
	}
	if !codes["4"] || !codes["1"] {
		t.Errorf("ICMPv6 destination unreachable codes seen %v, want 4 (port) and 1 (adm-prohibited)", codes)
	}

	// The policy changes without touching the rules.
	must(t, tp.fw, "fw", "policy", fwSID, "drop")
	caps = tp.capture(t)
	tp.send(t, advPkt("fc00:d1::a8", "policy-drop")+advPkt("fc00:d1::a1", "go-next-again"))
	check(t, caps.collect(), map[string]outcome{"policy-drop": dropped, "go-next-again": toIDS})
}

// TestFWBranching is the SERA use case: fw → ids → eg, where a skip-next
// rule lets matching traffic bypass the IDS.
func TestFWBranching(t *testing.T) {
	tp := newTopo(t)
	tp.installFW(t, "accept", "-p udp --dport 53 -j SEG6 --seg6-action skip-next", "-4 -p udp --dport 53 -j SEG6 --seg6-action skip-next")
	chain := "segs=[EG, IDS, SID]"
	caps := tp.capture(t)
	tp.send(t, fmt.Sprintf(`
pkts.append(encap(IPv6(src='fc00:a::1', dst=FINAL)/UDP(sport=1, dport=53)/mark('dns'), %[1]s))
pkts.append(encap(IPv6(src='fc00:a::1', dst=FINAL)/UDP(sport=1, dport=80)/mark('web'), %[1]s))
pkts.append(encap(IP(src='10.0.0.1', dst='10.9.0.1')/UDP(sport=1, dport=53)/mark('dns4'), %[1]s))
`, chain))
	got := caps.collect()
	check(t, got, map[string]outcome{
		"dns":  {where: "eg-direct", da: egSID, sl: 0},
		"dns4": {where: "eg-direct", da: egSID, sl: 0},
		"web":  {where: "ids", da: idsSID, sl: 1},
	})
	// The IDS saw only web traffic and passed it on to eg itself.
	check(t, got, map[string]outcome{"web": {where: "eg-via-ids", da: egSID, sl: 0}})
	for _, a := range got["fwt-dns"] {
		if a.Where == "ids" || a.Where == "eg-via-ids" {
			t.Errorf("dns went through the IDS: %+v", a)
		}
	}
}

// TestFWEvalArgs: the action comes from the ARGS bits of the active SID;
// the sender changes it per packet, the firewall's rules stay the same.
func TestFWEvalArgs(t *testing.T) {
	tp := newTopo(t)
	tp.installFW(t, "drop", "-m srh --inner-dst fc00:d1::/64 -j SEG6 --seg6-action eval-args")
	withArgs := func(args int, m string) string {
		return fmt.Sprintf("pkts.append(encap(IPv6(src='fc00:a::1', dst=FINAL)/UDP(sport=1, dport=2)/mark('%s'), segs=[FINAL, EG, IDS, 'fc00:2::f1:%x']))\n", m, args)
	}
	caps := tp.capture(t)
	tp.send(t, withArgs(0, "args0")+withArgs(1, "args1")+withArgs(2, "args2")+withArgs(3, "args3")+withArgs(9, "args9"))
	check(t, caps.collect(), map[string]outcome{
		"args0": toIDS,
		"args1": dropped,
		"args2": {where: "eg-direct", da: egSID, sl: 1},
		"args3": {where: "eg-direct", da: finalDA, sl: 0},
		"args9": {where: "in", icmp: 4},
	})
	// An unknown ARGS value: Parameter Problem, code 0 (erroneous header
	// field), pointer 24 = the IPv6 destination address.
	var pp int
	for _, p := range testutil.Tshark(t, caps.files["in"], "icmpv6.type", "icmpv6.code", "icmpv6.pointer") {
		if p.First("icmpv6.type") != "4" {
			continue
		}
		pp++
		if p.First("icmpv6.code") != "0" || p.First("icmpv6.pointer") != "24" {
			t.Errorf("parameter problem code %s pointer %s, want code 0 pointer 24", p.First("icmpv6.code"), p.First("icmpv6.pointer"))
		}
	}
	if pp == 0 {
		t.Error("no ICMPv6 parameter problem for ARGS 9")
	}

	// Reprogram the table: 9 becomes skip-next, 1 go-next. Same rules.
	must(t, tp.fw, "fw", "args", fwSID, "9", "skip-next")
	must(t, tp.fw, "fw", "args", fwSID, "1", "go-next")
	caps = tp.capture(t)
	tp.send(t, withArgs(9, "args9-skip")+withArgs(1, "args1-next"))
	check(t, caps.collect(), map[string]outcome{
		"args9-skip": {where: "eg-direct", da: egSID, sl: 1},
		"args1-next": toIDS,
	})
}

// saveFromIPTables runs real ip6tables/iptables in a scratch namespace and
// returns what ip6tables-save/iptables-save prints.
func saveFromIPTables(t *testing.T, v6 bool, rules ...string) string {
	t.Helper()
	tool := "iptables"
	if v6 {
		tool = "ip6tables"
	}
	testutil.RequireTool(t, tool)
	ns := testutil.NewNetns(t, "ipt")
	for _, r := range rules {
		testutil.Exec(t, ns, append([]string{tool}, words(t, r)...)...)
	}
	return testutil.Exec(t, ns, tool+"-save")
}

// TestFWImport imports real ip6tables-save and iptables-save output, then
// checks the traffic and the listing.
func TestFWImport(t *testing.T) {
	tp := newTopo(t)
	save := saveFromIPTables(t, true,
		"-P FORWARD DROP",
		"-A INPUT -p tcp --dport 22 -j ACCEPT",
		"-A FORWARD -s fc00:a::/64 -p udp --dport 53 -j ACCEPT",
		"-A FORWARD -p ipv6-icmp --icmpv6-type echo-request -j ACCEPT",
		"-A FORWARD -m srh --srh-tag 7 -j ACCEPT",
		"-A FORWARD -d fc00:d1::bad -j REJECT",
		"-t nat -A POSTROUTING -j MASQUERADE",
	)
	file := filepath.Join(t.TempDir(), "rules.v6")
	if err := os.WriteFile(file, []byte(save), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, tp.fw, "sid", "add", fwSID, "End.AN.FW", "args", "16")
	out := must(t, tp.fw, "fw", "import", fwSID, file)
	t.Logf("import:\n%s", out)
	rules := listRules(t, tp.fw)
	if len(rules) != 4 {
		t.Fatalf("fw list after import: %d rules, want 4: %+v", len(rules), rules)
	}
	caps := tp.capture(t)
	tp.send(t, `
pkts.append(encap(IPv6(src='fc00:a::1', dst=FINAL)/UDP(sport=1, dport=53)/mark('dns')))
pkts.append(encap(IPv6(src='fc00:b::1', dst=FINAL)/UDP(sport=1, dport=53)/mark('dns-other')))
pkts.append(encap(IPv6(src='fc00:b::1', dst=FINAL)/ICMPv6EchoRequest(data=b'fwt-ping|pad.')))
pkts.append(encap(IPv6(src='fc00:b::1', dst=FINAL)/UDP()/mark('tag7'), tag=7))
pkts.append(encap(IPv6(src='fc00:b::1', dst='fc00:d1::bad')/UDP()/mark('bad')))
`)
	check(t, caps.collect(), map[string]outcome{
		"dns": toIDS, "dns-other": dropped, "ping": toIDS, "tag7": toIDS, "bad": {where: "in", icmp: 1},
	})

	// iptables-save (IPv4): basic rules on IPv4 originals of encap mode.
	save4 := saveFromIPTables(t, false,
		"-P FORWARD ACCEPT",
		"-A FORWARD -s 10.0.0.0/8 -p udp --dport 53 -j DROP",
		"-A FORWARD -p icmp --icmp-type echo-request -j DROP",
	)
	must(t, tp.fw, "fw", "flush", fwSID)
	// This time from standard input, as in `iptables-save | segchain fw import SID -`.
	if out, err := segchainStdin(save4, tp.fw, "fw", "import", fwSID, "-"); err != nil {
		t.Fatalf("fw import -: %v\n%s", err, out)
	}
	caps = tp.capture(t)
	tp.send(t, `
pkts.append(encap(IP(src='10.1.0.1', dst='10.9.0.1')/UDP(sport=1, dport=53)/mark('v4-dns')))
pkts.append(encap(IP(src='192.168.0.1', dst='10.9.0.1')/UDP(sport=1, dport=53)/mark('v4-dns-other')))
pkts.append(encap(IP(src='192.168.0.1', dst='10.9.0.1')/ICMP(type=8)/mark('v4-ping')))
pkts.append(encap(IP(src='192.168.0.1', dst='10.9.0.1')/ICMP(type=0)/mark('v4-pong')))
pkts.append(encap(IPv6(src='fc00:a::1', dst=FINAL)/UDP(sport=1, dport=53)/mark('v6-dns')))
`)
	check(t, caps.collect(), map[string]outcome{
		"v4-dns": dropped, "v4-dns-other": toIDS, "v4-ping": dropped, "v4-pong": toIDS,
		"v6-dns": toIDS, // IPv4 rules never match an IPv6 original
	})
}

// TestFWImportRejectsUnsupported: a save file with constructs the firewall
// cannot represent is refused as a whole, naming every bad line.
func TestFWImportRejectsUnsupported(t *testing.T) {
	tp := newTopo(t)
	save := saveFromIPTables(t, true,
		"-A FORWARD -p tcp --dport 80 -j ACCEPT",
		"-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT",
		"-A FORWARD -i eth0 -j DROP",
		"-N USERCHAIN", "-A FORWARD -j USERCHAIN",
	)
	file := filepath.Join(t.TempDir(), "bad.v6")
	if err := os.WriteFile(file, []byte(save), 0o644); err != nil {
		t.Fatal(err)
	}
	var lines []int
	for i, l := range strings.Split(save, "\n") {
		if strings.Contains(l, "conntrack") || strings.Contains(l, "-i eth0") || strings.Contains(l, "-j USERCHAIN") {
			lines = append(lines, i+1)
		}
	}
	must(t, tp.fw, "sid", "add", fwSID, "End.AN.FW", "args", "16")
	out, err := segchain(tp.fw, "fw", "import", fwSID, file)
	if err == nil {
		t.Fatalf("import of unsupported rules succeeded:\n%s", out)
	}
	for _, n := range lines {
		if !strings.Contains(out, fmt.Sprintf("line %d", n)) {
			t.Errorf("import error does not name line %d:\n%s", n, out)
		}
	}
	if rules := listRules(t, tp.fw); len(rules) != 0 {
		t.Errorf("a refused import left %d rules", len(rules))
	}
}

// TestFWManageAndCounters: add, insert, delete, flush through the CLI, and
// per-rule counters in `fw list -o json`.
func TestFWManageAndCounters(t *testing.T) {
	tp := newTopo(t)
	tp.installFW(t, "accept", "-m srh --inner-dst fc00:d1::c1 -j DROP", "-m srh --inner-dst fc00:d1::c3 -j ACCEPT")
	must(t, tp.fw, "fw", append([]string{"insert", fwSID, "2"}, words(t, "-m srh --inner-dst fc00:d1::c2 -j DROP")...)...)
	rules := listRules(t, tp.fw)
	if len(rules) != 3 || !strings.Contains(rules[1].Rule, "fc00:d1::c2") || !strings.Contains(rules[2].Rule, "fc00:d1::c3") {
		t.Fatalf("after insert at 2: %+v", rules)
	}
	caps := tp.capture(t)
	tp.send(t, strings.Repeat(advPkt("fc00:d1::c1", "c1"), 3)+strings.Repeat(advPkt("fc00:d1::c2", "c2"), 2)+advPkt("fc00:d1::c3", "c3"))
	check(t, caps.collect(), map[string]outcome{"c1": dropped, "c2": dropped, "c3": toIDS})
	rules = listRules(t, tp.fw)
	for i, want := range []uint64{3, 2, 1} {
		if i >= len(rules) || rules[i].Packets != want {
			t.Errorf("rule %d counters: %+v, want %d packets", i+1, rules, want)
		}
	}
	must(t, tp.fw, "fw", "del", fwSID, "1")
	rules = listRules(t, tp.fw)
	if len(rules) != 2 || !strings.Contains(rules[0].Rule, "fc00:d1::c2") {
		t.Fatalf("after del 1: %+v", rules)
	}
	caps = tp.capture(t)
	tp.send(t, advPkt("fc00:d1::c1", "c1-after-del")+advPkt("fc00:d1::c2", "c2-after-del"))
	check(t, caps.collect(), map[string]outcome{"c1-after-del": toIDS, "c2-after-del": dropped})
	must(t, tp.fw, "fw", "flush", fwSID)
	if rules := listRules(t, tp.fw); len(rules) != 0 {
		t.Fatalf("after flush: %+v", rules)
	}
	caps = tp.capture(t)
	tp.send(t, advPkt("fc00:d1::c2", "c2-after-flush"))
	check(t, caps.collect(), map[string]outcome{"c2-after-flush": toIDS})
	// Bad rules are refused by the CLI, naming the token.
	out, err := segchain(tp.fw, "fw", append([]string{"add", fwSID}, words(t, "-m srh --srh-tag 70000 -j DROP")...)...)
	if err == nil || !strings.Contains(out, "70000") {
		t.Errorf("bad rule: err %v, output %s", err, out)
	}
}

// listedRule is one rule of `fw list -o json`.
type listedRule struct {
	Rule    string
	Packets uint64
	Bytes   uint64
}

// listRules reads `fw list SID -o json`. It accepts the rules either at
// the top level or under "rules" (of an object or of the first element of
// an array), each with the rule text under "rule" (or "text") and
// "packets"/"bytes" either flat or under "counters".
func listRules(t *testing.T, ns string) []listedRule {
	t.Helper()
	out := must(t, ns, "fw", "list", fwSID, "-o", "json")
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("fw list -o json: %v\n%s", err, out)
	}
	var arr []any
	switch x := v.(type) {
	case map[string]any:
		arr, _ = x["rules"].([]any)
	case []any:
		if len(x) > 0 {
			if m, ok := x[0].(map[string]any); ok {
				if r, ok := m["rules"].([]any); ok {
					arr = r
					break
				}
			}
		}
		arr = x
	}
	num := func(m map[string]any, k string) uint64 {
		if f, ok := m[k].(float64); ok {
			return uint64(f)
		}
		if c, ok := m["counters"].(map[string]any); ok {
			if f, ok := c[k].(float64); ok {
				return uint64(f)
			}
		}
		return 0
	}
	var res []listedRule
	for _, e := range arr {
		m, ok := e.(map[string]any)
		if !ok {
			t.Fatalf("fw list -o json: unexpected shape\n%s", out)
		}
		r := listedRule{Packets: num(m, "packets"), Bytes: num(m, "bytes")}
		for _, k := range []string{"rule", "text", "spec"} {
			if s, ok := m[k].(string); ok {
				r.Rule = s
			}
		}
		res = append(res, r)
	}
	return res
}

// TestFWImportNotesSkipped: importing a save file whose other tables and
// chains are skipped tells the user so (fwrule.ImportResult.Skipped), as
// the import contract says — "skipped with a note", never silently.
func TestFWImportNotesSkipped(t *testing.T) {
	tp := newTopo(t)
	save := saveFromIPTables(t, true,
		"-A FORWARD -p udp --dport 53 -j ACCEPT",
		"-A INPUT -p tcp --dport 22 -j ACCEPT",
		"-t nat -A POSTROUTING -j MASQUERADE",
	)
	file := filepath.Join(t.TempDir(), "rules.v6")
	if err := os.WriteFile(file, []byte(save), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, tp.fw, "sid", "add", fwSID, "End.AN.FW", "args", "16")
	out := must(t, tp.fw, "fw", "import", fwSID, file)
	for _, want := range []string{"INPUT", "nat"} {
		if !strings.Contains(out, want) {
			t.Errorf("fw import output does not note the skipped %s rules:\n%q", want, out)
		}
	}
}

// TestFWRejectQuotesWholePacket: an ICMPv6 error quotes as much of the
// invoking packet as fits in the minimum MTU (RFC 4443 section 2.4 (c)),
// so a short rejected packet comes back whole.
func TestFWRejectQuotesWholePacket(t *testing.T) {
	tp := newTopo(t)
	tp.installFW(t, "accept", "-m srh --inner-dst fc00:d1::ee -j REJECT")
	caps := tp.capture(t)
	// 40 + 40 (SRH, 2 segments) + 40 + 8 + 7 = 135 bytes: not a multiple of 4.
	tp.send(t, "pkts.append(encap(IPv6(src='fc00:a::1', dst='fc00:d1::ee')/UDP(sport=1, dport=2)/Raw(b'fwt-odd'), segs=[FINAL, SID], sl=1))\n")
	caps.collect()
	var n int
	for _, p := range testutil.Tshark(t, caps.files["in"], "icmpv6.type", "ipv6.plen") {
		if p.First("icmpv6.type") != "1" {
			continue
		}
		n++
		// The first ipv6.plen is the error's own: 8 (ICMPv6 header) + 135.
		if got := p.First("ipv6.plen"); got != "143" {
			t.Errorf("ICMPv6 error payload length %s, want 143 (8 + the whole 135-byte packet)", got)
		}
	}
	if n == 0 {
		t.Fatal("no ICMPv6 error")
	}
}
