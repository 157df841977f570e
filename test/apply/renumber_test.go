package apply

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/segchain/segchain/internal/dataplane"
	"github.com/segchain/segchain/internal/lab"
	"github.com/segchain/segchain/internal/nodestate"
	"github.com/segchain/segchain/internal/testutil"
)

// renumberDomain: a chain in both directions (policies, rules, SIDs and
// static routes on every node), native behaviours only.
const renumberDomain = "../../examples/bidirectional.yaml"

// protoState is what a lab's nodes hold of protocol p, per node: routes
// of every table and family, and rules (iproute2, numbers with -N).
func protoState(t *testing.T, l *lab.Lab, p int) string {
	t.Helper()
	var b strings.Builder
	for _, n := range l.NodeNames() {
		ns, _ := l.Netns(n)
		fmt.Fprintf(&b, "node %s:\n", n)
		for _, fam := range []string{"-6", "-4"} {
			b.WriteString(testutil.Exec(t, ns, "ip", "-N", fam, "route", "show", "table", "all", "proto", fmt.Sprint(p)))
			// ip rule filters nothing by protocol: keep the lines of p.
			for _, line := range strings.Split(testutil.Exec(t, ns, "ip", "-N", fam, "rule", "show"), "\n") {
				if strings.HasSuffix(line, fmt.Sprintf(" proto %d", p)) {
					b.WriteString(strings.TrimSuffix(line, fmt.Sprintf(" proto %d", p)) + "\n")
				}
			}
		}
	}
	return b.String()
}

// count is the number of routes and rules protoState lists.
func count(state string) int {
	n := 0
	for _, l := range strings.Split(state, "\n") {
		if l != "" && !strings.HasPrefix(l, "node ") {
			n++
		}
	}
	return n
}

// downgrade renumbers what the domain installed on every node to the
// protocol of an older segchain (nodestate.ProtoLegacy), as it would have
// installed it: routes replaced in place, rules added anew and the
// current ones deleted. With half, only every other route and rule.
func downgrade(t *testing.T, l *lab.Lab, half bool) {
	t.Helper()
	for _, n := range l.NodeNames() {
		ns, _ := l.Netns(n)
		h, err := dataplane.Open(ns)
		if err != nil {
			t.Fatal(err)
		}
		routes, err := h.Routes()
		if err == nil {
			for i, r := range routes {
				if half && i%2 == 1 {
					continue
				}
				if err = h.ReplaceRouteAs(r, nodestate.ProtoLegacy); err != nil {
					break
				}
			}
		}
		var rules []nodestate.Rule
		if err == nil {
			rules, err = h.Rules()
		}
		for i, r := range rules {
			if err != nil || half && i%2 == 1 {
				continue
			}
			old := r
			old.Proto = nodestate.ProtoLegacy
			if err = h.AddRule(old); err == nil {
				err = h.DeleteRule(r)
			}
		}
		h.Close()
		if err != nil {
			t.Fatalf("node %s: %v", n, err)
		}
	}
}

