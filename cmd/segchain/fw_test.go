package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/dataplane/firewall"
	"github.com/segchain/segchain/internal/testutil"
)

func runRoot(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestFwHelpIsAManual(t *testing.T) {
	out, err := runRoot(t, "", "fw", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"segchain sid add fc00:2::f1:0/112 End.AN.FW", "--seg6-action skip-next", "eval-args", "import", "atomically"} {
		if !strings.Contains(out, want) {
			t.Errorf("fw --help lacks %q", want)
		}
	}
	// add takes the rule words raw, yet --help still works.
	if out, err := runRoot(t, "", "fw", "add", "--help"); err != nil || !strings.Contains(out, "Append RULE") {
		t.Errorf("fw add --help: %v\n%s", err, out)
	}
}

func TestFwErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"fw", "add", "fc00:2::f1:0/112"}, "usage"},
		{[]string{"fw", "insert", "fc00:2::f1:0/112", "x", "-j", "DROP"}, "position"},
		{[]string{"fw", "policy", "fc00:2::f1:0/112", "skip-next"}, "want accept or drop"},
		{[]string{"fw", "list", "-o", "yaml"}, "output format"},
	}
	for _, tc := range tests {
		if _, err := runRoot(t, "", tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestFwCLI drives sid add End.AN.FW, every fw verb and sid show/del in a
// namespace.
func TestFwCLI(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetns(t, "fwc")
	testutil.Exec(t, ns, "ip", "link", "add", "fa", "type", "veth", "peer", "name", "fb")
	sid := "fc00:2::f1:0/112"
	t.Cleanup(func() { _, _ = runRoot(t, "", "sid", "--netns", ns, "flush") })
	steps := [][]string{
		{"sid", "--netns", ns, "add", sid, "End.AN.FW", "args", "16", "policy", "accept"},
		{"fw", "add", "--netns", ns, sid, "-s", "2001:db8::/32", "-p", "tcp", "--dport", "80", "-j", "DROP"},
		{"fw", "add", "--netns", ns, sid, "-4", "-s", "10.0.0.0/8", "-j", "REJECT"},
		{"fw", "insert", "--netns", ns, sid, "1", "-m", "srh", "--srh-segs-left-gt", "2", "-j", "SEG6", "--seg6-action", "skip-next"},
		{"fw", "args", "--netns", ns, sid, "7", "go-last"},
		{"fw", "del", "--netns", ns, sid, "3"},
		{"fw", "policy", "--netns", ns, sid, "drop"},
		{"sid", "--netns", ns, "clear-counters", sid},
		{"sid", "--netns", ns, "clear-counters"},
	}
	for _, s := range steps {
		if out, err := runRoot(t, "", s...); err != nil {
			t.Fatalf("%v: %v\n%s", s, err, out)
		}
	}
	out, err := runRoot(t, "", "fw", "list", "--netns", ns, sid, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var sts []firewall.Status
	if err := json.Unmarshal([]byte(out), &sts); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(sts) != 1 || len(sts[0].Rules) != 2 || sts[0].Rules[0].Rule != "-m srh --srh-segs-left-gt 2 -j SEG6 --seg6-action skip-next" ||
		sts[0].Instance.Policy.String() != "drop" || sts[0].Instance.Args[7].String() != "go-last" {
		t.Errorf("fw list: %s", out)
	}
	// An import with an unsupported line is refused whole, naming it.
	bad := "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -p tcp --dport 22 -j DROP\n-A FORWARD -m conntrack --ctstate NEW -j ACCEPT\nCOMMIT\n"
	if _, err := runRoot(t, bad, "fw", "import", "--netns", ns, sid, "-"); err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("import of an unsupported line: %v", err)
	}
	good := "*filter\n:FORWARD DROP [0:0]\n-A FORWARD -p tcp --dport 22 -j ACCEPT\nCOMMIT\n"
	if out, err := runRoot(t, good, "fw", "import", "--netns", ns, sid); err != nil || !strings.Contains(out, "1 rules, policy drop") {
		t.Errorf("import: %v\n%s", err, out)
	}
	out, err = runRoot(t, "", "sid", "--netns", ns, "show")
	if err != nil || !strings.Contains(out, sid+" End.AN.FW") {
		t.Errorf("sid show: %v\n%s", err, out)
	}
	if out, err := runRoot(t, "", "sid", "--netns", ns, "del", sid); err != nil {
		t.Errorf("sid del: %v\n%s", err, out)
	}
	if out, err := runRoot(t, "", "fw", "list", "--netns", ns, "-o", "json"); err != nil || strings.TrimSpace(out) != "[]" {
		t.Errorf("fw list after del: %v %q", err, out)
	}
}
