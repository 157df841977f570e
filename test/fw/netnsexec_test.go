package fw_test

import (
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/testutil"
)

func ipNetnsExec(t *testing.T, ns string, args ...string) string {
	t.Helper()
	return testutil.IPNetnsExec(t, segchainBin, ns, args...)
}

// TestFWUnderIPNetnsExec: the firewall SID and its rules, each added by
// its own `ip netns exec NS segchain` command, persist after the command:
// a second, separate `ip netns exec` invocation and `--netns NS` both show
// them, and traffic is filtered by them.
func TestFWUnderIPNetnsExec(t *testing.T) {
	tp := newTopo(t)
	ipNetnsExec(t, tp.fw, "sid", "add", fwSID, "End.AN.FW", "args", "16")
	ipNetnsExec(t, tp.fw, "fw", "add", fwSID, "-d", "fc00:d1::b1", "-j", "DROP")
	ipNetnsExec(t, tp.fw, "fw", "add", fwSID, "-m", "srh", "--inner-dst", "fc00:d1::b2", "-j", "SEG6", "--seg6-action", "go-last")
	for _, show := range []string{
		ipNetnsExec(t, tp.fw, "sid", "show", fwSID),
		must(t, tp.fw, "sid", "show", fwSID),
	} {
		if !strings.Contains(show, fwSID+" End.AN.FW") || !strings.Contains(show, "rules 2") {
			t.Fatalf("firewall SID with 2 rules not shown after the adding commands exited:\n%s", show)
		}
	}
	for _, list := range []string{ipNetnsExec(t, tp.fw, "fw", "list", fwSID), must(t, tp.fw, "fw", "list", fwSID)} {
		if !strings.Contains(list, "-d fc00:d1::b1") || !strings.Contains(list, "--seg6-action go-last") {
			t.Fatalf("rules not listed:\n%s", list)
		}
	}
	caps := tp.capture(t)
	tp.send(t, advPkt("fc00:d1::b1", "nsexec-drop")+advPkt("fc00:d1::b2", "nsexec-go-last")+advPkt("fc00:d1::b3", "nsexec-policy"))
	check(t, caps.collect(), map[string]outcome{
		"nsexec-drop":    dropped,
		"nsexec-go-last": {where: "eg-direct", da: finalDA, sl: 0},
		"nsexec-policy":  toIDS,
	})
}
