package main

import (
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/testutil"
)

func TestNodeFlagsTake(t *testing.T) {
	var f nodeFlags
	rest, err := f.take(strings.Fields("fc00::/112 --netns ns1 -p tcp --lab=l1 --dport 80 --node n1 -j DROP"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rest, " "); got != "fc00::/112 -p tcp --dport 80 -j DROP" {
		t.Errorf("rest %q", got)
	}
	if f.netns != "ns1" || f.lab != "l1" || f.node != "n1" {
		t.Errorf("flags %+v", f)
	}
	if _, err := (&nodeFlags{}).take([]string{"SID", "--netns"}); err == nil {
		t.Error("--netns without a value accepted")
	}
	for _, bad := range []nodeFlags{{lab: "x"}, {netns: "a", node: "b"}} {
		if _, err := bad.resolve(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestPrivilegedFlagsAnywhere: --netns (and --lab/--node) work after the
// SID in the raw-word verbs fw add/insert, and sid/fw take a lab node.
func TestPrivilegedFlagsAnywhere(t *testing.T) {
	ns := testutil.NewNetns(t, "h14-fl-")
	_, err := runRoot(t, "", "fw", "add", "fc00:2::f1:0/112", "--netns", ns, "-p", "tcp", "-j", "DROP")
	if err == nil || !strings.Contains(err.Error(), `in netns "`+ns+`"`) {
		t.Errorf("fw add SID --netns NS: %v (want the instance looked up in %s)", err, ns)
	}

	name := upLab(t, "")
	want := lab.NetnsName(name, "nfv1")
	t.Cleanup(func() { _, _ = runRoot(t, "", "sid", "--netns", want, "flush") })
	out, err := runRoot(t, "", "sid", "add", "fc00:2::77", "action", "End.X", "nh6", "fc00:25::5", "--lab", name, "--node", "nfv1")
	if err != nil {
		t.Fatalf("sid add ... action End.X ... --lab --node: %v\n%s", err, out)
	}
	if out, err := runRoot(t, "", "sid", "--netns", want, "show", "fc00:2::77"); err != nil || !strings.Contains(out, "End.X") {
		t.Errorf("the SID is not in %s: %v\n%s", want, err, out)
	}
	if _, err := runRoot(t, "", "fw", "list", "--lab", name, "--node", "nfv1"); err != nil {
		t.Errorf("fw list --lab --node: %v", err)
	}
	t.Setenv(labEnv, name)
	if _, err := runRoot(t, "", "sid", "--netns", "nfv1", "show"); err == nil || !strings.Contains(err.Error(), "--node nfv1") {
		t.Errorf("sid --netns NODE: %v, want a hint to --node", err)
	}
}