// TestApplyRenumbersLegacyProtocol: a node still holding the routes,
// rules and SIDs an older segchain stamped with protocol 197 (and a SID
// made by hand with 198), FRR's numbers, is taken over by apply: every
// route and rule renumbered to nodestate.Proto, the hand-made SID to
// nodestate.ProtoManual, with the chain's traffic flowing throughout (a
// 500/s stream that was flowing when apply started and ended loses
// nothing), the result exactly
// what a fresh apply installs, and plan then finds nothing to do.
// destroy on a node holding both numbers leaves neither.
func TestApplyRenumbersLegacyProtocol(t *testing.T) {
	e := newEnvFile(t, renumberDomain, "pr")
	run := func(verb string, args ...string) string {
		t.Helper()
		return e.Must(append([]string{verb, "-f", renumberDomain, "--lab", e.Name}, args...)...)
	}
	ping := func(n int) *exec.Cmd {
		return exec.Command("ip", "netns", "exec", e.NS("a"), "ping", "-6", "-n", "-q", "-i", "0.01", "-W", "1", "-c", fmt.Sprint(n), "fc00:3b::b")
	}

	run("apply")
	fresh := protoState(t, e.Lab, nodestate.Proto)
	if count(fresh) == 0 {
		t.Fatalf("apply installed nothing of protocol %d", nodestate.Proto)
	}
	if out, err := ping(3).CombinedOutput(); err != nil {
		t.Fatalf("ping a -> b after apply: %v\n%s", err, out)
	}

	// An older segchain's node: everything of 197, a hand-made SID of 198.
	downgrade(t, e.Lab, false)
	handMade := "fc00:2::99"
	testutil.Exec(t, e.NS("nfv1"), "ip", "-6", "route", "add", "local", handMade+"/128", "encap", "seg6local", "action", "End", "dev", "lo", "table", "main", "proto", fmt.Sprint(nodestate.ProtoManualLegacy))
	if got := protoState(t, e.Lab, nodestate.Proto); count(got) != 0 {
		t.Fatalf("downgrade left protocol %d:\n%s", nodestate.Proto, got)
	}
	if got := protoState(t, e.Lab, nodestate.ProtoLegacy); got != fresh {
		t.Fatalf("downgraded state differs from the applied one (-applied +downgraded):\n%s\n%s", fresh, got)
	}
	if out := run("plan"); !strings.Contains(out, fmt.Sprintf("proto %d", nodestate.ProtoLegacy)) {
		t.Errorf("plan does not show the renumbering:\n%s", out)
	}

	// apply under traffic: a sequence-numbered stream at 500/s that
	// testutil.Stream proves was flowing when apply started and ended.
	var out string
	r := testutil.Stream(t, "../../scripts/seqstream.py", e.NS("a"), e.NS("b"), "fc00:3b::b", 7300, 1500, 500, func() {
		out = run("apply")
	})
	t.Logf("apply:\n%s\nstream: %+v", out, r)
	if r.Lost != 0 || r.Unique != r.Sent || r.Duplicates != 0 {
		t.Errorf("traffic lost while apply renumbered: %d of %d arrived (%d lost, longest gap %d), %d duplicated", r.Unique, r.Sent, r.Lost, r.LongestGap, r.Duplicates)
	}

	if got := protoState(t, e.Lab, nodestate.ProtoLegacy); count(got) != 0 {
		t.Errorf("apply left protocol %d:\n%s", nodestate.ProtoLegacy, got)
	}
	if got := protoState(t, e.Lab, nodestate.Proto); got != fresh {
		t.Errorf("after renumbering, protocol %d differs from a fresh apply:\nfresh:\n%s\ngot:\n%s", nodestate.Proto, fresh, got)
	}
	sid := testutil.Exec(t, e.NS("nfv1"), "ip", "-N", "-6", "route", "show", "table", "all", handMade)
	if !strings.Contains(sid, fmt.Sprintf("proto %d", nodestate.ProtoManual)) {
		t.Errorf("hand-made SID not renumbered to %d: %q", nodestate.ProtoManual, sid)
	}
	if out := run("plan"); !strings.Contains(out, "no changes") {
		t.Errorf("plan after the renumbering apply is not empty:\n%s", out)
	}

	// destroy with both numbers on the nodes.
	downgrade(t, e.Lab, true)
	mixed := map[int]int{}
	for _, pr := range []int{nodestate.Proto, nodestate.ProtoLegacy} {
		mixed[pr] = count(protoState(t, e.Lab, pr))
	}
	if mixed[nodestate.Proto] == 0 || mixed[nodestate.ProtoLegacy] == 0 {
		t.Fatalf("half downgrade: %v objects by protocol, want both", mixed)
	}
	run("destroy")
	for _, pr := range []int{nodestate.Proto, nodestate.ProtoLegacy} {
		if got := protoState(t, e.Lab, pr); count(got) != 0 {
			t.Errorf("destroy left protocol %d:\n%s", pr, got)
		}
	}
	// destroy leaves hand-made SIDs alone.
	if sid := testutil.Exec(t, e.NS("nfv1"), "ip", "-6", "route", "show", "table", "all", handMade); !strings.Contains(sid, handMade) {
		t.Errorf("destroy removed the hand-made SID")
	}
}
