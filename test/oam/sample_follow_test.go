package oam_test

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segchain/segchain/internal/oam"
	"github.com/segchain/segchain/internal/testutil"
)

// ipBatch runs lines as one `ip -6 -batch` in ns: a burst of changes.
func ipBatch(t *testing.T, ns string, lines ...string) {
	t.Helper()
	c := exec.Command("ip", "-6", "-n", ns, "-batch", "-")
	c.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("ip -batch %q: %v\n%s", lines, err, out)
	}
}

// ipShow is `ip -n ns ARGS`'s output lines that contain every one of has.
func ipShow(t *testing.T, ns string, args []string, has ...string) []string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v: %v\n%s", args, err, out)
	}
	var lines []string
next:
	for _, l := range strings.Split(string(out), "\n") {
		for _, h := range has {
			if !strings.Contains(l, h) {
				continue next
			}
		}
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// waitShow waits (a minute at most) for a line of `ip ARGS` with every
// one of has: what the marker followed, as iproute2 lists it.
func waitShow(t *testing.T, ns string, args []string, has ...string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); len(ipShow(t, ns, args, has...)) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			out, _ := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
			t.Fatalf("ip %v: no line with %q after a minute:\n%s", args, has, out)
		}
	}
}

var segsRE = regexp.MustCompile(`segs \d+ \[ ([^\]]*) \]`)

// The boundary marker follows the kernel's notifications, not a clock:
// while nothing changes it reads nothing (a sampled chain cost a route
// and a rule dump a second); a burst of 21 route replaces of the chain's
// route (one `ip -batch`) is one resync or two, and the O-flagged table
// ends as the burst did; a second change of the SIDs is followed; the
// chain's rule replaced by `ip rule` (another priority, narrower
// selectors) is followed too: the O-rule moves with it, and the filter
// counts exactly the packets the new rule selects (1 in 10 marked).
func TestSampleFollowsNotifications(t *testing.T) {
	e := setupOF(t, "../../examples/default.yaml", nil)
	pc := e.chain(t, "web")
	ns, _ := e.lab.Netns(pc.Ingress)
	s, _ := e.lab.Netns("s")
	d, _ := e.lab.Netns("d")
	table := strconv.Itoa(pc.Table)
	routeShow := []string{"-6", "route", "show", "table", table}
	oShow := []string{"-6", "route", "show", "table", "all", "proto", "205"}
	ruleShow := []string{"-6", "rule", "show"}
	const rate, count = 10, 300
	var other, web testutil.StreamResult
	rep := e.sampled(t, "web", rate, func() {
		resyncs := func() uint64 {
			t.Helper()
			n, ok := oam.BoundaryResyncs(ns)
			if !ok {
				t.Fatalf("no boundary marker in %s", ns)
			}
			return n
		}
		// Nothing changes for 3 s: nothing read (polling read 3 times).
		r0 := resyncs()
		time.Sleep(3 * time.Second)
		if r := resyncs(); r != r0 {
			t.Errorf("%d resyncs while nothing changed, want 0", r-r0)
		}

		// A burst of SID changes of web's route.
		lines := ipShow(t, ns, routeShow, "fc00:4d::/64", "encap seg6")
		if len(lines) != 1 {
			t.Fatalf("web's route in table %s: %q", table, lines)
		}
		m := segsRE.FindStringSubmatch(lines[0])
		if m == nil || len(strings.Fields(m[1])) != 3 {
			t.Fatalf("web's route %q: want 3 SIDs", lines[0])
		}
		sids := strings.Fields(m[1])
		with := func(segs ...string) string {
			return "route replace " + strings.TrimSpace(segsRE.ReplaceAllString(lines[0], "segs "+strings.Join(segs, ","))) + " table " + table
		}
		var burst []string
		for i := 0; i < 10; i++ {
			burst = append(burst, with(sids[0], sids[2]), with(sids...))
		}
		burst = append(burst, with(sids[0], sids[2]))
		r1 := resyncs()
		ipBatch(t, ns, burst...)
		waitShow(t, ns, oShow, fmt.Sprintf("segs 2 [ %s %s ]", sids[0], sids[2]))
		t.Logf("resyncs: idle 0, burst %d", resyncs()-r1)
		if n := resyncs() - r1; n < 1 || n > 2 {
			t.Errorf("a burst of %d route changes: %d resyncs, want 1 or 2", len(burst), n)
		}
		// Back to the three SIDs, by one change.
		r2 := resyncs()
		ipBatch(t, ns, with(sids...))
		waitShow(t, ns, oShow, fmt.Sprintf("segs 3 [ %s %s %s ]", sids[0], sids[1], sids[2]))
		if n := resyncs() - r2; n < 1 || n > 2 {
			t.Errorf("one route change: %d resyncs, want 1 or 2", n)
		}

		// web's rule replaced: 10 priorities earlier, UDP to port 7000 only.
		rules := ipShow(t, ns, ruleShow, "lookup "+table)
		var mine string
		for _, r := range rules {
			if !strings.Contains(r, "fwmark") {
				mine = r
			}
		}
		prio, err := strconv.Atoi(strings.TrimSuffix(strings.Fields(mine)[0], ":"))
		if err != nil {
			t.Fatalf("web's rule %q (of %q): %v", mine, rules, err)
		}
		// The chain's protocol, as apply stamps its rules (the marker
		// reads segchain's rules only).
		proto := regexp.MustCompile(`proto (\w+)`).FindStringSubmatch(mine)
		if proto == nil {
			t.Fatalf("web's rule %q: no protocol", mine)
		}
		r3 := resyncs()
		ipBatch(t, ns, fmt.Sprintf("rule del pref %d table %s", prio, table),
			fmt.Sprintf("rule add pref %d from fc00:1a::/64 to fc00:4d::/64 ipproto udp dport 7000 table %s proto %s", prio-10, table, proto[1]))
		waitShow(t, ns, ruleShow, fmt.Sprintf("%d:", prio-11), "ipproto udp", "dport 7000", "fwmark")
		if got := ipShow(t, ns, ruleShow, fmt.Sprintf("%d:", prio-1), "fwmark"); len(got) != 0 {
			t.Errorf("the O-rule of web's old rule is still there: %q", got)
		}
		if n := resyncs() - r3; n < 1 || n > 2 {
			t.Errorf("a rule replaced (one batch): %d resyncs, want 1 or 2", n)
		}
		// Port 7000: web's now; 7001: nobody's (not counted; not delivered).
		web = testutil.Stream(t, seqstream, s, d, "fc00:4d::d", 7000, count, 1000, nil)
		other = testutil.Stream(t, seqstream, s, d, "fc00:4d::d", 7001, 100, 1000, nil)
	})
	if web.Lost != 0 {
		t.Errorf("web's stream: %+v", web)
	}
	if rep.Marker != oam.MarkerBoundary || rep.Packets != count || rep.Marked != count/rate || rep.Incomplete != 0 {
		t.Errorf("marker %q: counted %d, marked %d, incomplete %d; want the boundary filter, %d, %d, 0 (port 7001: %+v)", rep.Marker, rep.Packets, rep.Marked, rep.Incomplete, count, count/rate, other)
	}
	noSampleState(t, e, pc.Ingress)
}
