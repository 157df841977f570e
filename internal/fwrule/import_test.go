package fwrule

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestImportIP6TablesSave(t *testing.T) {
	f, err := os.Open("testdata/ip6tables-save.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := Import(f)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if res.Family != IPv6 {
		t.Errorf("Family = %d, want IPv6", res.Family)
	}
	if res.Policy == nil || *res.Policy != Drop {
		t.Errorf("Policy = %v, want drop", res.Policy)
	}
	want := []string{
		`-s fc00:1::/64 -d fc00:d1::/64 -p tcp --dport 80 -m comment --comment "web to d1" -j ACCEPT`,
		`-p tcp --dport 443 -j ACCEPT`,
		`! -s fc00:1::1/128 -p udp --sport 1000:2000 -j DROP`,
		`-p udp --dport 53 -j ACCEPT`,
		`-p ipv6-icmp --icmpv6-type 128 -j ACCEPT`,
		`-p ipv6-icmp --icmpv6-type 1/4 -j ACCEPT`,
		`-p ipv6-icmp ! --icmpv6-type 2 -j DROP`,
		`-m srh --srh-next-hdr 41 --srh-segs-left-gt 1 ! --srh-tag 5 -j ACCEPT`,
		`-m srh --srh-psid fc00:a::/64 ! --srh-nsid fc00:2::/48 --srh-lsid fc00:3::1/128 -j DROP`,
		`-m srh ! --srh-hdr-len-eq 4 --srh-last-entry-lt 3 -j ACCEPT`,
		`-p tcp --dport 23 -j REJECT --reject-with tcp-reset`,
		`-d fc00:d2::/64 -j REJECT --reject-with icmp6-port-unreachable`,
	}
	var got []string
	for _, r := range res.Rules {
		got = append(got, r.String())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules (-want +got):\n-%s\n+%s", strings.Join(want, "\n-"), strings.Join(got, "\n+"))
	}
	wantSkipped := []string{"table mangle skipped (1 rule(s))", "chain INPUT of the filter table skipped (2 rule(s))", "table nat skipped (1 rule(s))"}
	if strings.Join(res.Skipped, "|") != strings.Join(wantSkipped, "|") {
		t.Errorf("Skipped = %q, want %q", res.Skipped, wantSkipped)
	}
}

func TestImportIPTablesCounters(t *testing.T) {
	f, err := os.Open("testdata/iptables-save-counters.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := Import(f)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if res.Family != IPv4 || res.Policy == nil || *res.Policy != Accept || len(res.Rules) != 5 {
		t.Fatalf("Import = family %d policy %v %d rules", res.Family, res.Policy, len(res.Rules))
	}
	if s := res.Rules[3].String(); s != "-4 -p udp ! --dport 1024:65535 -j REJECT --reject-with icmp-host-prohibited" {
		t.Errorf("rule 3 = %s", s)
	}
	if r := res.Rules[2]; r.ICMP == nil || r.ICMP.Type != 3 || r.ICMP.Code != 3 || r.ICMP.AnyCode {
		t.Errorf("rule 2 ICMP = %+v", r.ICMP)
	}
}

func TestImportBadListsEveryLine(t *testing.T) {
	f, err := os.Open("testdata/ip6tables-save-bad.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = Import(f)
	var ie *ImportError
	if !errors.As(err, &ie) {
		t.Fatalf("Import error = %v, want *ImportError", err)
	}
	want := []LineError{
		{18, "-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", `"conntrack": unsupported match module`},
		{19, "-A FORWARD -i eth0 -o eth1 -j ACCEPT", `"-i": interface matches are not supported`},
		{20, "-A FORWARD -p tcp -m multiport --dports 80,443 -j ACCEPT", `"multiport": unsupported match module`},
		{21, "-A FORWARD -d fc00:d1::/64 -j LOGDROP", `"LOGDROP": jump to user-defined chain LOGDROP is not supported`},
		{22, `-A FORWARD -j LOG --log-prefix "fw: "`, `"LOG": unsupported target (want ACCEPT, DROP, REJECT or SEG6)`},
		{24, "-A FORWARD -p tcp", "missing -j target (ACCEPT, DROP, REJECT or SEG6): rules without one are not supported"},
	}
	if len(ie.Lines) != len(want) {
		t.Fatalf("got %d bad lines, want %d:\n%v", len(ie.Lines), len(want), err)
	}
	for i := range want {
		if ie.Lines[i] != want[i] {
			t.Errorf("bad line %d:\n got %+v\nwant %+v", i, ie.Lines[i], want[i])
		}
	}
	if !strings.HasPrefix(err.Error(), "6 unsupported line(s):\n  line 18: ") {
		t.Errorf("Error() = %s", err)
	}
}

func TestImportEdgeCases(t *testing.T) {
	tests := []struct {
		name, in string
		wantErr  string
		fam      Family
		nrules   int
		policy   string
	}{
		{"no header guesses IPv4", "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -s 10.0.0.0/8 -j DROP\nCOMMIT\n", "", IPv4, 1, "accept"},
		{"no header guesses IPv6", "*filter\n-A FORWARD -d fc00::/8 -j DROP\n-A FORWARD -j ACCEPT\nCOMMIT\n", "", IPv6, 2, ""},
		{"empty filter", "*filter\n:FORWARD DROP [0:0]\nCOMMIT\n", "", IPv6, 0, "drop"},
		{"no filter table", "*nat\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n", "line 3: no *filter table", 0, 0, ""},
		{"missing COMMIT", "*filter\n-A FORWARD -j DROP\n*nat\nCOMMIT\n", "line 3: table starts before COMMIT of the previous one", 0, 0, ""},
		{"rule outside table", "-A FORWARD -j DROP\n", "line 1: outside a table (no *filter line before it)", 0, 0, ""},
		{"bad policy", "*filter\n:FORWARD QUEUE [0:0]\nCOMMIT\n", "line 2: FORWARD policy QUEUE (want ACCEPT or DROP)", 0, 0, ""},
		{"not a rule", "*filter\n-I FORWARD -j DROP\nCOMMIT\n", "line 2: not a rule (want -A CHAIN ...)", 0, 0, ""},
		{"two filter tables", "*filter\nCOMMIT\n*filter\nCOMMIT\n", "line 3: second filter table", 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Import(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			pol := ""
			if res.Policy != nil {
				pol = res.Policy.String()
			}
			if res.Family != tt.fam || len(res.Rules) != tt.nrules || pol != tt.policy {
				t.Errorf("got family %d, %d rules, policy %q; want %d, %d, %q", res.Family, len(res.Rules), pol, tt.fam, tt.nrules, tt.policy)
			}
		})
	}
}
